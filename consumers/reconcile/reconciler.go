package reconcile

import (
	"cmp"
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/internal/telemetry"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
)

// Config configures a Reconciler.
type Config struct {
	// Durable is the JetStream durable consumer all workers share.
	Durable string
	// Worker names this worker: the actor of its events and the owner of
	// its leases and claims. It must be unique among running workers.
	Worker string
	// Now is the clock every decision uses (times on the log win).
	Now func() time.Time
	// Lease is how long a ReconcileStarted or RetryClaimed holds an intent.
	Lease time.Duration
	// Recheck is the first wait before looking again for an eventually
	// consistent result; it doubles up to MaxRecheck.
	Recheck    time.Duration
	MaxRecheck time.Duration
	// MaxWait caps one NakWithDelay; the log's next_check_at is re-read at
	// every wake-up, so a short cap only costs a wasted wake-up.
	MaxWait time.Duration
	// AckWait is the consumer's ack wait (a dead worker's message is
	// redelivered after it).
	AckWait time.Duration
	// Batch is how many messages one fetch takes; intents of a batch that
	// search the same route and account share list calls.
	Batch int
	// MaxAckPending bounds intents waiting at once (each holds one message).
	MaxAckPending int
	// Steps is how many intents a route's loop steps at once, over the
	// fetches it handles at once (0: DefaultSteps; 1: one after the
	// other); a step waiting for its append to the log does not count.
	// Intents are independent (each transition is CAS'd on its own
	// subject), so stepping several at once lets their appends share the
	// group commit's syncs. It bounds this worker's concurrent calls to a
	// route's external API as well.
	Steps int
	// PollBase and ProcessingDeadline govern status polling of in-progress
	// targets: exponential backoff with full jitter from PollBase, handed off
	// after ProcessingDeadline.
	PollBase           time.Duration
	ProcessingDeadline time.Duration
	// RecordedGrace: a recorded intent that its writer never started is
	// started by a reconciler after this long.
	RecordedGrace time.Duration
	// ResendBase and ResendCap govern settle's own resends after a proven
	// rejection (never sent, 429): backoff with jitter from ResendBase,
	// doubling up to ResendCap, inside the policy's resend budget and the
	// intent's expiry.
	ResendBase time.Duration
	ResendCap  time.Duration
	// Rand drives jitter (seed it for deterministic tests).
	Rand *rand.Rand
	// Logger receives one line per step.
	Logger *slog.Logger
	// OnStep, if set, is told of every step that appended (for metrics and
	// progress). It must not block.
	OnStep func(route, intentID string, res StepResult)
	// Sweep makes Run read every intent's last event on start and step
	// those no reconciler is done with (sweep.go); one reconciler per
	// process is enough. SweepMax bounds the intents it keeps waiting.
	Sweep    bool
	SweepMax int
	// CacheBytes bounds the histories kept in memory (an LRU, cache.go).
	CacheBytes int
	// OnCall, if set, is told of every external write this reconciler
	// makes and its classified outcome (for metrics; see
	// producer.WriterConfig.OnCall). It must not block.
	OnCall producer.CallObserver
	// Hold names intents that lost events in a log loss an operator
	// accepted, each with a message: they are handed to a human and never
	// written for again (hold.go).
	Hold map[string]string
}

// DefaultConfig returns production defaults with a unique worker name.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Durable:            "settle-reconciler",
		Worker:             host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(rand.Uint64()%1e6, 10),
		Now:                time.Now,
		Lease:              30 * time.Second,
		Recheck:            10 * time.Second,
		MaxRecheck:         5 * time.Minute,
		MaxWait:            30 * time.Second,
		AckWait:            30 * time.Second,
		Batch:              64,
		Steps:              DefaultSteps,
		MaxAckPending:      100_000,
		PollBase:           2 * time.Second,
		ProcessingDeadline: 15 * time.Minute,
		RecordedGrace:      2 * time.Minute,
		ResendBase:         time.Second,
		ResendCap:          time.Minute,
		Rand:               rand.New(rand.NewPCG(1, 2)),
		SweepMax:           100_000,
		CacheBytes:         DefaultCacheBytes,
		Logger:             slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// Validate checks the config, naming the field.
