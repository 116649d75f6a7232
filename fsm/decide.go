package fsm

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
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
// route's capabilities (frozen in the intent: Intent.Caps) and the time, it
// says what happens next. It is the only place that decides a write, a
// retry, a hand-off or an abandonment; the producer and the reconciler both
// call it and only carry out its steps. Its safety rules are also the fsm
// guards' (Intent.Apply), so a caller that appended around it would be
// refused.
//
// Contract: Next and the Conclude functions are pure and deterministic.
// They read the intent, the arguments and the Decider's settings, never
// the wall clock, do no I/O and never mutate the intent. Jitter is the only
// source of randomness and is used only for times that are then recorded
// on the log (so a replay never depends on it). A Decider is safe for
// concurrent use if its Jitter is.
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
// reset) imposes on the next attempt or check: one hour. A longer ask is
// honoured for an hour; an intent's expiry comes first for writes (an
// expired intent is abandoned, never written), and reads that keep failing
// are handed off after the policy's read_failing_after, so a server's
// "come back in a year" never leaves an intent stuck.
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

// Next decides the intent's next step at now. caps are i.Caps().
func (d Decider) Next(i *Intent, caps events.Capabilities, now time.Time) Step {
	p := i.Recorded.Policy
	skew := p.ClockSkew.D()
	switch i.State {
	case Recorded:
		if i.Expired(now) {
			return d.abandonExpired(i)
		}
		if len(i.Attempts) == 0 && p.FirstWrite == events.PolicyApproval {
			s := appendStep(&events.ApprovalRequiredData{For: "first_write", Reason: "route policy requires approval before the first write"}, "approval before the first write")
			s.WritePath = true
			return s
		}
		if !i.Released && now.Before(i.UpdatedAt.Add(d.RecordedGrace)) {
			return wait(i.UpdatedAt.Add(d.RecordedGrace), "the writer may still start it")
		}
		return d.write(i, now, "")

	case AwaitingApproval:
		if i.Expired(now) {
			return d.abandonExpired(i)
		}
		if !i.Recorded.ExpiresAt.IsZero() {
			return wait(i.Recorded.ExpiresAt, "awaiting approval until the intent expires")
		}
		return done("awaiting approval")

	case ApprovedState:
		if i.Expired(now) {
			return d.abandonExpired(i)
		}
		if len(i.Attempts) == 0 {
			return d.write(i, now, "")
		}
		return d.retry(i, caps, now)

	case WriteStarted:
		a := i.LastAttempt()
		if now.After(a.Deadline.Add(skew)) {
			s := appendStep(&events.OutcomeUnknownData{Code: "attempt_deadline_passed",
				Message: "no outcome was recorded before the attempt's deadline; the writer may have died after sending"}, "attempt deadline passed")
			s.AttemptID = a.ID
			return s
		}
		return wait(a.Deadline.Add(skew).Add(time.Millisecond), "the attempt may still be running")

	case Verifying:
		return Step{Kind: StepVerify, Why: "read the object back"}

	case Rejected:
		r := i.LastRejection
		switch {
		case r != nil && r.Code == events.CodeKeyReused:
			// Not a rejection: evidence that an earlier request with the
			// key reached the API (recorded so by a mistaken adapter).
			// Nothing proves it did not execute.
			return appendStep(d.handoff(i, events.ReasonKeyReused,
				"the API answered that the idempotency key was already used: an earlier request with it reached the API and may have executed; it is never resent", caps), "key already used")
		case r == nil || !r.Retryable:
			return done("the rejection is definite")
		case p.Retry == events.PolicyNever:
			return done("the route never retries")
		case i.ResendsLeft() <= 0:
			return done("resend budget spent")
		case i.Expired(now):
			return d.abandonExpired(i)
		}
		due := i.UpdatedAt.Add(d.resendWait(i))
		why := "resend backoff"
		if i.RetryNotBefore.After(due) {
			due, why = i.RetryNotBefore, "the API asked to wait (Retry-After)"
		}
		if exp := i.Recorded.ExpiresAt; !exp.IsZero() && exp.Before(due) {
			due = exp // then abandoned, never written
		}
		if now.Before(due) {
			return wait(due, why)
		}
		return d.retry(i, caps, now)

	case Unknown, InProgress:
		if now.Before(i.NextCheckAt) {
			return wait(i.NextCheckAt, "next check")
		}
		strategy := StrategyOf(caps)
		if i.WriteProven {
			if _, to := Window(i); !now.Before(to) {
				return appendStep(d.handoff(i, events.ReasonWrittenUnverified,
					"an attempt was proven written but the object could not be read back before the window closed (deleted, moderated or slow); it is never written again", caps), "proven write not verifiable")
			}
			strategy = StrategyReadback
		}
		if strategy == StrategyNone {
			return appendStep(d.handoff(i, events.ReasonNoQueryNoDedup,
				"the route offers no status query and no search: the result cannot be proven; a human must check", caps), "no way to settle")
		}
		return appendStep(&events.ReconcileStartedData{Worker: d.Actor, LeaseUntil: now.Add(d.Lease), Strategy: strategy, Check: i.Checks + 1}, "take the intent for one check")

	case Reconciling:
		if i.LeaseOwner != d.Actor && now.Before(i.LeaseUntil) {
			return wait(i.LeaseUntil, "another worker holds the lease")
		}
		if i.LeaseOwner != d.Actor || !now.Before(i.LeaseUntil) {
			// The worker that took this step died (or we restarted).
			return appendStep(&events.CheckDeferredData{Reason: events.DeferLeaseExpired, NextCheckAt: now}, "lease expired")
		}
		if i.WriteProven {
			return appendStep(&events.CandidateFoundData{ExternalID: i.ExternalID, LiveURL: i.LiveURL, Source: events.SourceResponse}, "read back the proven write")
		}
		return Step{Kind: StepReconcile, Strategy: StrategyOf(caps), Why: "query the external system"}

	case NotFound:
		return d.retry(i, caps, now)

	case RetryClaimed:
		c := i.Claim
		if !now.Before(c.LeaseUntil) {
			return appendStep(&events.ClaimExpiredData{Owner: c.Owner, LeaseUntil: c.LeaseUntil}, "claim lease expired")
		}
		if c.Owner != d.Actor {
			return wait(c.LeaseUntil, "another worker holds the claim")
		}
		return d.write(i, now, d.Actor)

	case Failed:
		if len(i.PartialEffects) > 0 {
			return appendStep(&events.ManualActionRequiredData{Reason: events.ReasonPartialEffects,
				Message: "the target failed but left partial effects; a human must decide", Owner: "operators",
				Evidence: events.Evidence{Unverified: i.PartialEffects, Attempts: AttemptRefs(i)}}, "partial effects")
		}
		return done("failed without effects")
	}
	// confirmed, abandoned, manual_action: nothing for settle to do.
	return done(string(i.State))
}

