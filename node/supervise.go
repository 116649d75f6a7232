package node

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/consumers/reconcile"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
)

// supervisor keeps a node's parts honest about their health and brings
// them back by themselves: the projector is restarted after a failure
// (a full disk, a lost connection) or a stall, a reconciler that stops is
// restarted, the embedded server is restarted once its disk has space
// again, a clock off the log's by more than the allowance blocks every
// append, and /readyz says which part failed.
type supervisor struct {
	logger *slog.Logger
	store  *ledger.Store
	now    func() time.Time
	cfg    Config

	mu        sync.Mutex
	projErr   error
	projSince time.Time
	diskErr   error
	clockErr  error
	offset    time.Duration
	recErrs   map[int]error // a reconciler that stopped, by index, until it runs again
	recs      []*reconcile.Reconciler
	proj      projWatch

	diskFull chan struct{} // signalled by the embedded server's log
	verified chan struct{} // closed once the whole log was read whole (verify.go)

	projRestarts prometheus.Counter
	recRestarts  prometheus.Counter
}

func newSupervisor(logger *slog.Logger, now func() time.Time, cfg Config) *supervisor {
	return &supervisor{logger: logger, now: now, cfg: cfg, recErrs: map[int]error{},
		diskFull: make(chan struct{}, 1), verified: make(chan struct{}),
		projRestarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "settle_projector_restarts_total",
			Help: "Times the projector was restarted after a failure or a stall (no progress while the stream held more)."}),
		recRestarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "settle_reconciler_restarts_total",
			Help: "Times a reconciler was restarted after it stopped."}),
	}
}

// supervised are the parts the supervisor runs and watches.
type supervised struct {
	js      jetstream.JetStream
	store   *ledger.Store
	proj    *projector.Projector
	srv     *embedded.Restartable // nil with NATSURL
	dd      *DataDir
	routes  []adapter.Route
	metrics *api.Metrics
	recs    []*reconcile.Reconciler
}

// consumerNames maps each route to its reconcilers' durable consumer.
func consumerNames(routes []adapter.Route) map[string]string {
	out := map[string]string{}
	for _, r := range routes {
		out[r.Name] = reconcile.DefaultConfig().Durable + "-" + r.Name
	}
	return out
}

// start runs the supervised loops on ctx (counted in wg): the reading of
// the whole log, the high-water mark, the clock guard, the disk watch,
// the projector and the reconcilers (once the log was read whole).
func (s *supervisor) start(ctx context.Context, wg *sync.WaitGroup, p supervised) {
	st := p.store.Stream()
	s.mu.Lock()
	s.recs = p.recs
	s.mu.Unlock()
	p.metrics.MustRegister(s.metrics(ctx, st, p.proj, consumerNames(p.routes), p.recs)...)
	wg.Go(func() { s.verifyLog(ctx, p.js, p.store.Config().Stream, p.dd, p.store) })
	wg.Go(func() { keepHighWater(ctx, st, p.dd.HighWater(), p.store, s.logger, time.Second) })
	wg.Go(func() { s.keepLock(ctx, p.dd, time.Second) })
	wg.Go(func() { s.guardClock(ctx, st, maxOffset(s.cfg.MaxClockOffset, p.routes), 10*time.Second) })
	if p.srv != nil {
		wg.Go(func() {
			s.watchDisk(ctx, p.srv, p.js, p.store.Config().Stream, p.dd, uint64(s.cfg.MinFreeMB)<<20)
		})
	}
	wg.Go(func() { s.runProjector(ctx, st, p.proj) })
	for k, rec := range p.recs {
		wg.Go(func() {
			select { // the log is read whole first (verify.go)
			case <-s.verified:
			case <-ctx.Done():
				return
			}
			s.runReconciler(ctx, k, rec)
		})
	}
}

// --- the data directory's lock ---

// keepLock rechecks the data directory's lock file every interval
// (DataDir.Recheck): one removed or replaced is made again, loudly.
func (s *supervisor) keepLock(ctx context.Context, dd *DataDir, interval time.Duration) {
	every(ctx, interval, func() {
		restored, err := dd.Recheck(s.cfg.Command)
		switch {
		case err != nil:
			s.logger.Error("the data directory's lock file was removed or replaced and cannot be locked again; the directory itself stays locked", "dir", dd.Path(), "err", err)
		case restored:
			s.logger.Warn("the data directory's lock file was removed or replaced: made it again (the directory itself stayed locked: no second process can start on it)", "dir", dd.Path())
		}
	})
}

// every runs fn every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// --- the disk of the embedded server ---

// watchServerLog is the embedded server's Watch: a full disk (or a store
// it stopped writing to) is signalled to watchDisk.
func (s *supervisor) watchServerLog(_ slog.Level, msg string) {
	m := strings.ToLower(msg)
	if strings.Contains(m, "no space left") || strings.Contains(m, "critical write error") ||
		strings.Contains(m, "out of space") || strings.Contains(m, "out of resources") {
		select {
		case s.diskFull <- struct{}{}:
		default:
		}
	}
}