func (c Config) Validate() error {
	switch {
	case c.Durable == "":
		return errors.New("reconciler config: Durable: is required")
	case c.Worker == "":
		return errors.New("reconciler config: Worker: is required")
	case c.Now == nil:
		return errors.New("reconciler config: Now: is required")
	case c.MaxWait <= 0, c.AckWait <= 0:
		return errors.New("reconciler config: MaxWait, AckWait: must be positive")
	case c.Batch < 1 || c.Batch > 1024:
		return errors.Errorf("reconciler config: Batch: %d is outside 1..1024", c.Batch)
	case c.MaxAckPending < c.Batch:
		return errors.New("reconciler config: MaxAckPending: must be ≥ Batch")
	case c.Steps < 0 || c.Steps > 1024:
		return errors.Errorf("reconciler config: Steps: %d is outside 0..1024 (0: the default, %d)", c.Steps, DefaultSteps)
	case c.Rand == nil:
		return errors.New("reconciler config: Rand: is required")
	case c.Logger == nil:
		return errors.New("reconciler config: Logger: is required")
	case c.Sweep && c.SweepMax < 1:
		return errors.Errorf("reconciler config: SweepMax: %d must be ≥ 1 with Sweep", c.SweepMax)
	case c.CacheBytes < 0:
		return errors.Errorf("reconciler config: CacheBytes: %d is negative", c.CacheBytes)
	}
	if err := c.decider(nil).Validate(); err != nil {
		return errors.Errorf("reconciler config: %w", err)
	}
	return nil
}

// decider is the decision function with c's settings and jitter; what c
// does not set (MaxCandidates) is the default decider's.
func (c Config) decider(jitter func(time.Duration) time.Duration) fsm.Decider {
	d := fsm.DefaultDecider(c.Worker)
	d.Lease, d.RecordedGrace = c.Lease, c.RecordedGrace
	d.Recheck, d.MaxRecheck = c.Recheck, c.MaxRecheck
	d.PollBase, d.ProcessingDeadline = c.PollBase, c.ProcessingDeadline
	d.ResendBase, d.ResendCap = c.ResendBase, c.ResendCap
	d.Jitter = jitter
	return d
}

// Reconciler settles unknown results without a second write. Many
// reconcilers (goroutines or processes) may run on one stream: every step
// is an append with per-subject CAS, so each step of an intent is taken by
// exactly one of them. What each step is, is fsm.Decider's decision; the
// reconciler carries it out (the reads, the appends, and through the
// producer the writes).
type Reconciler struct {
	cfg   Config
	store Store
	// routes are the routes this worker serves, by name; names sorted.
	routes map[string]adapter.Route
	names  []string
	// w makes the write steps (a retry under a won claim, a resend, a
	// recorded intent's first write); dec decides every step.
	w   *producer.Writer
	dec fsm.Decider
	mu  sync.Mutex // guards cfg.Rand
	// hookAfterClaim, in tests, runs after a won RetryClaimed and before the
	// write; an error aborts the step as if the worker died there.
	hookAfterClaim func(intentID string) error
	// hookStep, in tests, runs before each step is carried out; an error
	// aborts the step as if the worker died there.
	hookStep  func(i *fsm.Intent, s fsm.Step) error
	readCalls atomic.Int64
	cache     historyCache
	sweepState
	consumers consumerState // consumers.go
}

// ErrRouteMissing: the intent's route (or the capability its frozen
// strategy needs) is not configured in this worker. The intent is left for
// a worker that has it, never dropped.
var ErrRouteMissing = errors.New("route not configured in this worker")

// Store is the log a Reconciler reads and appends to: a *ledger.Store, or
// a wrapper of one.
type Store interface {
	producer.Log
	AppendEvents(ctx context.Context, route string, evs []events.Event, expectedLastSeq uint64) ([]uint64, error)
	Load(ctx context.Context, route, intentID string) (*ledger.History, error)
	Refresh(ctx context.Context, h *ledger.History, intentID string) error
	// Blocked says why appends are refused now (nil: they are not).
	Blocked() error
	// Config, JetStream and Stream are the log's (for its consumers and
	// the sweep's reader).
	Config() ledger.StoreConfig
	JetStream() jetstream.JetStream
	Stream() jetstream.Stream
}

var _ Store = (*ledger.Store)(nil)