// write is the step of attempt n. A retry carries the request the first
// attempt recorded: it is sent again as it was (the producer renders and
// records the request of an attempt that carries none).
func (d Decider) write(i *Intent, now time.Time, owner string) Step {
	n := len(i.Attempts) + 1
	return Step{Kind: StepWrite, WritePath: true, AttemptID: events.AttemptID(i.ID, n), Why: fmt.Sprintf("write attempt %d", n),
		Event: &events.WriteStartedData{Attempt: n, IdempotencyKey: i.Recorded.IdempotencyKey,
			Deadline: now.Add(i.Recorded.Policy.AttemptDeadline.D()), ClaimOwner: owner, Request: i.SentRequest()}}
}

func (d Decider) abandonExpired(i *Intent) Step {
	s := appendStep(&events.AbandonedData{By: d.Actor, Reason: string(events.ReasonIntentExpired) + ": expires_at passed before a write could start",
		EffectPossible: i.AnyEffectPossible()}, "expired")
	s.WritePath = true
	return s
}

// retry decides, after not_found, an approval or a retryable rejection,
// whether one more attempt is safe. The claim is then won or lost by CAS.
func (d Decider) retry(i *Intent, caps events.Capabilities, now time.Time) Step {
	p := i.Recorded.Policy
	manual := func(reason events.ManualReason, msg string) Step {
		return appendStep(&events.ManualActionRequiredData{Reason: reason, Message: msg, Owner: "operators",
			Evidence: events.Evidence{Attempts: AttemptRefs(i), Queried: queried(caps)}}, string(reason))
	}
	if i.Expired(now) {
		return d.abandonExpired(i)
	}
	if i.WriteProven {
		return manual(events.ReasonWrittenUnverified, "an attempt was proven written: it is never retried")
	}
	if now.Before(i.RetryNotBefore) {
		return wait(i.RetryNotBefore, "the API asked to wait (Retry-After)")
	}
	budget := i.BudgetLeft()
	if budget <= 0 {
		return manual(events.ReasonRetryBudgetSpent, "proven not executed, but the retry budget is spent")
	}
	if p.Retry == events.PolicyNever {
		return manual(events.ReasonRetryNever, "proven not executed; the route never retries automatically")
	}
	var keyValid, claimBy time.Time
	if i.RiskyAttempts() {
		// An attempt may have executed and no authoritative search has
		// cleared it: only the idempotency key can make a retry safe, and
		// only while it stays valid through the attempt the claim allows.
		keyValid = i.keyValidUntil(caps)
		claimBy = ClaimBy(i, keyValid)
		switch {
		case keyValid.IsZero() && caps.IdempotencyKey:
			return manual(events.ReasonKeyRetentionExpired, "the idempotency key's retention cannot be established: a retry could execute twice")
		case keyValid.IsZero():
			return manual(events.ReasonNoDedupProof, "not found, but nothing proves a retry cannot duplicate the write: the route has no idempotency key and no authoritative search ("+string(i.NotFoundBy)+")")
		case !now.Before(keyValid):
			return manual(events.ReasonKeyRetentionExpired, "the idempotency key's retention has passed: a retry could execute twice")
		case !now.Before(claimBy):
			return manual(events.ReasonKeyRetentionExpired, "the idempotency key's retention ends before a retry's attempt could: the attempt could reach the API after the key expired and execute twice")
		}
	}
	if p.Retry == events.PolicyApproval && i.State != ApprovedState {
		s := appendStep(&events.ApprovalRequiredData{For: "retry", Reason: "proven not executed; the route requires approval before a retry"}, "approval before a retry")
		s.WritePath = true
		return s
	}
	lease := now.Add(d.Lease)
	if !claimBy.IsZero() && claimBy.Before(lease) {
		lease = claimBy
	}
	if exp := i.Recorded.ExpiresAt; !exp.IsZero() && exp.Before(lease) {
		lease = exp
	}
	s := appendStep(&events.RetryClaimedData{Owner: d.Actor, LeaseUntil: lease, Attempt: len(i.Attempts) + 1,
		BudgetLeft: budget - 1, KeyValidUntil: keyValid, ApprovedBy: i.ApprovedBy}, "claim the retry")
	s.WritePath = true
	return s
}

