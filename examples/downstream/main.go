package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log/slog"
	neturl "net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/consumers/receipts"
)

func main() {
	url := flag.String("nats-url", nats.DefaultURL, "NATS server `URL` holding settle's stream")
	stream := flag.String("stream", "SETTLE_INTENTS", "the intents `stream`")
	route := flag.String("route", "social_post", "announce confirmed receipts of this `route`")
	durable := flag.String("durable", "announcer", "durable consumer `name` (its position survives restarts)")
	dbPath := flag.String("db", "", "SQLite `file` for announcements and applied event ids (default: downstream.db in your user cache directory, settle-examples/)")
	flag.Parse()
	if err := run(*url, *stream, *route, *durable, *dbPath); err != nil {
		fmt.Fprintln(os.Stderr, "downstream:", err)
		os.Exit(1)
	}
}

func run(url, stream, route, durable, dbPath string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	if dbPath == "" {
		var err error
		if dbPath, err = receipts.DefaultDBPath("downstream.db"); err != nil {
			return err
		}
	}
	db, err := receipts.OpenSQLite(dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS announcements (
		event_id    TEXT NOT NULL,
		intent_id   TEXT NOT NULL,
		external_id TEXT NOT NULL,
		live_url    TEXT NOT NULL,
		announced   TEXT NOT NULL
	)`); err != nil {
		return err
	}
	dedup, err := receipts.NewDeduper(ctx, db, "")
	if err != nil {
		return err
	}

	nc, err := nats.Connect(url, nats.Name("settle-downstream-example"), nats.MaxReconnects(-1))
	if err != nil {
		return errors.Errorf("connect %s: %w", redact(url), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}

	announce := func(ctx context.Context, d receipts.Delivery) error {
		rc := d.Receipt()
		now := time.Now().UTC().Format(time.RFC3339)
		// The row and the event id commit together, or not at all.
		applied, err := dedup.ApplyOnce(ctx, d.EventID, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO announcements (event_id, intent_id, external_id, live_url, announced)
				VALUES (?, ?, ?, ?, ?)`, d.EventID, d.Event.IntentID, rc.ExternalID, rc.LiveURL, now)
			return err
		})
		if err != nil {
			return err // Nak'ed; redelivered with backoff
		}
		if !applied {
			fmt.Printf("already announced %s (delivery %d): skipped\n", d.EventID, d.NumDelivered)
			return nil
		}
		fmt.Printf("announced %s: %s %s (%s)\n", d.Event.IntentID, rc.ExternalID, rc.LiveURL, d.Event.Type)
		return nil
	}

	stop, err := receipts.Subscribe(ctx, js, receipts.SubscribeConfig{
		Stream: stream, Durable: durable, Routes: []string{route},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}, announce)
	if err != nil {
		return err
	}
	fmt.Printf("announcing confirmed receipts of route %s from %s (durable %s, database %s); Ctrl-C to stop\n", route, redact(url), durable, dbPath)
	<-ctx.Done()
	stop()
	return nil
}

// redact drops the password of a URL (nats://reader:PASSWORD@host) before
// it is printed.
func redact(u string) string {
	if p, err := neturl.Parse(u); err == nil && p.User != nil {
		return p.Redacted()
	}
	return u
}