// NewReconciler returns a reconciler over store for routes.
func NewReconciler(store Store, cfg Config, routes ...adapter.Route) (*Reconciler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Steps = cmp.Or(cfg.Steps, DefaultSteps)
	w, err := producer.NewWriter(store, producer.WriterConfig{Actor: cfg.Worker, Now: cfg.Now, OnCall: cfg.OnCall, Logger: cfg.Logger})
	if err != nil {
		return nil, errors.Errorf("reconciler: %w", err)
	}
	r := &Reconciler{cfg: cfg, store: store, w: w, routes: map[string]adapter.Route{}}
	for _, rt := range routes {
		if err := adapter.ValidateRoute(rt); err != nil {
			return nil, errors.Errorf("reconciler: %w", err)
		}
		if _, dup := r.routes[rt.Name]; dup {
			return nil, errors.Errorf("reconciler: route %s: defined twice", rt.Name)
		}
		r.routes[rt.Name] = rt
		r.names = append(r.names, rt.Name)
	}
	slices.Sort(r.names)
	r.cache.max = cmp.Or(cfg.CacheBytes, DefaultCacheBytes)
	r.dec = cfg.decider(r.jitter)
	return r, nil
}

// ReadCalls is how many external read calls (list, get, probe, status)
// this reconciler made.
func (r *Reconciler) ReadCalls() int {
	return int(r.readCalls.Load())
}

// StepResult is what one Step did.
type StepResult struct {
	State    fsm.State
	Appended []events.Type
	// Wait > 0: nothing more can happen before that long.
	Wait time.Duration
	// Done: no reconciler will act on this intent again (settled or a
	// human's turn).
	Done bool
	// Since is the intent's last attempt (OnStep only), to measure how
	// long settling took.
	Since *fsm.Attempt
}

// Step loads an intent and advances it as far as it can now, appending
// its transitions with CAS. It returns when the intent must wait or is
// done. A lost CAS means another worker moved the intent: Step reloads.
// An intent whose route this worker lacks gives ErrRouteMissing.
//
// The read-only steps' events are appended together as one unit (all or,
// on a lost CAS, none); what allows a write is appended and acknowledged
// before the write is taken (producer.Writer.TakeWrite).
func (r *Reconciler) Step(ctx context.Context, route, intentID string) (StepResult, error) {
	return r.step(ctx, route, intentID, nil, nil, nil)
}

// maxDecisions bounds the decisions of one step (a step that neither waits
// nor ends by then appends what it decided and returns).
const maxDecisions = 16

// step is Step within a fetch: sc shares its listings, t is the step's
// place among those that may call the external API (nil: none to keep),
// given up while a unit is in the group commit, and read the intent as
// just read from the log (nil: the step reads it).
//
// Traced, a step is the span settle.reconcile: a child of the trace the
// intent recorded when it was submitted (IntentStarted's traceparent), so
// that its reconciliation, on whichever node and however much later,
// continues the caller's trace.
func (r *Reconciler) step(ctx context.Context, route, intentID string, sc *searchCache, t *ticket, read *stepUnit) (StepResult, error) {
	if !telemetry.Enabled() {
		return r.steps(ctx, route, intentID, sc, t, read)
	}
	if read == nil {
		u, done, err := r.load(ctx, route, intentID)
		if err != nil || done {
			return StepResult{Done: done}, err
		}
		read = u
	}
	if len(read.h.Events) > 0 {
		if d, ok := read.h.Events[0].Data.(*events.IntentStartedData); ok {
			ctx = telemetry.WithTraceparent(ctx, d.Traceparent)
		}
	}
	ctx, span := telemetry.Start(ctx, "settle.reconcile")
	span.Intent(intentID, route)
	ctx = telemetry.WithIntent(ctx, intentID, "")
	res, err := r.steps(ctx, route, intentID, sc, t, read)
	span.State(string(res.State))
	span.End(err)
	return res, err
}

// load reads and folds an intent for a step; done: it is held and nothing
// can be folded (an operator's, hold.go).
func (r *Reconciler) load(ctx context.Context, route, intentID string) (u *stepUnit, done bool, err error) {
	h, err := r.cache.load(ctx, r.store, route, intentID)
	if err != nil {
		return nil, false, errors.Errorf("step %s: %w", intentID, err)
	}
	intent, err := h.Fold()
	if errors.Is(err, ledger.ErrHistoryLost) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, errors.Errorf("step %s: %w", intentID, err)
	}
	return &stepUnit{h: h, i: intent}, false, nil
}