// resendWait is the backoff before resending after the k-th consecutive
// proven rejection: a deterministic equal jitter in [b/2, b], derived from
// the intent and attempt so every worker computes the same time.
func (d Decider) resendWait(i *Intent) time.Duration {
	_, k := i.retriesAndResends()
	b := d.ResendBase
	for n := 0; n < k && b < d.ResendCap; n++ {
		b *= 2
	}
	b = min(b, d.ResendCap)
	h := fnv.New64a()
	_, _ = h.Write([]byte(i.ID))
	_ = binary.Write(h, binary.BigEndian, uint64(len(i.Attempts)))
	half := b / 2
	if half <= 0 {
		return b
	}
	return half + time.Duration(h.Sum64()%uint64(half+1))
}

// backoff is the wait before the n-th recheck (n ≥ 1): Recheck doubling
// up to MaxRecheck.
func (d Decider) backoff(n int) time.Duration {
	b := d.Recheck
	for k := 1; k < n && b < d.MaxRecheck; k++ {
		b *= 2
	}
	return min(b, d.MaxRecheck)
}

func (d Decider) jitter(limit time.Duration) time.Duration {
	if d.Jitter == nil || limit <= time.Millisecond {
		return max(limit, time.Millisecond)
	}
	return d.Jitter(limit)
}

// PollCap is the exponential cap of poll n: PollBase·2^(n-1), bounded by
// MaxRecheck; the wait before poll n is a full jitter under it.
func (d Decider) PollCap(n int) time.Duration {
	b := d.PollBase
	for k := 1; k < n && b < d.MaxRecheck; k++ {
		b *= 2
	}
	return min(b, d.MaxRecheck)
}

// keyValidUntil is KeyValidUntil judged by caps.
func (i *Intent) keyValidUntil(c events.Capabilities) time.Time {
	p := i.Recorded.Policy
	retention := c.KeyRetention.D()
	if p.KeyRetention > 0 && (retention == 0 || p.KeyRetention.D() < retention) {
		retention = p.KeyRetention.D()
	}
	if !c.IdempotencyKey || retention <= 0 || len(i.Attempts) == 0 {
		return time.Time{}
	}
	return i.Attempts[0].StartedAt.Add(retention - p.RetentionMargin.D() - p.ClockSkew.D())
}

// ClaimBy is the latest end of a retry claim's lease whose attempt still
// reaches the API while the idempotency key, valid until keyValid, holds:
// an attempt starts before its claim's lease ends and may reach the API
// until its deadline (the policy's attempt deadline) plus the clock-skew
// allowance. Zero when keyValid is zero.
func ClaimBy(i *Intent, keyValid time.Time) time.Time {
	if keyValid.IsZero() {
		return time.Time{}
	}
	p := i.Recorded.Policy
	return keyValid.Add(-p.AttemptDeadline.D() - p.ClockSkew.D())
}

// AttemptRefs lists the intent's attempts for evidence.
func AttemptRefs(i *Intent) []events.AttemptRef {
	out := make([]events.AttemptRef, len(i.Attempts))
	for k, a := range i.Attempts {
		out[k] = events.AttemptRef{AttemptID: a.ID, StartedAt: a.StartedAt, Outcome: string(a.Outcome)}
	}
	return out
}

