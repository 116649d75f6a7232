package node

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/consumers/reconcile"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/internal/errkind"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
)

// openViews opens the projector's views in the data directory. Views
// that do not match the stream (another schema version, a recreated
// stream) are derived data: they are moved aside and rebuilt from the
// log, with a log line naming the file kept.
func (n *Node) openViews(ctx context.Context) (err error) {
	cfg := projector.DefaultConfig()
	cfg.DBPath, cfg.Logger = n.dd.Views(), n.cfg.Logger
	if n.proj, err = projector.Open(ctx, n.js, cfg); err == nil || !(errors.Is(err, projector.ErrSchema) || errors.Is(err, projector.ErrStreamMismatch)) {
		return err
	}
	if errors.Is(err, projector.ErrStreamMismatch) && !n.cfg.AcceptLogLoss {
		// The views project another history than the stream holds: the
		// log was replaced or damaged. Never rebuilt silently.
		return errors.WithHint(errkind.Wrap(ledger.ErrLogDamaged, err),
			"the stream is not the one the views were built from: restore it, or start with --accept-log-loss to rebuild the views from what it holds (the old views are kept aside)")
	}
	aside, merr := MoveViewsAside(cfg.DBPath)
	if merr != nil {
		return errors.WithHint(errors.WithSecondaryError(errors.Errorf("%w (and moving it aside failed: %v)", err, merr), merr),
			"stop settle, then run: settle views rebuild --data DIR")
	}
	n.cfg.Logger.Warn("views do not match the stream: rebuilding them from the log", "reason", err, "old_views", aside)
	if err := PrivateViews(cfg.DBPath); err != nil {
		return err
	}
	n.proj, err = projector.Open(ctx, n.js, cfg)
	return err
}

// MoveViewsAside renames the views file (and SQLite's side files) to
// PATH.stale-<unix seconds> and returns that name.
func MoveViewsAside(path string) (string, error) {
	aside := fmt.Sprintf("%s.stale-%d", path, time.Now().Unix())
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(path+suffix, aside+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return aside, nil
}

// stepMetrics feeds the write and settle latencies from the reconcilers'
// steps: a step that started a write and appended its outcome is one
// write; a step that settled an intent whose outcome had been unknown is
// one settlement (its latency read from the log's own times).
func stepMetrics(store *ledger.Store, metrics *api.Metrics) func(route, id string, res reconcile.StepResult) {
	return func(route, id string, res reconcile.StepResult) {
		started := false
		for _, t := range res.Appended {
			if t == events.WriteStarted {
				started = true
			}
			if started && api.IsOutcome(t) && res.Since != nil {
				metrics.ObserveWrite(route, api.OutcomeLabel(t), time.Since(res.Since.StartedAt))
			}
		}
		if res.Since == nil || (res.Since.Outcome != events.OutcomeUnknown && res.Since.N == 1) || len(res.Appended) == 0 {
			return // an intent whose outcome was never unknown, or a step that appended nothing
		}
		// Only the step whose last event settled the intent counts it (a
		// step may also end after losing a CAS to the worker that settled).
		if !fsm.Settled(res.State) || !fsm.Settled(fsm.StateAfter(res.Appended[len(res.Appended)-1])) {
			return
		}
		lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h, err := store.Load(lctx, route, id)
		if err != nil {
			return // a metric is not worth a failed step
		}
		if d, result, ok := api.SettleLatency(h.Events); ok {
			metrics.ObserveSettle(route, string(result), d)
		}
	}
}

// RedactURL drops credentials from a URL, or from each of a
// comma-separated list (a cluster's: every URL may hold the password),
// before it is printed.
func RedactURL(s string) string {
	urls := strings.Split(s, ",")
	for k, u := range urls {
		if i := strings.LastIndex(u, "@"); i >= 0 {
			if j := strings.Index(u, "://"); j >= 0 && j < i {
				urls[k] = u[:j+3] + "…" + u[i:]
			}
		}
	}
	return strings.Join(urls, ",")
}
