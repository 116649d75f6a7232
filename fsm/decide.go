package fsm

import (
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
)

// StepKind says what the caller of Decider.Next must do.
type StepKind int

const (
	// StepWait: nothing can happen before Step.At; look again then.
	StepWait StepKind = iota
	// StepDone: nothing for settle to do (settled, or a human's turn).
	StepDone
	// StepAppend: append Step.Event (with CAS).
	StepAppend
	// StepWrite: append Step.Event (a WriteStarted) and, only once it is
	// acknowledged, call the adapter once and append the classified outcome.
	StepWrite
	// StepReconcile: run Step.Strategy's read-only query (search or status)
	// and append what ConcludeSearch / ConcludeStatus / ConcludeReadError
	// return.
	StepReconcile
	// StepVerify: read the object back (Get and a credential-free probe of
	// its live URL, or the status query) and append what ConcludeReadback /
	// ConcludeStatusReadback / ConcludeReadError return.
	StepVerify
)

func (k StepKind) String() string {
	return [...]string{"wait", "done", "append", "write", "reconcile", "verify"}[k]
}

// Step is one decision.
type Step struct {
	Kind StepKind
	// Event is the event to append (StepAppend, StepWrite).
	Event events.Data
	// AttemptID is the attempt Event belongs to ("" for none).
	AttemptID string
	// At is when to look again (StepWait).
	At time.Time
	// Strategy is the read-only query of StepReconcile: search | status.
	Strategy string
	// WritePath marks steps of the write path (approval request, expiry,
	// claim, WriteStarted), which a writer (Execute) takes as well as a
	// reconciler. Other steps are the reconciler's.
	WritePath bool
	// Why is a safe note for logs and dry runs.
	Why string
}

// Reconciliation strategies (ReconcileStarted.Strategy).
const (
	StrategySearch   = "search"
	StrategyStatus   = "status"
	StrategyReadback = "readback" // a proven write: read back its known external id
	StrategyNone     = "none"
)

// Decider is the decision function of settle: given a folded intent, the
// route's capabilities (Intent.Caps) and the time, it says what happens
// next. It is the only place that decides a write, a retry, a hand-off or
// an abandonment; the producer and the reconciler only carry out its
// steps, and the guards (Intent.Apply) refuse an append around it.
//
// Contract: Next and the Conclude functions are pure and deterministic
// (see the package doc) and never mutate the intent; Jitter is used only
// for times recorded on the log. A Decider is safe for concurrent use if
// its Jitter is.
type Decider struct {
	// Actor is who takes the steps: the owner of leases and claims, and
	// the actor of the events appended.
	Actor string
	// Lease bounds one reconciliation step and one retry claim.
	Lease time.Duration
	// RecordedGrace: a recorded intent whose writer never started it is
	// started by someone else after this long (0 for the writer itself).
	RecordedGrace time.Duration
	// Recheck is the first wait before looking again for an eventually
	// consistent result; it doubles up to MaxRecheck.
	Recheck    time.Duration
	MaxRecheck time.Duration
	// PollBase and ProcessingDeadline govern status polling of in-progress
	// targets: exponential backoff with full jitter, then a hand-off.
	PollBase           time.Duration
	ProcessingDeadline time.Duration
	// ResendBase and ResendCap govern resends after a proven rejection:
	// the k-th waits a deterministic "equal jitter" in [b/2, b] with
	// b = min(ResendCap, ResendBase·2^k).
	ResendBase time.Duration
	ResendCap  time.Duration
	// MaxCandidates bounds the candidates listed in one event's evidence.
	MaxCandidates int
	// Jitter returns a wait in [1ms, limit] (nil: limit itself).
	Jitter func(limit time.Duration) time.Duration
}

// MaxRetryAfter caps the wait an API's Retry-After (or declared rate-limit
// reset) imposes on the next attempt or check, so that a server's "come
// back in a year" never leaves an intent stuck; an intent's expiry still
// comes first for writes, and read_failing_after for failing reads.
const MaxRetryAfter = time.Hour

// DefaultDecider returns production settings for actor.
func DefaultDecider(actor string) Decider {
	return Decider{
		Actor: actor, Lease: 30 * time.Second, RecordedGrace: 2 * time.Minute,
		Recheck: 10 * time.Second, MaxRecheck: 5 * time.Minute,
		PollBase: 2 * time.Second, ProcessingDeadline: 15 * time.Minute,
		ResendBase: time.Second, ResendCap: time.Minute, MaxCandidates: 50,
	}
}

// Validate checks the settings, naming the field.
func (d Decider) Validate() error {
	switch {
	case d.Actor == "":
		return errors.New("decider: Actor: is required")
	case d.Lease <= 0:
		return errors.New("decider: Lease: must be positive")
	case d.RecordedGrace < 0:
		return errors.New("decider: RecordedGrace: must not be negative")
	case d.Recheck <= 0 || d.MaxRecheck < d.Recheck:
		return errors.New("decider: Recheck, MaxRecheck: must be positive, MaxRecheck ≥ Recheck")
	case d.PollBase <= 0 || d.ProcessingDeadline <= 0:
		return errors.New("decider: PollBase, ProcessingDeadline: must be positive")
	case d.ResendBase <= 0 || d.ResendCap < d.ResendBase:
		return errors.New("decider: ResendBase, ResendCap: must be positive, ResendCap ≥ ResendBase")
	case d.MaxCandidates < 1:
		return errors.New("decider: MaxCandidates: must be ≥ 1")
	}
	return nil
}

// StrategyOf is the reconciliation strategy capabilities allow.
func StrategyOf(c events.Capabilities) string {
	switch {
	case c.StatusQuery:
		return StrategyStatus
	case c.Search:
		return StrategySearch
	}
	return StrategyNone
}

// Window is the candidate search window of an intent: from the earliest of
// planned_at and its attempts minus SearchBefore, to the latest plus
// SearchAfter, widened by the clock-skew allowance. Times come from the log.
// The window's end is also when a proven write that cannot be read back is
// handed to a human.
func Window(i *Intent) (from, to time.Time) {
	p := i.Recorded.Policy
	start, end := i.Recorded.PlannedAt, i.Recorded.PlannedAt
	for _, a := range i.Attempts {
		if a.StartedAt.Before(start) {
			start = a.StartedAt
		}
		if a.StartedAt.After(end) {
			end = a.StartedAt
		}
	}
	skew := p.ClockSkew.D()
	return start.Add(-p.SearchBefore.D() - skew), end.Add(p.SearchAfter.D() + skew)
}

func wait(at time.Time, why string) Step { return Step{Kind: StepWait, At: at, Why: why} }
func done(why string) Step               { return Step{Kind: StepDone, Why: why} }
func appendStep(d events.Data, why string) Step {
	return Step{Kind: StepAppend, Event: d, Why: why}
}

// writePathStep is an append a writer takes as well as a reconciler.
func writePathStep(d events.Data, why string) Step {
	return Step{Kind: StepAppend, Event: d, Why: why, WritePath: true}
}