func queried(c events.Capabilities) []string {
	var q []string
	if c.StatusQuery {
		q = append(q, "status by request id")
	}
	if c.Search {
		q = append(q, "search by account and window")
	}
	return q
}

// handoff builds the manual action for a result that cannot be proven:
// every attempt, what was queried and what is not verified. No automatic
// write follows a hand-off.
func (d Decider) handoff(i *Intent, reason events.ManualReason, msg string, caps events.Capabilities) *events.ManualActionRequiredData {
	var unverified []string
	if a := i.LastAttempt(); a != nil {
		unverified = []string{"whether attempt " + a.ID + " executed"}
	}
	if i.WriteProven {
		unverified = []string{"object " + i.ExternalID + " (proven written) as it stands now"}
	}
	return &events.ManualActionRequiredData{Reason: reason, Message: msg, Owner: "operators",
		Evidence: events.Evidence{Attempts: AttemptRefs(i), Queried: queried(caps), Unverified: unverified, Errors: slices.Clone(i.ReadErrors)}}
}

// --- conclusions of a read ---

// Candidate is an external object as a search, a status query or a
// readback saw it, reduced to what the decision needs. PayloadSHA256 is the
// canon/v1 digest of its payload in the intent's shape ("" when it could
// not be hashed); Resembles is the route's opinion that the payload is a
// damaged copy of the intent's (adapter.Resembler).
type Candidate struct {
	ExternalID    string
	LiveURL       string
	AuthorID      string
	ParentID      string
	Visibility    string
	CreatedAt     time.Time
	PayloadSHA256 string
	CorrelationID string
	Resembles     bool
}

// MarkedOurs reports a candidate whose correlation marker names this
// intent on a route that writes one, by the intent's account (the
// account's immutable id): an effect of this intent, whatever its payload,
// parent or creation time say. (A marker quoted by another author is not
// proof: that candidate is at most a near match.)
func MarkedOurs(i *Intent, caps events.Capabilities, c Candidate) bool {
	return caps.Correlation && c.CorrelationID == i.ID && c.AuthorID == i.Recorded.Account
}

// Match compares a candidate with the intent's identity: author (the
// account's immutable id), canonical payload digest, parent, the
// correlation marker on routes that write one, and the creation time (an
// object older than the first attempt is never ours — unless its marker
// names this intent: only our write can carry it, so a creation time
// that looks older says the API's clock is behind ours).
func Match(i *Intent, caps events.Capabilities, c Candidate) events.CandidateRef {
	ref := events.CandidateRef{ExternalID: c.ExternalID, LiveURL: c.LiveURL, CreatedAt: c.CreatedAt}
	if c.AuthorID != i.Recorded.Account {
		ref.Mismatch = append(ref.Mismatch, "author")
	}
	if c.PayloadSHA256 == "" || c.PayloadSHA256 != i.Recorded.PayloadSHA256 {
		ref.Mismatch = append(ref.Mismatch, "payload")
	}
	if c.ParentID != i.Recorded.ParentExternalID {
		ref.Mismatch = append(ref.Mismatch, "parent")
	}
	if caps.Correlation && c.CorrelationID != i.ID {
		ref.Mismatch = append(ref.Mismatch, "correlation")
	}
	if i.PreExisting(c.CreatedAt) && !(caps.Correlation && c.CorrelationID == i.ID) {
		ref.Mismatch = append(ref.Mismatch, "pre_existing")
	}
	ref.Match = len(ref.Mismatch) == 0
	return ref
}

// near reports a candidate that could be our write, altered: it differs in
// one identity field only (author, parent, a payload the route calls a
// damaged copy, or a missing correlation marker). A candidate created
// before our first attempt, or whose marker names another intent, is
// provably someone else's and never near.
func near(c Candidate, ref events.CandidateRef) bool {
	if ref.Match || slices.Contains(ref.Mismatch, "pre_existing") {
		return false
	}
	m := ref.Mismatch
	if slices.Contains(m, "correlation") {
		if c.CorrelationID != "" {
			return false
		}
		if len(m) == 1 {
			return true // our write with its marker stripped?
		}
		m = slices.DeleteFunc(slices.Clone(m), func(s string) bool { return s == "correlation" })
	}
	if len(m) != 1 {
		return false
	}
	switch m[0] {
	case "author", "parent":
		return true
	case "payload":
		return c.Resembles
	}
	return false
}

// boundRefs keeps at most max candidates, exact matches first.
func boundRefs(refs []events.CandidateRef, max int) ([]events.CandidateRef, int) {
	if len(refs) <= max {
		return refs, 0
	}
	out := make([]events.CandidateRef, 0, max)
	for _, r := range refs {
		if r.Match && len(out) < max {
			out = append(out, r)
		}
	}
	for _, r := range refs {
		if !r.Match && len(out) < max {
			out = append(out, r)
		}
	}
	return out, len(refs) - len(out)
}