// diskSpace is the space left for an unprivileged writer on dir's file
// system, and the file system's size.
func diskSpace(dir string) (free, size uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// checkMinFree refuses a MinFreeMB larger than the whole file system of
// dir (after a full disk settle would wait for space that can never be
// free), and warns when less than it is free already.
func checkMinFree(dir string, minFreeMB int, logger *slog.Logger) error {
	free, size, err := diskSpace(dir)
	if err != nil {
		return nil // not knowable here; the disk watch measures again
	}
	need := uint64(minFreeMB) << 20
	if need > size {
		return errors.WithHint(errors.Errorf("--min-free-mb: %d MiB is more than the whole file system of %s (%d MiB): after a full disk settle could never resume", minFreeMB, dir, size>>20),
			"give a smaller --min-free-mb, or a data directory on a larger file system")
	}
	if free < need {
		logger.Warn("the data directory's file system has less free space than --min-free-mb: if the disk fills, settle resumes only once that much is free",
			"dir", dir, "free_mib", free>>20, "min_free_mib", minFreeMB)
	}
	return nil
}

// watchDisk, for the embedded server: when the server reports a full
// disk (or stops writing its store), appends are refused at once
// (ledger.ErrDiskFull: 503 in milliseconds, not after every publish
// timed out) and /readyz says not ready; once the store's file system has
// minFree bytes again, the server is restarted in place (the store is
// loaded again, which clears its write error), the log is checked
// against its high-water mark, and appends resume.
func (s *supervisor) watchDisk(ctx context.Context, srv *embedded.Restartable, js jetstream.JetStream, stream string, dd *DataDir, minFree uint64) {
	dir := srv.Server().Config().Dir
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.diskFull:
		}
		free, _, _ := diskSpace(dir)
		err := errors.Errorf("%w: the embedded server stopped writing %s (%d bytes free; need %d to resume)", ledger.ErrDiskFull, dir, free, minFree)
		s.mu.Lock()
		s.diskErr = err
		s.mu.Unlock()
		s.store.Block("disk", err)
		s.logger.Error("the log's disk is full: submits are refused (503) and nothing is written until space returns; settle resumes by itself then",
			"dir", dir, "free_bytes", free, "need_bytes", minFree)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if free, _, err := diskSpace(dir); err != nil || free < minFree {
				continue
			}
			s.logger.Warn("disk space is back: restarting the embedded server on its store")
			if err := srv.Restart(); err != nil {
				s.logger.Error("restarting the embedded server failed; trying again", "err", err)
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			err := waitStream(cctx, js, stream)
			if err == nil {
				_, err = guardLog(cctx, logGuard{js: js, stream: stream, dd: dd, single: true, logger: s.logger})
			}
			cancel()
			if err != nil {
				s.logger.Error("after the restart the log does not check out; appends stay refused", "err", err)
				s.store.Block("log", err)
			}
			break
		}
		s.store.Unblock("disk")
		s.mu.Lock()
		s.diskErr = nil
		s.mu.Unlock()
		// A signal raised by the failures before the restart is stale.
		select {
		case <-s.diskFull:
		default:
		}
		s.logger.Info("the log takes writes again")
	}
}

