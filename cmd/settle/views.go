package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/projector"
)

// views: settle views rebuild --data DIR [--nats-url URL]. The views are
// derived from the log: rebuilding moves the old file aside and projects
// the whole stream again. It takes the data directory's lock, so it never
// runs beside a serve on the same directory.
func (m *Main) views(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "rebuild" {
		fmt.Fprintln(m.Stderr, "usage: settle views rebuild --data DIR [--nats-url URL]")
		return errUsage
	}
	fs := flag.NewFlagSet("views rebuild", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	data := fs.String("data", "", "the data `DIR` of a stopped settle serve (its views.db is rebuilt)")
	natsURL := fs.String("nats-url", "", "read the stream from this NATS `URL` (serve ran with --nats-url); default: the embedded store in DIR")
	stream := fs.String("stream", "SETTLE_INTENTS", "the intents `stream`")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	if *data == "" || fs.NArg() > 0 {
		fmt.Fprintln(m.Stderr, "usage: settle views rebuild --data DIR [--nats-url URL]")
		return errUsage
	}
	dd, err := lockDataDir(*data, "settle views rebuild", false)
	if err != nil {
		return errors.Errorf("views rebuild: %w", err)
	}
	defer dd.Unlock()
	var nc *nats.Conn
	if *natsURL == "" {
		if !isDir(dd.Store()) {
			return errors.WithHint(errors.Errorf("views rebuild: --data %s: no JetStream store at %s", *data, dd.Store()),
				"give the directory settle serve --data used, or --nats-url when serve used an external server")
		}
		srv, err := embedded.Start(embedded.Config{Dir: dd.Store(), Durability: embedded.SyncAlways, Port: -1})
		if err != nil {
			return errors.Errorf("views rebuild: %w", err)
		}
		defer srv.Stop()
		nc, err = srv.Connect(nats.Name("settle-views"))
		if err != nil {
			return errors.Errorf("views rebuild: connect: %w", err)
		}
	} else {
		if nc, err = nats.Connect(*natsURL, nats.Name("settle-views")); err != nil {
			return errors.Errorf("views rebuild: connect %s: %w", redactURL(*natsURL), err)
		}
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return errors.Errorf("views rebuild: %w", err)
	}
	if _, err := js.Stream(ctx, *stream); err != nil {
		return errors.Errorf("views rebuild: stream %s: %w", *stream, err)
	}
	aside, err := moveViewsAside(dd.Views())
	if err != nil {
		return errors.Errorf("views rebuild: %w", err)
	}
	if err := privateViews(dd.Views()); err != nil {
		return errors.Errorf("views rebuild: %w", err)
	}
	cfg := projector.DefaultConfig()
	cfg.Stream, cfg.DBPath = *stream, dd.Views()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := projector.Open(ctx, js, cfg)
	if err != nil {
		return errors.Errorf("views rebuild: %w", err)
	}
	defer p.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	err = p.CatchUp(cctx)
	cancel()
	if err != nil {
		return errors.Errorf("views rebuild: %w", err)
	}
	cp, err := p.Checkpoint(ctx)
	if err != nil {
		return errors.Errorf("views rebuild: %w", err)
	}
	counts, err := p.CountByState(ctx)
	if err != nil {
		return errors.Errorf("views rebuild: %w", err)
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	fmt.Fprintf(m.Stdout, "views rebuilt: %s from stream %s at sequence %d, %d intent(s); the old views are at %s\n", dd.Views(), *stream, cp, n, aside)
	return nil
}