// ConcludeSearch turns one search's candidates (those of the intent's
// window) into the event that ends the ReconcileStarted step. listedAt is
// when the listing started (before its first page was read; zero: now):
// the window counts as closed only for a listing started after it closed,
// since a listing that straddled the window's end may have read its pages
// before a write made inside the window showed. 1 exact match
// → CandidateFound; 2+ → ManualActionRequired{duplicate_exact_matches}; a
// candidate our marker names that is not exact (edited, rewritten, moved)
// → ManualActionRequired{written_modified} at once, never a retry; 0 while
// the window is open → CheckDeferred; 0 after it → a near match hands off,
// otherwise SearchWindowElapsed.
func (d Decider) ConcludeSearch(i *Intent, caps events.Capabilities, now, listedAt time.Time, cands []Candidate) events.Data {
	if listedAt.IsZero() || listedAt.After(now) {
		listedAt = now
	}
	refs := make([]events.CandidateRef, len(cands))
	var exact, ours []int
	for k, c := range cands {
		refs[k] = Match(i, caps, c)
		if refs[k].Match {
			exact = append(exact, k)
		}
		if MarkedOurs(i, caps, c) {
			ours = append(ours, k) // every exact match on a marker route
		}
	}
	shown, omitted := boundRefs(refs, d.MaxCandidates)
	evidence := func() events.Evidence {
		return events.Evidence{Candidates: shown, CandidatesOmitted: omitted, Attempts: AttemptRefs(i), Queried: []string{"search by account and window"}}
	}
	switch {
	case len(ours) > 1 && len(exact) <= 1:
		return &events.ManualActionRequiredData{Reason: events.ReasonDuplicateExactMatches, Owner: "operators",
			Message:  fmt.Sprintf("%d objects of this account carry this intent's marker: the write executed more than once; nothing was picked or deleted", len(ours)),
			Evidence: evidence()}
	case len(exact) == 1:
		c := cands[exact[0]]
		if c.ExternalID == "" {
			return &events.ManualActionRequiredData{Reason: events.ReasonNoExternalID, Owner: "operators",
				Message: "one exact match, but the API gives no external id to read it back by", Evidence: evidence()}
		}
		return &events.CandidateFoundData{ExternalID: c.ExternalID, LiveURL: c.LiveURL, Source: events.SourceSearch,
			Candidates: shown, CandidatesOmitted: omitted, CreatedAt: c.CreatedAt, CorrelationID: c.CorrelationID, Account: c.AuthorID}
	case len(exact) > 1:
		return &events.ManualActionRequiredData{Reason: events.ReasonDuplicateExactMatches, Owner: "operators",
			Message:  fmt.Sprintf("%d exact matches: the write executed more than once; nothing was picked or deleted", len(exact)),
			Evidence: evidence()}
	case len(ours) == 1:
		ev := evidence()
		ev.Unverified = []string{"whether object " + cands[ours[0]].ExternalID + " as it stands (" + strings.Join(refs[ours[0]].Mismatch, ", ") + " differ) is the intended effect"}
		return &events.ManualActionRequiredData{Reason: events.ReasonWrittenModified, Owner: "operators",
			Message:  "an object carrying this intent's marker differs from the intent (edited after the write, or rewritten by the API): it is this intent's effect and is never written again",
			Evidence: ev}
	}
	from, to := Window(i)
	if listedAt.Before(to) {
		// Open for this listing (it may have closed while it ran: then
		// the next listing, started after it, looks at once).
		next := now.Add(d.backoff(i.Checks))
		if next.After(to) {
			next = to
			if next.Before(now) {
				next = now
			}
		}
		return &events.CheckDeferredData{Reason: events.DeferEventualConsistency, NextCheckAt: next, Candidates: shown, CandidatesOmitted: omitted}
	}
	for k, c := range cands {
		if near(c, refs[k]) {
			return &events.ManualActionRequiredData{Reason: events.ReasonNearMatch, Owner: "operators",
				Message:  "no exact match, but a candidate differs from the intent in one identity field only; a retry could duplicate it",
				Evidence: evidence()}
		}
	}
	if i.WriteProven {
		return &events.ManualActionRequiredData{Reason: events.ReasonWrittenUnverified, Owner: "operators",
			Message: "an attempt was proven written but no search found it before the window closed", Evidence: evidence()}
	}
	return &events.SearchWindowElapsedData{WindowFrom: from, WindowTo: to, Searches: i.Checks, Candidates: shown, CandidatesOmitted: omitted}
}

