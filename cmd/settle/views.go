package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/cockroachdb/errors"
	"github.com/settle-dev/settle/node"
)

// views: settle views rebuild --data DIR [--nats-url URL]. The views are
// derived from the log: rebuilding moves the old file aside and projects
// the whole stream again. It takes the data directory's lock, so it never
// runs beside a serve on the same directory.
func (m *Main) views(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "rebuild" {
		return m.groupUsage(args, "usage: settle views rebuild --data DIR [--nats-url URL]")
	}
	fs := m.flagSet("views rebuild", "--data DIR [--nats-url URL]")
	data := fs.String("data", "", "the data `DIR` of a stopped settle serve (its views.db is rebuilt)")
	natsURL := fs.String("nats-url", "", "read the stream from this NATS `URL` (serve ran with --nats-url); default: the embedded store in DIR")
	stream := fs.String("stream", "SETTLE_INTENTS", "the intents `stream`")
	if err := m.parse(fs, args[1:]); err != nil {
		return err
	}
	if *data == "" || fs.NArg() > 0 {
		fmt.Fprintln(m.Stderr, "usage: settle views rebuild --data DIR [--nats-url URL]")
		return errUsage
	}
	abs, err := filepath.Abs(*data)
	if err != nil {
		return errors.Errorf("views rebuild: --data %s: %w", *data, err)
	}
	off, err := node.OpenOffline(abs, filepath.Join(abs, node.JetStreamDir), *natsURL, "settle views rebuild", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return errors.Errorf("views rebuild: --data %s: %w", *data, err)
	}
	defer off.Close()
	r, err := off.RebuildViews(ctx, *stream)
	if err != nil {
		return errors.Errorf("views rebuild: %w", err)
	}
	fmt.Fprintf(m.Stdout, "views rebuilt: %s from stream %s at sequence %d, %d intent(s); the old views are at %s\n", off.Dir.Views(), *stream, r.Checkpoint, r.Intents, r.Aside)
	return nil
}
