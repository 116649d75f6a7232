package consumers

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
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
	// PollBase and ProcessingDeadline govern status polling of in-progress
	// targets: exponential backoff with full jitter from PollBase, handed off
	// after ProcessingDeadline.
	PollBase           time.Duration
	ProcessingDeadline time.Duration
	// RecordedGrace: a recorded intent that its writer never started is
	// started by a reconciler after this long.
	RecordedGrace time.Duration
	// Rand drives jitter (seed it for deterministic tests).
	Rand *rand.Rand
	// Logger receives one line per step.
	Logger *slog.Logger
	// OnStep, if set, is told of every step that appended (for metrics and
	// progress). It must not block.
	OnStep func(route, intentID string, res StepResult)
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
		MaxAckPending:      100_000,
		PollBase:           2 * time.Second,
		ProcessingDeadline: 15 * time.Minute,
		RecordedGrace:      2 * time.Minute,
		Rand:               rand.New(rand.NewPCG(1, 2)),
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
	case c.Lease <= 0, c.Recheck <= 0, c.MaxRecheck < c.Recheck, c.MaxWait <= 0, c.AckWait <= 0, c.PollBase <= 0, c.ProcessingDeadline <= 0:
		return errors.New("reconciler config: Lease, Recheck, MaxRecheck, MaxWait, AckWait, PollBase, ProcessingDeadline: must be positive (MaxRecheck ≥ Recheck)")
	case c.Batch < 1 || c.Batch > 1024:
		return fmt.Errorf("reconciler config: Batch: %d is outside 1..1024", c.Batch)
	case c.MaxAckPending < c.Batch:
		return errors.New("reconciler config: MaxAckPending: must be ≥ Batch")
	case c.Rand == nil:
		return errors.New("reconciler config: Rand: is required")
	case c.Logger == nil:
		return errors.New("reconciler config: Logger: is required")
	}
	return nil
}

// Reconciler settles unknown results without a second write. Many
// reconcilers (goroutines or processes) may run on one stream: every step
// is an append with per-subject CAS, so each step of an intent is taken by
// exactly one of them.
type Reconciler struct {
	cfg   Config
	store *producer.Store
	prod  *producer.Producer
	mu    sync.Mutex // guards cfg.Rand
	// hookAfterClaim, in tests, runs after a won RetryClaimed and before the
	// write; an error aborts the step as if the worker died there.
	hookAfterClaim func(intentID string) error
	readCalls      countingReads
	cache          historyCache
}

type countingReads struct {
	mu sync.Mutex
	n  int
}

func (c *countingReads) add(n int) { c.mu.Lock(); c.n += n; c.mu.Unlock() }

// NewReconciler returns a reconciler over store for routes.
func NewReconciler(store *producer.Store, cfg Config, routes ...producer.Route) (*Reconciler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pc := producer.DefaultConfig()
	pc.Actor, pc.Now = cfg.Worker, cfg.Now
	prod, err := producer.New(store, pc, routes...)
	if err != nil {
		return nil, fmt.Errorf("reconciler: %w", err)
	}
	return &Reconciler{cfg: cfg, store: store, prod: prod}, nil
}