func (r *Reconciler) steps(ctx context.Context, route, intentID string, sc *searchCache, t *ticket, read *stepUnit) (StepResult, error) {
	var res StepResult
	u := read // nil: (re)load the intent
	for n := 0; n < maxDecisions; n++ {
		if u == nil {
			var done bool
			var err error
			if u, done, err = r.load(ctx, route, intentID); err != nil || done {
				res.Done = done
				return res, err
			}
		}
		res.State = u.i.State
		moved, wait, err := r.advance(ctx, u, sc, t, &res)
		if err == nil && !moved {
			// The intent waits or is done: append what was decided, with
			// no external call left to make (at the fetch's gate).
			if len(u.evs) > 0 {
				t.ready(ctx)
			}
			err = r.commit(ctx, u, &res)
		}
		if errors.Is(err, ledger.ErrConflict) {
			t.acquire(ctx) // it may read again
			u = nil        // another worker moved it: refresh and look again
			continue
		}
		if err != nil {
			return res, err // what was decided and not appended is dropped
		}
		res.State = u.i.State
		if !moved {
			res.Wait = wait
			res.Done = wait == 0
			if r.cfg.OnStep != nil && len(res.Appended) > 0 {
				res.Since = u.i.LastAttempt()
				r.cfg.OnStep(route, intentID, res)
			}
			return res, nil
		}
	}
	if u != nil {
		t.release()
		if err := r.commit(ctx, u, &res); err != nil && !errors.Is(err, ledger.ErrConflict) {
			return res, err
		}
	}
	return res, nil
}

// stepUnit is an intent as one step has it: h as read from the log, evs
// the events decided since and not appended yet (consecutive versions
// after h's last event), i the fold of both.
type stepUnit struct {
	h   *ledger.History
	evs []events.Event
	i   *fsm.Intent
}

// decide adds the next event to the unit: checked against the fsm first
// (an illegal event is never decided) and folded into u.i.
func (u *stepUnit) decide(actor string, at time.Time, attemptID string, d events.Data) error {
	e := events.New(u.i.ID, u.i.Version+1, at, actor, attemptID, d)
	next := u.i.Clone()
	if err := next.Apply(e); err != nil {
		return errors.Errorf("append %s: %w", e.Type, err)
	}
	u.i = next
	u.evs = append(u.evs, e)
	return nil
}

// history is the intent's history as the step has it: the log's and what
// the step decided since.
func (u *stepUnit) history() *ledger.History {
	if len(u.evs) == 0 {
		return u.h
	}
	h := *u.h
	h.Events = append(u.h.Events[:len(u.h.Events):len(u.h.Events)], u.evs...)
	return &h
}

// commit appends the events the step decided as one unit, CAS on the last
// event it read, and keeps the history. On an error none of them, or a
// prefix (a unit published event by event), is on the log: the intent
// must be reloaded.
func (r *Reconciler) commit(ctx context.Context, u *stepUnit, res *StepResult) error {
	if len(u.evs) == 0 {
		return nil
	}
	ctx, span := telemetry.Start(ctx, "settle.record")
	span.Intent(u.i.ID, u.h.Route)
	span.Str(telemetry.AttrEvent, string(u.evs[len(u.evs)-1].Type))
	span.Int("settle.events", len(u.evs))
	seqs, err := r.store.AppendEvents(ctx, u.h.Route, u.evs, u.h.LastSeq)
	span.State(string(u.i.State))
	span.End(err)
	for k, seq := range seqs {
		u.h.Events = append(u.h.Events, u.evs[k])
		u.h.LastSeq = seq
		res.Appended = append(res.Appended, u.evs[k].Type)
	}
	if err != nil {
		return err
	}
	for _, e := range u.evs {
		r.cfg.Logger.Debug("reconciler step", "intent", u.i.ID, "event", e.Type, "version", e.Version)
	}
	u.evs = nil
	_, _ = r.cache.put(u.h, nil) // keep what this step appended
	return nil
}

