package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/consumers/audit"
	"github.com/settle-dev/settle/projector"
)

// auditRecords gives the audit settle's records of the log outside it —
// the views (every event they applied) and the high-water mark — so that
// it names the acknowledged events the log lost. Missing files are not an
// error (a log audited without them is checked for holes and version gaps
// only); a note says what was not available.
func auditRecords(ctx context.Context, cfg *audit.AuditConfig, views, highWaterPath string, stderr io.Writer) error {
	if views != "" {
		k, err := projector.OpenKnown(ctx, views)
		switch {
		case err == nil:
			cfg.Known = k
		case errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(stderr, "audit: no views at %s: lost events are found by holes and version gaps only\n", views)
		default:
			return errors.Errorf("audit: --views: %w", err)
		}
	}
	if highWaterPath != "" {
		hw, err := readHighWater(highWaterPath)
		if err != nil {
			return errors.Errorf("audit: --high-water: %w", err)
		}
		if hw.Stream == "" || hw.Stream == cfg.Stream || (cfg.Stream == "" && hw.Stream == "SETTLE_INTENTS") {
			cfg.HighWater = hw.LastSeq
			cfg.Accepted = hw.Accepted
		}
	}
	return nil
}