// ConcludeIncompleteSearch concludes from a listing whose end was not
// proven (adapter.ErrListingIncomplete; code is its safe code): what it
// read can prove our write present — one exact match, two or more, our
// marked object changed, an exact match without an id — never absent.
// Anything else is a failed read (ConcludeReadError), never "0
// candidates", a near match or a closed window.
func (d Decider) ConcludeIncompleteSearch(i *Intent, caps events.Capabilities, now, listedAt time.Time, cands []Candidate, code string) events.Data {
	ev := d.ConcludeSearch(i, caps, now, listedAt, cands)
	switch e := ev.(type) {
	case *events.CandidateFoundData:
		return ev
	case *events.ManualActionRequiredData:
		switch e.Reason {
		case events.ReasonDuplicateExactMatches, events.ReasonWrittenModified, events.ReasonNoExternalID:
			return ev
		}
	}
	return d.ConcludeReadError(i, caps, now, "search", code)
}

// StatusObservation is what a status query said (Found false: not found).
type StatusObservation struct {
	Found          bool
	State          string // completed | processing | failed
	ExternalID     string
	LiveURL        string
	Code           string
	PartialEffects []string
	// For a readback: the applied change's digest and versions.
	PayloadSHA256  string
	Version        string
	AppliedVersion string
	// CorrelationID is the intent the object's marker names (routes with
	// a correlation marker).
	CorrelationID string
	// Account is the account the API says the write belongs to ("" when
	// it does not say).
	Account string
}

// Status states of StatusObservation.State.
const (
	StatusCompleted  = "completed"
	StatusProcessing = "processing"
	StatusFailed     = "failed"
)

// ConcludeStatus turns a status query's answer into the event that ends
// the ReconcileStarted step.
func (d Decider) ConcludeStatus(i *Intent, caps events.Capabilities, now time.Time, st StatusObservation) events.Data {
	if !st.Found {
		visibleBy := i.LastAttempt().StartedAt.Add(caps.ReflectionDelay.D() + i.Recorded.Policy.ClockSkew.D())
		if now.Before(visibleBy) {
			return &events.CheckDeferredData{Reason: events.DeferReflectionDelay, NextCheckAt: visibleBy}
		}
		if i.WriteProven {
			return d.handoff(i, events.ReasonWrittenUnverified, "an attempt was proven written but the status query does not know it", caps)
		}
		return &events.StatusNotFoundData{ReflectionDelay: caps.ReflectionDelay, Queried: "status by request id"}
	}
	if ev := d.statusNotOurs(i, caps, st); ev != nil {
		return ev
	}
	switch st.State {
	case StatusCompleted:
		if st.ExternalID == "" {
			ev := d.handoff(i, events.ReasonNoExternalID, "the status query says completed but gives no external id to read it back by", caps)
			ev.Evidence.CurrentState = st.State
			return ev
		}
		return &events.CandidateFoundData{ExternalID: st.ExternalID, LiveURL: st.LiveURL, Source: events.SourceStatus, CorrelationID: st.CorrelationID, Account: st.Account}
	case StatusProcessing:
		deadline := i.ProcessingDeadline
		if deadline.IsZero() {
			deadline = now.Add(d.ProcessingDeadline)
		}
		if !now.Before(deadline) {
			ev := d.handoff(i, events.ReasonProcessingDeadline, "the target still says processing after the polling deadline; stays unverified, handed off", caps)
			ev.Evidence.CurrentState = st.State
			return ev
		}
		next := now.Add(d.jitter(d.PollCap(i.Polls + 1)))
		if next.After(deadline) {
			next = deadline
		}
		return &events.TargetProcessingData{Poll: i.Polls + 1, NextCheckAt: next, Deadline: deadline}
	case StatusFailed:
		code := st.Code
		if code == "" {
			code = "target_failed"
		}
		return &events.TargetFailedData{Code: code, PartialEffects: st.PartialEffects}
	}
	return d.ConcludeReadError(i, caps, now, "status", "unknown_status_state")
}

// statusNotOurs hands off a status answer that is not (or cannot be
// checked to be) this intent's write: one naming another account (a
// request id is not unique across accounts), one whose marker names
// another intent, and a completed one without a marker on a route that
// writes one. Nil when the answer may be ours. Such an answer is never a
// conclusion the guards would refuse: a step that cannot conclude would
// be taken again and again.
func (d Decider) statusNotOurs(i *Intent, caps events.Capabilities, st StatusObservation) *events.ManualActionRequiredData {
	ref := events.CandidateRef{ExternalID: st.ExternalID, LiveURL: st.LiveURL}
	var reason events.ManualReason
	var msg string
	switch {
	case st.Account != "" && st.Account != i.Recorded.Account:
		ref.Mismatch = []string{"account"}
		reason, msg = events.ReasonStatusNotOurs, "the status query answered with a write of another account ("+quoteOrNone(st.Account)+") under the same request id: it says nothing of this intent's write"
	case caps.Correlation && st.CorrelationID != "" && st.CorrelationID != i.ID:
		ref.Mismatch = []string{"correlation"}
		reason, msg = events.ReasonStatusNotOurs, "the status query answered with a write whose marker names another intent: it says nothing of this intent's write"
	case caps.Correlation && st.CorrelationID == "" && st.State == StatusCompleted:
		ref.Mismatch = []string{"correlation"}
		reason, msg = events.ReasonStatusUnverifiable, "the status query says completed, but its answer carries no marker where the route writes one: it cannot be checked to be this intent's write"
	default:
		return nil
	}
	ev := d.handoff(i, reason, msg, caps)
	ev.Evidence.CurrentState = st.State
	ev.Evidence.Candidates = []events.CandidateRef{ref}
	return ev
}