// waitStream waits until the stream answers again (the client has
// reconnected to the restarted server).
func waitStream(ctx context.Context, js jetstream.JetStream, stream string) error {
	for {
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.Stream(ictx, stream)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Errorf("stream %s after restart: %w", stream, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// --- the clock ---

// guardClock compares this process's clock with the log's every interval:
// the stream leader's time in its info answer, against the middle of the
// request by our clock, less half the round trip as the error. An offset
// beyond allowed blocks every append (ledger.ErrClockOffset): deadlines,
// leases, search windows and the pre-existing rule all compare times of
// different hosts, and a process off by more than the routes' clock skew
// would judge them wrongly. Other processes settle its intents meanwhile.
func (s *supervisor) guardClock(ctx context.Context, st jetstream.Stream, allowed, interval time.Duration) {
	check := func() {
		t0 := s.now()
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := st.Info(ictx)
		cancel()
		t1 := s.now()
		if err != nil || info.TimeStamp.IsZero() {
			return
		}
		rtt := t1.Sub(t0)
		offset := t0.Add(rtt / 2).Sub(info.TimeStamp)
		abs := max(offset, -offset)
		s.mu.Lock()
		s.offset = offset
		was := s.clockErr
		if abs-rtt/2 > allowed {
			s.clockErr = errors.Errorf("%w: this process's clock is %s off the log's (allowed %s)", ledger.ErrClockOffset, offset.Round(time.Millisecond), allowed)
		} else {
			s.clockErr = nil
		}
		now := s.clockErr
		s.mu.Unlock()
		switch {
		case now != nil && was == nil:
			s.store.Block("clock", now)
			s.logger.Error("clock offset beyond the allowance: this process refuses every append (submits get 503) until its clock is fixed; other processes settle its intents",
				"offset", offset.Round(time.Millisecond).String(), "allowed", allowed.String())
		case now == nil && was != nil:
			s.store.Unblock("clock")
			s.logger.Info("clock back within the allowance", "offset", offset.Round(time.Millisecond).String())
		}
	}
	check()
	every(ctx, interval, check)
}

// lockedErr is a check returning *p, read under the supervisor's lock.
func (s *supervisor) lockedErr(p *error) func(context.Context) error {
	return func(context.Context) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		return *p
	}
}

// --- readiness and metrics ---

// readyChecks are /readyz's checks beyond the API's own.
func (s *supervisor) readyChecks() []api.ReadyCheck {
	return []api.ReadyCheck{
		{Name: "projector", Check: s.projectorCheck},
		{Name: "appends", Check: func(context.Context) error {
			if failing, since, err, _ := s.store.AppendHealth(30 * time.Second); failing {
				return errors.Errorf("the last append failed %s ago: %w", time.Since(since).Round(time.Second), err)
			}
			return nil
		}},
		{Name: "log", Check: func(context.Context) error {
			if err := s.store.Blocked(); err != nil && (errors.Is(err, ledger.ErrLogDamaged) || errors.Is(err, ledger.ErrLogVerifying)) {
				return err
			}
			return nil
		}},
		{Name: "disk", Check: s.lockedErr(&s.diskErr)},
		{Name: "clock", Check: s.lockedErr(&s.clockErr)},
		{Name: "reconcilers", Check: s.reconcilersCheck},
	}
}

// metrics are the supervisor's gauges: the projector's lag behind the
// stream, the reconcilers' pending messages per route, failed appends,
// whether appends are refused, and the clock offset.
func (s *supervisor) metrics(ctx context.Context, st jetstream.Stream, proj *projector.Projector, consumers map[string]string, recs []*reconcile.Reconciler) []prometheus.Collector {
	var lastSeq struct {
		sync.Mutex
		seq uint64
		at  time.Time
	}
	streamLast := func() uint64 {
		lastSeq.Lock()
		defer lastSeq.Unlock()
		if time.Since(lastSeq.at) > time.Second {
			ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if info, err := st.Info(ictx); err == nil {
				lastSeq.seq, lastSeq.at = info.State.LastSeq, time.Now()
			}
			cancel()
		}
		return lastSeq.seq
	}
	out := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "settle_projector_lag_events",
			Help: "Events on the stream the projector has not applied yet."}, func() float64 {
			last, cp := streamLast(), proj.Stats().Checkpoint
			if last < cp {
				return 0
			}
			return float64(last - cp)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "settle_append_failures_total",
			Help: "Appends that failed (conflicts and refusals before publishing aside)."}, func() float64 {
			_, _, _, n := s.store.AppendHealth(0)
			return float64(n)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "settle_appends_refused",
			Help: "1 while appends are refused before publishing (full disk, clock offset, damaged log)."}, func() float64 {
			if s.store.Blocked() != nil {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "settle_clock_offset_seconds",
			Help: "This process's clock minus the log's, as last measured."}, func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.offset.Seconds()
		}),
	}
	pending := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "settle_reconciler_pending",
		Help: "Messages the reconcilers' durable consumer of a route holds: not yet delivered plus delivered and not yet acked (bounded by the consumer's max ack pending)."}, []string{"route"})
	out = append(out, &pendingCollector{GaugeVec: pending, ctx: ctx, st: st, consumers: consumers})
	out = append(out, s.projRestarts, s.recRestarts, recreatedCounter(recs))
	return out
}

// pendingCollector reads the reconcilers' consumers at each scrape.
type pendingCollector struct {
	*prometheus.GaugeVec
	ctx       context.Context
	st        jetstream.Stream
	consumers map[string]string // route → consumer name
}

func (p *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	for route, name := range p.consumers {
		ictx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
		c, err := p.st.Consumer(ictx, name)
		if err == nil {
			if info, err := c.Info(ictx); err == nil {
				p.WithLabelValues(route).Set(float64(info.NumPending + uint64(info.NumAckPending)))
			}
		}
		cancel()
	}
	p.GaugeVec.Collect(ch)
}

// --- the process clock ---

// clockOffsetEnv shifts this process's clock (fault injection: the fault
// tests run two processes whose clocks differ). It is never meant for a
// deployment; serve logs it loudly.
const clockOffsetEnv = "SETTLE_FAULT_CLOCK_OFFSET"

// ProcessClock is a process's clock: time.Now, shifted by $SETTLE_FAULT_CLOCK_OFFSET.
func ProcessClock(logger *slog.Logger) (func() time.Time, error) {
	v, ok := os.LookupEnv(clockOffsetEnv)
	if !ok || v == "" {
		return time.Now, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return nil, errors.Errorf("$%s: %w", clockOffsetEnv, err)
	}
	logger.Warn("fault injection: this process's clock is shifted", "env", clockOffsetEnv, "offset", d.String())
	return func() time.Time { return time.Now().Add(d) }, nil
}
