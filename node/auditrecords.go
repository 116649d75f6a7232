package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/consumers/audit"
	"github.com/settle-dev/settle/projector"
)

// AuditRecords gives the audit settle's records of the log outside it —
// the views (every event they applied) and the high-water mark — so that
// it names the acknowledged events the log lost, and, with projection, the
// views to compare with the log. Missing files are not an error (a log
// audited without them is checked for holes and version gaps only); a
// note says what was not available. The returned function closes them.
func (o *Offline) AuditRecords(ctx context.Context, cfg *audit.AuditConfig, views, highWaterPath, projection string, stderr io.Writer) (func(), error) {
	var closers []io.Closer
	done := func() {
		for _, c := range closers {
			_ = c.Close()
		}
	}
	if views != "" {
		k, err := projector.OpenKnown(ctx, views)
		switch {
		case err == nil:
			cfg.Known = k
		case errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(stderr, "audit: no views at %s: lost events are found by holes and version gaps only\n", views)
		default:
			return done, errors.Errorf("--views: %w", err)
		}
	}
	if highWaterPath != "" {
		hw, err := ReadHighWater(highWaterPath)
		if err != nil {
			return done, errors.Errorf("--high-water: %w", err)
		}
		if hw.Stream == "" || hw.Stream == cfg.Stream || (cfg.Stream == "" && hw.Stream == "SETTLE_INTENTS") {
			cfg.HighWater = hw.LastSeq
			cfg.Accepted = hw.Accepted
		}
	}
	if c, ok := cfg.Known.(io.Closer); ok {
		closers = append(closers, c)
	}
	if projection == "" {
		return done, nil
	}
	if _, err := os.Stat(projection); err != nil {
		return done, errors.Errorf("--projection: %w", err)
	}
	p, err := projector.Open(ctx, o.JS, projector.Config{Stream: cfg.Stream, DBPath: projection,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	switch {
	case errors.Is(err, projector.ErrStreamMismatch):
		// The stream is not what the views projected (shorter, or
		// another): the loss checks say what is gone.
		fmt.Fprintf(stderr, "audit: the projection is not compared: %v\n", err)
	case err != nil:
		return done, err
	default:
		closers = append(closers, p)
		cfg.Projection = p
	}
	return done, nil
}