// ConcludeReadError records a failed external read (what: search, status,
// get, probe; code: a safe error code): look again later, or, once reads
// have failed for longer than the policy's ReadFailingAfter, hand off with
// the last errors. A read failure never counts as "not found".
func (d Decider) ConcludeReadError(i *Intent, caps events.Capabilities, now time.Time, what, code string) events.Data {
	return d.ConcludeReadFailure(i, caps, now, what, code, 0)
}

// ConcludeReadFailure is ConcludeReadError for a read the API answered
// with a wait (Retry-After, or a declared rate-limit reset): the next
// check is no earlier than retryAfter (capped at MaxRetryAfter), which is
// recorded.
func (d Decider) ConcludeReadFailure(i *Intent, caps events.Capabilities, now time.Time, what, code string, retryAfter time.Duration) events.Data {
	e := what + ": " + code
	since := i.ReadFailingSince
	if since.IsZero() {
		since = now
	}
	if now.Sub(since) >= i.Recorded.Policy.ReadFailingBound() {
		ev := d.handoff(i, events.ReasonReadFailing, fmt.Sprintf("external reads have failed since %s", since.UTC().Format(time.RFC3339)), caps)
		ev.Evidence.Errors = append(ev.Evidence.Errors, e)
		if n := len(ev.Evidence.Errors); n > maxReadErrors+1 {
			ev.Evidence.Errors = ev.Evidence.Errors[n-maxReadErrors-1:]
		}
		return ev
	}
	retryAfter = min(max(retryAfter, 0), MaxRetryAfter)
	return &events.CheckDeferredData{Reason: events.DeferReadFailed, Error: e, RetryAfter: events.Duration(retryAfter),
		NextCheckAt: now.Add(max(d.backoff(len(i.ReadErrors)+1), retryAfter))}
}

// Readback is a successful read of the object an intent points at: Found
// false when the API says it does not exist (yet); ProbeStatus is the HTTP
// status of a credential-free GET of its live URL (0: no URL to probe).
type Readback struct {
	Found       bool
	Object      Candidate
	ProbeStatus int
}

// ConcludeReadback checks the object found (or answered) against every
// identity field; all must hold for a receipt.
func (d Decider) ConcludeReadback(i *Intent, caps events.Capabilities, now time.Time, rb Readback) events.Data {
	if !rb.Found {
		return &events.CheckDeferredData{Reason: events.DeferReadbackNotVisible, NextCheckAt: now.Add(d.backoff(i.Checks + 1))}
	}
	o := rb.Object
	liveURL := o.LiveURL
	if liveURL == "" {
		liveURL = i.LiveURL
	}
	required := RequiredChecks(caps)
	ref := Match(i, caps, o)
	var checks []events.Check
	if slices.Contains(required, "url") {
		urlCheck := events.Check{Name: "url", Detail: "no live URL"}
		if liveURL != "" {
			urlCheck.OK = rb.ProbeStatus == 200
			urlCheck.Detail = fmt.Sprintf("HTTP %d", rb.ProbeStatus)
		}
		checks = append(checks, urlCheck)
	}
	checks = append(checks,
		events.Check{Name: "author", OK: !slices.Contains(ref.Mismatch, "author"), Detail: "author_id " + quoteOrNone(o.AuthorID)},
		events.Check{Name: "payload", OK: !slices.Contains(ref.Mismatch, "payload"), Detail: "canon/v1 sha256 of body and assets"},
		events.Check{Name: "parent", OK: !slices.Contains(ref.Mismatch, "parent"), Detail: "parent " + quoteOrNone(o.ParentID)},
	)
	if slices.Contains(required, "visibility") {
		checks = append(checks, events.Check{Name: "visibility", OK: o.Visibility == "public", Detail: "visibility " + quoteOrNone(o.Visibility)})
	}
	if caps.Correlation {
		checks = append(checks, events.Check{Name: "correlation", OK: o.CorrelationID == i.ID, Detail: "marker names " + quoteOrNone(o.CorrelationID)})
	}
	if slices.Contains(ref.Mismatch, "pre_existing") {
		checks = append(checks, events.Check{Name: "created", Detail: "created " + o.CreatedAt.UTC().Format(time.RFC3339) + ", before the first attempt"})
	}
	if c, ok := idCheck(i, o.ExternalID); ok {
		checks = append(checks, c)
	}
	extID := o.ExternalID
	if extID == "" {
		extID = i.ExternalID
	}
	if MarkedOurs(i, caps, o) && (slices.Contains(ref.Mismatch, "payload") || slices.Contains(ref.Mismatch, "parent")) {
		// Our own effect, changed since: the search path's rule.
		ref.ExternalID = extID
		ev := d.handoff(i, events.ReasonWrittenModified,
			"the object carrying this intent's marker differs from the intent (edited after the write, or rewritten by the API): it is this intent's effect and is never written again", caps)
		ev.Evidence.Candidates = []events.CandidateRef{ref}
		ev.Evidence.Checks = checks
		ev.Evidence.Unverified = []string{"whether object " + extID + " as it stands (" + strings.Join(ref.Mismatch, ", ") + " differ) is the intended effect"}
		return ev
	}
	return conclude(i, extID, liveURL, checks, now)
}

