package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/consumers/receipts"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "listen on `HOST:PORT`")
	secretEnv := flag.String("secret-env", "SETTLE_WEBHOOK_SECRET", "environment `VARIABLE` holding the signing secret (serve's --webhook-secret-env)")
	dbPath := flag.String("db", "", "SQLite `file` for settlements and applied event ids (default: webhook-receiver.db in your user cache directory, settle-examples/)")
	tolerance := flag.Duration("tolerance", 5*time.Minute, "refuse a signature whose timestamp is further than this `duration` from this host's clock")
	flag.Parse()
	if err := run(*addr, *secretEnv, *dbPath, *tolerance); err != nil {
		fmt.Fprintln(os.Stderr, "webhook-receiver:", err)
		os.Exit(1)
	}
}

func run(addr, secretEnv, dbPath string, tolerance time.Duration) error {
	secret := os.Getenv(secretEnv)
	if secret == "" {
		return errors.Errorf("--secret-env: environment variable %q is not set", secretEnv)
	}
	if dbPath == "" {
		var err error
		if dbPath, err = receipts.DefaultDBPath("webhook-receiver.db"); err != nil {
			return err
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	db, err := receipts.OpenSQLite(dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return err
	}
	dedup, err := receipts.NewDeduper(ctx, db, "")
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	r := &receiver{secret: []byte(secret), tolerance: tolerance, now: time.Now, db: db, dedup: dedup, out: os.Stdout}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	fmt.Printf("receiving settlements at http://%s/ (database %s); Ctrl-C to stop\n", ln.Addr(), dbPath)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	return srv.Shutdown(sctx)
}
