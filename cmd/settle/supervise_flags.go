package main

import (
	"context"
	"flag"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/consumers/reconcile"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
)

// faultFlags are serve's flags about faults: what to accept, what to
// wait for, what to bound.
type faultFlags struct {
	acceptLoss     bool
	minFreeMB      int
	maxClockOffset time.Duration
	maxInFlight    int
	lease          time.Duration
	cacheMB        int
	steps          int
}

func (f *faultFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.acceptLoss, "accept-log-loss", false, "start although the log lost events settle knew of (the views are moved aside and rebuilt; the lost intents are listed and must be checked by hand)")
	fs.IntVar(&f.minFreeMB, "min-free-mb", 64, "after the embedded server's disk was full, resume when its file system has this many `MiB` free")
	fs.DurationVar(&f.maxClockOffset, "max-clock-offset", 0, "refuse every append while this process's clock is off the log's by more than this `duration` (0: half the smallest clock_skew of the routes)")
	fs.DurationVar(&f.lease, "lease", reconcile.DefaultConfig().Lease, "how long a reconciler's claim on an intent holds it: a process cut from NATS loses its intents to the others after this `duration`")
	fs.IntVar(&f.cacheMB, "cache-mb", reconcile.DefaultCacheBytes>>20, "each reconciler keeps histories in an LRU of at most this many `MiB` (an estimate)")
	fs.IntVar(&f.maxInFlight, "max-inflight", api.DefaultMaxInFlight, "API requests served at once; more are answered 503 with Retry-After")
	fs.IntVar(&f.steps, "steps", reconcile.DefaultSteps, "intents each reconciler worker steps at once: also its concurrent calls to an external API")
}

func (f *faultFlags) validate() error {
	switch {
	case f.minFreeMB < 1:
		return errors.Errorf("--min-free-mb: %d must be ≥ 1", f.minFreeMB)
	case f.maxClockOffset < 0:
		return errors.Errorf("--max-clock-offset: %s is negative", f.maxClockOffset)
	case f.maxInFlight < 1:
		return errors.Errorf("--max-inflight: %d must be ≥ 1", f.maxInFlight)
	case f.cacheMB < 1:
		return errors.Errorf("--cache-mb: %d must be ≥ 1", f.cacheMB)
	case f.lease < time.Second:
		return errors.Errorf("--lease: %s must be at least 1s", f.lease)
	case f.steps < 1 || f.steps > 1024:
		return errors.Errorf("--steps: %d is outside 1..1024", f.steps)
	}
	return nil
}

// supervised are the parts the supervisor watches.
type supervised struct {
	js        jetstream.JetStream
	store     *ledger.Store
	proj      *projector.Projector
	srv       *embedded.Restartable // nil with --nats-url
	dd        *dataDir
	routes    []adapter.Route
	metrics   *api.Metrics
	consumers map[string]string
}

// consumerNames maps each route to its reconcilers' durable consumer.
func consumerNames(routes []adapter.Route) map[string]string {
	out := map[string]string{}
	for _, r := range routes {
		out[r.Name] = reconcile.DefaultConfig().Durable + "-" + r.Name
	}
	return out
}

// maxOffset is --max-clock-offset, or half the smallest clock skew the
// routes allow (two processes each within it of the log are within the
// skew of each other).
func maxOffset(flagged time.Duration, routes []adapter.Route) time.Duration {
	if flagged > 0 {
		return flagged
	}
	skew := 5 * time.Second
	for i, r := range routes {
		if d := time.Duration(r.Policy.ClockSkew); d > 0 && (i == 0 || d < skew) {
			skew = d
		}
	}
	return skew / 2
}

// start runs the supervisor's watchers on ctx (counted in wg).
func (s *supervisor) start(ctx context.Context, wg *sync.WaitGroup, f faultFlags, p supervised) {
	st := p.store.Stream()
	p.metrics.MustRegister(s.metrics(ctx, st, p.proj, p.consumers)...)
	run := func(fn func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn()
		}()
	}
	run(func() {
		keepHighWater(ctx, st, filepath.Join(p.dd.Path(), highWaterFile), p.store, s.logger, time.Second)
	})
	run(func() { s.guardClock(ctx, st, maxOffset(f.maxClockOffset, p.routes), 10*time.Second) })
	run(func() { s.verifyLog(ctx, p.js, p.store.Config().Stream, p.dd, p.store) })
	if p.srv != nil {
		run(func() {
			s.watchDisk(ctx, p.srv, p.js, p.store.Config().Stream, p.dd, uint64(f.minFreeMB)<<20)
		})
	}
}

// The values of serve's --group-commit.
const (
	groupCommitAuto     = "auto"
	groupCommitMeasured = "measured"
	groupCommitOff      = "off"
)

// checkGroupCommit refuses a --group-commit value that is not one of the
// three.
func checkGroupCommit(v string) error {
	switch v {
	case groupCommitAuto, groupCommitMeasured, groupCommitOff:
		return nil
	}
	return errors.Errorf("%q: want %s, %s or %s", v, groupCommitAuto, groupCommitMeasured, groupCommitOff)
}

// storeConfig is the log's store config for serve and mcp: replicas from
// the flag, and how appends are published (groupCommit, checked by
// checkGroupCommit). auto: on the embedded server (natsURL empty) every
// append alone when that server does not fsync every write
// (ledger.StoreConfig.ForServerSync), the group commit's measured choice
// otherwise, a server settle did not start included (its sync is not
// known here); measured: always that choice; off: every append alone.
func storeConfig(natsURL string, dur embedded.Durability, replicas int, groupCommit string) ledger.StoreConfig {
	sc := ledger.DefaultStoreConfig()
	sc.Replicas = replicas
	switch {
	case groupCommit == groupCommitOff:
		sc = sc.ForServerSync(false)
	case groupCommit == groupCommitAuto && natsURL == "":
		sc = sc.ForServerSync(dur.SyncsEveryWrite())
	}
	return sc
}

// openStore opens the log, waiting out a cluster still forming: creating
// a replicated stream times out while the servers elect the stream's
// leader (seen right after a cluster started). Only timeouts are retried,
// for a minute; any other error ends at once.
func openStore(ctx context.Context, js jetstream.JetStream, sc ledger.StoreConfig, logger *slog.Logger) (*ledger.Store, error) {
	var store *ledger.Store
	err := untilAnswered(ctx, logger, "open the store", sc.Stream, func() error {
		var err error
		store, err = ledger.OpenStore(ctx, js, sc)
		return err
	})
	return store, err
}

// untilAnswered runs op until it succeeds, fails for another reason than
// a missing answer (storeTimeout), ctx ends or a minute has passed: a
// cluster still electing its leaders, or a server whose JetStream is not
// up yet, answers late or not at all.
func untilAnswered(ctx context.Context, logger *slog.Logger, what, stream string, op func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := op()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) || !storeTimeout(err) {
			return err
		}
		logger.Warn("the stream is not ready yet (the cluster may still be electing its leaders); retrying", "op", what, "stream", stream, "err", err)
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// storeTimeout reports whether opening the store failed for want of an
// answer in time (not a refusal).
func storeTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}
