package main

import (
	"context"
	"os"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/cmd/settle/internal/app"
)

// demo: app.Demo in --keep DIR, or in a temporary directory removed after.
func (m *Main) demo(ctx context.Context, args []string) error {
	fs := m.flagSet("demo", "[--keep DIR]")
	keep := fs.String("keep", "", "store the JetStream data in `DIR` and keep it (default: a temporary directory, removed)")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	dir := *keep
	if dir == "" {
		d, err := os.MkdirTemp("", "settle-demo-")
		if err != nil {
			return errors.Errorf("demo: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	return app.Demo(ctx, dir, m.Stdout, m.Stderr)
}