// ConcludeStatusReadback verifies, on a status route, that the applied
// change equals the approved one; the applied and current versions are
// recorded apart (a later change by someone else is not re-applied).
func (d Decider) ConcludeStatusReadback(i *Intent, caps events.Capabilities, now time.Time, st StatusObservation) events.Data {
	if !st.Found {
		return &events.CheckDeferredData{Reason: events.DeferReadbackNotVisible, NextCheckAt: now.Add(d.backoff(i.Checks + 1))}
	}
	checks := []events.Check{
		{Name: "status", OK: st.State == StatusCompleted, Detail: "state " + st.State},
		{Name: "payload", OK: st.PayloadSHA256 != "" && st.PayloadSHA256 == i.Recorded.PayloadSHA256, Detail: "the applied change equals the approved change"},
	}
	if st.Account != "" {
		checks = append(checks, events.Check{Name: "account", OK: st.Account == i.Recorded.Account, Detail: "account " + quoteOrNone(st.Account)})
	}
	if caps.Correlation {
		checks = append(checks, events.Check{Name: "correlation", OK: st.CorrelationID == i.ID, Detail: "marker names " + quoteOrNone(st.CorrelationID)})
	}
	if st.AppliedVersion != "" {
		detail := "applied version " + st.AppliedVersion
		if st.Version != "" && st.Version != st.AppliedVersion {
			detail += "; current version " + st.Version + " (changed later by another writer, not re-applied)"
		}
		checks = append(checks, events.Check{Name: "version", OK: true, Detail: detail})
	}
	if c, ok := idCheck(i, st.ExternalID); ok {
		checks = append(checks, c)
	}
	extID := st.ExternalID
	if extID == "" {
		extID = i.ExternalID
	}
	if extID == "" {
		ev := d.handoff(i, events.ReasonNoExternalID, "the status query gives no external id to name the receipt by", caps)
		ev.Evidence.Checks = checks
		return ev
	}
	return conclude(i, extID, st.LiveURL, checks, now)
}

// idCheck is the failed "id" check of a readback whose object names
// another id than the one found (the read answered with another object,
// or the API gives the same object ids of another form): never a receipt
// of this intent (the guard refuses a ReadbackPassed naming another id),
// so a hand-off with the evidence rather than a conclusion refused at
// every check.
func idCheck(i *Intent, read string) (events.Check, bool) {
	if read == "" || i.ExternalID == "" || read == i.ExternalID {
		return events.Check{}, false
	}
	return events.Check{Name: "id", Detail: fmt.Sprintf("read back %s, found %s", quoteOrNone(read), quoteOrNone(i.ExternalID))}, true
}

func conclude(i *Intent, extID, liveURL string, checks []events.Check, now time.Time) events.Data {
	var failed []string
	for _, c := range checks {
		if !c.OK {
			failed = append(failed, c.Name)
		}
	}
	if len(failed) > 0 {
		return &events.ReadbackFailedData{ExternalID: extID, Checks: checks, Failed: failed}
	}
	attempt := ""
	if a := i.LastAttempt(); a != nil {
		attempt = a.ID
	}
	return &events.ReadbackPassedData{Receipt: events.Receipt{
		ExternalID: extID, LiveURL: liveURL, Checks: checks, ReadbackAt: now.UTC(),
		PayloadSHA256: i.Recorded.PayloadSHA256, Source: events.SourceReadback,
		IdempotencyKey: i.Recorded.IdempotencyKey, RequestID: i.Recorded.RequestID, AttemptID: attempt,
	}}
}

func quoteOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", s)
}