// ReadCalls is how many external read calls (list, get, probe, status)
// this reconciler made.
func (r *Reconciler) ReadCalls() int {
	r.readCalls.mu.Lock()
	defer r.readCalls.mu.Unlock()
	return r.readCalls.n
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
// each transition with CAS. It returns when the intent must wait or is
// done. A lost CAS means another worker moved the intent: Step reloads.
func (r *Reconciler) Step(ctx context.Context, route, intentID string) (StepResult, error) {
	return r.step(ctx, route, intentID, nil)
}

func (r *Reconciler) step(ctx context.Context, route, intentID string, sc *searchCache) (StepResult, error) {
	var res StepResult
	for i := 0; i < 16; i++ {
		h, err := r.cache.load(ctx, r.store, route, intentID)
		if err != nil {
			return res, fmt.Errorf("step %s: %w", intentID, err)
		}
		intent, err := h.Fold()
		if err != nil {
			return res, fmt.Errorf("step %s: %w", intentID, err)
		}
		res.State = intent.State
		next, wait, err := r.advance(ctx, h, intent, sc)
		if errors.Is(err, producer.ErrConflict) {
			continue // another worker moved it: refresh and look again
		}
		if err == nil {
			_, _ = r.cache.put(h, nil) // keep what this step appended
		}
		if err != nil {
			return res, err
		}
		res.Appended = append(res.Appended, next...)
		res.State = intent.State
		if len(next) == 0 {
			res.Wait = wait
			res.Done = wait == 0
			if r.cfg.OnStep != nil && len(res.Appended) > 0 {
				res.Since = intent.LastAttempt()
				r.cfg.OnStep(route, intentID, res)
			}
			return res, nil
		}
	}
	return res, nil
}

// advance takes the intent one decision further. It returns the events it
// appended (none: the intent must wait `wait`, or is done when wait == 0).
func (r *Reconciler) advance(ctx context.Context, h *producer.History, i *fsm.Intent, sc *searchCache) ([]events.Type, time.Duration, error) {
	now := r.cfg.Now()
	route, ok := r.prod.Route(i.Route())
	if !ok {
		r.cfg.Logger.Warn("reconciler: intent of an unconfigured route is left alone", "intent", i.ID, "route", i.Route())
		return nil, 0, nil
	}
	caps := route.Adapter.Capabilities()
	p := i.Recorded.Policy
	skew := p.ClockSkew.D()
	appendOne := func(attempt string, d events.Data) ([]events.Type, time.Duration, error) {
		if err := r.store.AppendNext(ctx, h, i, r.cfg.Worker, now, attempt, d); err != nil {
			return nil, 0, err
		}
		r.cfg.Logger.Debug("reconciler step", "intent", i.ID, "event", d.EventType(), "state", i.State)
		return []events.Type{d.EventType()}, 0, nil
	}
	switch i.State {
	case fsm.Recorded:
		if i.Released || now.After(i.UpdatedAt.Add(r.cfg.RecordedGrace)) {
			if p.FirstWrite == events.PolicyApproval && len(i.Attempts) == 0 {
				return appendOne("", &events.ApprovalRequiredData{For: "first_write", Reason: "route policy requires approval"})
			}
			if _, err := r.prod.WriteAttempt(ctx, h, i); err != nil && !errors.Is(err, producer.ErrOutcomeNotRecorded) {
				return nil, 0, err
			}
			return []events.Type{events.WriteStarted}, 0, nil
		}
		return nil, until(now, i.UpdatedAt.Add(r.cfg.RecordedGrace)), nil

	case fsm.WriteStarted:
		a := i.LastAttempt()
		if now.After(a.Deadline.Add(skew)) {
			return appendOne(a.ID, &events.OutcomeUnknownData{Code: "attempt_deadline_passed",
				Message: "no outcome was recorded before the attempt's deadline; the writer may have died after sending"})
		}
		return nil, until(now, a.Deadline.Add(skew)), nil

	case fsm.Unknown, fsm.InProgress:
		if now.Before(i.NextCheckAt) {
			return nil, until(now, i.NextCheckAt), nil
		}
		strategy := strategyOf(caps)
		if strategy == "none" {
			return appendOne("", r.handoff(i, events.ReasonNoQueryNoDedup,
				"the route offers no status query and no search: the result cannot be proven; a human must check", caps))
		}
		return appendOne("", &events.ReconcileStartedData{Worker: r.cfg.Worker, LeaseUntil: now.Add(r.cfg.Lease), Strategy: strategy, Check: i.Checks + 1})

	case fsm.Reconciling:
		if i.LeaseOwner != r.cfg.Worker && now.Before(i.LeaseUntil) {
			return nil, until(now, i.LeaseUntil), nil
		}
		if i.LeaseOwner != r.cfg.Worker || !now.Before(i.LeaseUntil) {
			// The worker that started this step died (or we restarted):
			// give the intent back to reconciliation.
			return appendOne("", &events.CheckDeferredData{Reason: "lease_expired", NextCheckAt: now})
		}
		d, err := r.reconcile(ctx, i, route, caps, sc)
		if err != nil {
			return nil, 0, err
		}
		return appendOne("", d)

	case fsm.Verifying:
		d, err := r.verify(ctx, i, route, caps)
		if err != nil {
			return nil, 0, err
		}
		return appendOne("", d)

	case fsm.NotFound, fsm.ApprovedState:
		if i.State == fsm.ApprovedState && len(i.Attempts) == 0 {
			if _, err := r.prod.WriteAttempt(ctx, h, i); err != nil && !errors.Is(err, producer.ErrOutcomeNotRecorded) {
				return nil, 0, err
			}
			return []events.Type{events.WriteStarted}, 0, nil
		}
		return appendOne("", r.decideRetry(i, caps, now))

	case fsm.RetryClaimed:
		c := i.Claim
		if !now.Before(c.LeaseUntil) {
			return appendOne("", &events.ClaimExpiredData{Owner: c.Owner, LeaseUntil: c.LeaseUntil})
		}
		if c.Owner != r.cfg.Worker {
			return nil, until(now, c.LeaseUntil.Add(time.Millisecond)), nil
		}
		if r.hookAfterClaim != nil {
			if err := r.hookAfterClaim(i.ID); err != nil {
				return nil, 0, err
			}
		}
		if _, err := r.prod.WriteAttempt(ctx, h, i); err != nil && !errors.Is(err, producer.ErrOutcomeNotRecorded) {
			return nil, 0, err
		}
		return []events.Type{events.WriteStarted}, 0, nil

	case fsm.Failed:
		if len(i.PartialEffects) > 0 {
			return appendOne("", &events.ManualActionRequiredData{Reason: events.ReasonPartialEffects,
				Message: "the target failed but left partial effects; a human must decide", Owner: "operators",
				Evidence: events.Evidence{Unverified: i.PartialEffects, Attempts: attemptRefs(i)}})
		}
		return nil, 0, nil
	}
	// confirmed, abandoned, manual_action, rejected, awaiting_approval:
	// nothing for a reconciler to do.
	return nil, 0, nil
}

func until(now, t time.Time) time.Duration {
	d := t.Sub(now)
	if d <= 0 {
		return time.Millisecond
	}
	return d
}

func strategyOf(c adapter.Capabilities) string {
	switch {
	case c.StatusQuery:
		return "status"
	case c.Search:
		return "search"
	}
	return "none"
}

func attemptRefs(i *fsm.Intent) []events.AttemptRef {
	out := make([]events.AttemptRef, len(i.Attempts))
	for k, a := range i.Attempts {
		out[k] = events.AttemptRef{AttemptID: a.ID, StartedAt: a.StartedAt, Outcome: string(a.Outcome)}
	}
	return out
}

// handoff builds the manual action for a route that cannot prove a result:
// what was approved, every attempt, what was queried and what is not
// verified. No automatic write follows a handoff.
func (r *Reconciler) handoff(i *fsm.Intent, reason, msg string, caps adapter.Capabilities) *events.ManualActionRequiredData {
	var queried []string
	if caps.StatusQuery {
		queried = append(queried, "status by request id")
	}
	if caps.Search {
		queried = append(queried, "search by account and window")
	}
	return &events.ManualActionRequiredData{Reason: reason, Message: msg, Owner: "operators",
		Evidence: events.Evidence{Attempts: attemptRefs(i), Queried: queried,
			Unverified: []string{"whether attempt " + i.LastAttempt().ID + " executed"}}}
}

// decideRetry decides, after not_found (or an approval), whether one more
// attempt is safe: budget, policy, expiry, key retention, approval; the
// claim itself is then won or lost by CAS.
func (r *Reconciler) decideRetry(i *fsm.Intent, caps adapter.Capabilities, now time.Time) events.Data {
	p := i.Recorded.Policy
	manual := func(reason, msg string) events.Data {
		return &events.ManualActionRequiredData{Reason: reason, Message: msg, Owner: "operators",
			Evidence: events.Evidence{Attempts: attemptRefs(i)}}
	}
	if !i.Recorded.ExpiresAt.IsZero() && !now.Before(i.Recorded.ExpiresAt) {
		return manual(events.ReasonIntentExpired, "the intent expired before a retry")
	}
	if i.BudgetLeft() <= 0 {
		return manual(events.ReasonRetryBudgetSpent, "proven not executed, but the retry budget is spent")
	}
	if p.Retry == events.PolicyNever {
		return manual(events.ReasonRetryNever, "proven not executed; the route never retries automatically")
	}
	var keyValid time.Time
	retention := p.KeyRetention.D()
	if retention == 0 && caps.IdempotencyKey {
		retention = caps.KeyRetention
	}
	if caps.IdempotencyKey {
		if retention <= 0 || len(i.Attempts) == 0 {
			return manual(events.ReasonKeyRetentionExpired, "the key's retention cannot be established")
		}
		// Retention runs from the key's first receipt, which is no earlier
		// than the first WriteStarted: measuring from it is conservative.
		keyValid = i.Attempts[0].StartedAt.Add(retention - p.RetentionMargin.D() - p.ClockSkew.D())
		if !now.Before(keyValid) {
			return manual(events.ReasonKeyRetentionExpired, "the idempotency key's retention has passed: a retry could execute twice")
		}
	}
	if p.Retry == events.PolicyApproval && i.State == fsm.NotFound {
		return &events.ApprovalRequiredData{For: "retry", Reason: "proven not executed; the route requires approval before a retry"}
	}
	lease := now.Add(r.cfg.Lease)
	if !keyValid.IsZero() && keyValid.Before(lease) {
		lease = keyValid
	}
	return &events.RetryClaimedData{Owner: r.cfg.Worker, LeaseUntil: lease, Attempt: len(i.Attempts) + 1,
		BudgetLeft: i.BudgetLeft() - 1, KeyValidUntil: keyValid, ApprovedBy: i.ApprovedBy}
}

// backoff returns the wait before the n-th recheck (n ≥ 1), doubling.
func (r *Reconciler) backoff(n int) time.Duration {
	d := r.cfg.Recheck
	for k := 1; k < n && d < r.cfg.MaxRecheck; k++ {
		d *= 2
	}
	if d > r.cfg.MaxRecheck {
		d = r.cfg.MaxRecheck
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