// advance makes the decider's next decision on u and carries it out: an
// event decided into u (moved), a write taken (moved: what was decided
// before it appended first, its events appended by the writer), or
// nothing (the intent must wait `wait`, or is done when wait == 0).
func (r *Reconciler) advance(ctx context.Context, u *stepUnit, sc *searchCache, t *ticket, res *StepResult) (bool, time.Duration, error) {
	if !telemetry.Enabled() {
		return r.decide(ctx, u, sc, t, res)
	}
	ctx, span := telemetry.Start(ctx, "settle.reconcile.decision")
	n, before := len(u.evs), u.i.Version
	moved, wait, err := r.decide(ctx, u, sc, t, res)
	switch {
	case len(u.evs) > n:
		span.Str(telemetry.AttrEvent, string(u.evs[len(u.evs)-1].Type))
	case u.i.Version > before:
		span.Str(telemetry.AttrEvent, string(events.WriteStarted))
	case wait > 0:
		span.Str(telemetry.AttrStep, fsm.StepWait.String())
	default:
		span.Str(telemetry.AttrStep, fsm.StepDone.String())
	}
	span.State(string(u.i.State))
	span.End(err)
	return moved, wait, err
}

// decide is advance's decision, taken.
func (r *Reconciler) decide(ctx context.Context, u *stepUnit, sc *searchCache, t *ticket, res *StepResult) (bool, time.Duration, error) {
	i := u.i
	route, ok := r.routes[i.Route()]
	if !ok {
		return false, 0, errors.Errorf("step %s: %w: %q", i.ID, ErrRouteMissing, i.Route())
	}
	caps := i.Caps()
	realStart := time.Now()
	now := r.cfg.Now()
	decided := func(attempt string, d events.Data) (bool, time.Duration, error) {
		if err := u.decide(r.cfg.Worker, now, attempt, d); err != nil {
			return false, 0, err
		}
		return true, 0, nil
	}
	h := u.history()
	if d, ok := r.holdEvent(h, i); ok { // hold.go
		return decided("", d)
	}
	step := r.dec.Next(i, caps, now)
	if step.Kind == fsm.StepWrite {
		if r.lossHeld(h, i) {
			return false, r.cfg.Recheck, nil // handed off once its state allows it
		}
		// The claim (or whatever allows the write) is on the log, CAS'd
		// and acknowledged, before the write is taken.
		if len(u.evs) > 0 {
			t.release()
			err := r.commit(ctx, u, res)
			t.acquire(ctx)
			if err != nil {
				return false, 0, err
			}
		}
	}
	if r.hookStep != nil && step.Kind != fsm.StepWait && step.Kind != fsm.StepDone {
		if err := r.hookStep(i, step); err != nil {
			return false, 0, err
		}
	}
	switch step.Kind {
	case fsm.StepWait:
		return false, until(now, step.At), nil
	case fsm.StepDone:
		return false, 0, nil
	case fsm.StepAppend:
		return decided(step.AttemptID, step.Event)
	case fsm.StepWrite:
		if i.State == fsm.RetryClaimed && r.hookAfterClaim != nil {
			if err := r.hookAfterClaim(i.ID); err != nil {
				return false, 0, err
			}
		}
		if err := r.w.TakeWrite(ctx, route, u.h, i, step, realStart); err != nil && !errors.Is(err, producer.ErrOutcomeNotRecorded) {
			return false, 0, err
		}
		_, _ = r.cache.put(u.h, nil) // keep what the write appended
		res.Appended = append(res.Appended, events.WriteStarted)
		return true, 0, nil
	case fsm.StepReconcile:
		d, err := r.reconcile(ctx, i, route, caps, step.Strategy, sc)
		if err != nil {
			return false, 0, err
		}
		return decided("", d)
	case fsm.StepVerify:
		d, err := r.verify(ctx, i, route, caps)
		if err != nil {
			return false, 0, err
		}
		return decided("", d)
	}
	return false, 0, errors.Errorf("step %s: unknown step kind %s", i.ID, step.Kind)
}

func until(now, t time.Time) time.Duration {
	d := t.Sub(now)
	if d <= 0 {
		return time.Millisecond
	}
	return d
}

// jitter returns a full-jitter wait: uniform in [1ms, limit].
func (r *Reconciler) jitter(limit time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if limit <= time.Millisecond {
		return time.Millisecond
	}
	return time.Millisecond + time.Duration(r.cfg.Rand.Int64N(int64(limit-time.Millisecond)+1))
}
