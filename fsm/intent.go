package fsm

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/errors"
	lfsm "github.com/looplab/fsm"

	"github.com/settle-dev/settle/events"
)

// Sentinel errors.
var (
	// ErrIllegalTransition: the event is not allowed in the intent's state.
	ErrIllegalTransition = errors.New("illegal transition")
	// ErrGuard: the transition exists but its guard refuses it (budget,
	// approval, key, attempt order).
	ErrGuard = errors.New("guard refused")
	// ErrBadHistory: versions out of order, mixed intents, empty history.
	ErrBadHistory = errors.New("bad history")
)

// TransitionError names the event, its version and the state it met.
type TransitionError struct {
	Kind    error
	Type    events.Type
	Version uint64
	State   State
	Reason  string
}

func (e *TransitionError) Error() string {
	msg := fmt.Sprintf("%s: %s (version %d) in state %s", e.Kind, e.Type, e.Version, e.State)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

func (e *TransitionError) Unwrap() error { return e.Kind }

// Attempt is one external call of an intent.
type Attempt struct {
	N          int
	ID         string
	StartedAt  time.Time
	Deadline   time.Time
	ClaimOwner string
	// Outcome is the event type that closed the attempt ("" while open).
	Outcome events.Type
	Code    string
	// Cleared: an authoritative search window that covered this attempt
	// closed without our object, proving the attempt made no effect.
	Cleared bool
	// Request is the request the attempt sent, as recorded in its
	// WriteStarted (nil: not recorded).
	Request *events.SentRequest
}

// Risky reports whether the attempt may have executed: it is open, or it
// ended in anything but a proven rejection, and no authoritative search
// has cleared it since.
func (a Attempt) Risky() bool { return !a.provenNotExecuted() && !a.Cleared }

// provenNotExecuted: the attempt ended in a proven rejection. A rejection
// saying the key was already used is not one (an earlier request with the
// key reached the API), whoever recorded it so.
func (a Attempt) provenNotExecuted() bool {
	return a.Outcome == events.WriteRejected && a.Code != events.CodeKeyReused
}

// Claim is a won RetryClaimed whose attempt has not started.
type Claim struct {
	Owner      string
	LeaseUntil time.Time
	Attempt    int
}

// Intent is the fold of one intent's history. It is a value computed from
// the log and nothing else: folding the same events always gives the same
// Intent.
type Intent struct {
	ID      string
	Version uint64
	State   State
	// Recorded is the frozen intent (payload, hash, ids, policy).
	Recorded events.IntentRecordedData
	Attempts []Attempt
	// ExternalID and LiveURL are the last known external object.
	ExternalID string
	LiveURL    string
	Receipt    *events.Receipt
	// NextCheckAt is when the reconciler should look again (unknown,
	// in_progress).
	NextCheckAt time.Time
	// Lease is the reconciling worker and until when it holds the intent.
	LeaseOwner string
	LeaseUntil time.Time
	// Checks counts ReconcileStarted steps; Polls counts TargetProcessing.
	Checks int
	Polls  int
	// ProcessingDeadline is when polling stops (set by the first
	// TargetProcessing).
	ProcessingDeadline time.Time
	Claim              *Claim
	ApprovalFor        string // first_write | retry while awaiting or approved
	ApprovedBy         string
	Released           bool // OperatorReleased since the last attempt
	LastRejection      *events.WriteRejectedData
	ManualReason       events.ManualReason
	ManualOwner        string
	Evidence           *events.Evidence
	PartialEffects     []string
	Failure            string
	AbandonedFrom      State
	// EffectPossible: abandoned while an attempt may have executed.
	EffectPossible bool
	CreatedAt      time.Time
	UpdatedAt      time.Time
	LastType       events.Type
	// ConfirmedExternalIDs lists every external id ever confirmed (audit:
	// at most one distinct).
	ConfirmedExternalIDs []string
	// WriteProven: an attempt is proven to have written (a success
	// response, or an exact match found). Such an intent is confirmed by
	// readback or handed to a human; it is never retried.
	WriteProven bool
	// ReadFailingSince is when the current run of failed external reads
	// began (zero when the last read did not fail); ReadErrors keeps the
	// last few failures' safe codes.
	ReadFailingSince time.Time
	ReadErrors       []string
	// NotFoundBy is the event that proved not_found (SearchWindowElapsed or
	// StatusNotFound) since the last attempt.
	NotFoundBy events.Type
	// RetryNotBefore is when the API allowed the next request after the
	// last rejection (its Retry-After, capped at MaxRetryAfter): no claim
	// or resend before it. Zero when it asked nothing.
	RetryNotBefore time.Time
	// UnknownSince is when the intent's current unsettled episode began:
	// it begins when the intent enters unknown and lasts through
	// reconciliation (reconciling, in_progress, and verifying reached from
	// there) until the intent leaves for any other state (zero then).
	UnknownSince time.Time
}

// maxReadErrors bounds Intent.ReadErrors.
const maxReadErrors = 3

// Caps returns the capabilities frozen into the intent (zero for an intent
// recorded without them: then nothing a capability proves is assumed).
func (i *Intent) Caps() events.Capabilities {
	if i.Recorded.Caps == nil {
		return events.Capabilities{}
	}
	return *i.Recorded.Caps
}

// KeyValidUntil is the last moment at which the idempotency key still
// deduplicates every attempt: the key's retention counted from the first
// WriteStarted (the key's first receipt is no earlier), minus the policy's
// margin and the clock-skew allowance. Zero when the route's key cannot
// prove anything (no key, unknown retention, no attempt yet).
func (i *Intent) KeyValidUntil() time.Time { return i.keyValidUntil(i.Caps()) }

// SentRequest is the request every retry sends: the earliest one an
// attempt recorded (nil when none did).
func (i *Intent) SentRequest() *events.SentRequest {
	for _, a := range i.Attempts {
		if a.Request != nil {
			return a.Request
		}
	}
	return nil
}

// Expired reports whether no write may start at t (ExpiresAt passed).
func (i *Intent) Expired(t time.Time) bool {
	return !i.Recorded.ExpiresAt.IsZero() && !t.Before(i.Recorded.ExpiresAt)
}

// RiskyAttempts reports whether any attempt may have executed.
func (i *Intent) RiskyAttempts() bool {
	for _, a := range i.Attempts {
		if a.Risky() {
			return true
		}
	}
	return false
}

// AnyEffectPossible reports whether any attempt may have executed: it did
// not end in a proven rejection (a cleared attempt still counts: a search
// proves absence in a window, not forever).
func (i *Intent) AnyEffectPossible() bool {
	for _, a := range i.Attempts {
		if !a.provenNotExecuted() {
			return true
		}
	}
	return false
}

// RetriesUsed counts claimed attempts that followed an attempt that may
// have executed; ResendsUsed counts claimed attempts that followed a proven
// rejection (see Policy.ResendBudget).
func (i *Intent) retriesAndResends() (retries, resends int) {
	for k := 1; k < len(i.Attempts); k++ {
		if i.Attempts[k].ClaimOwner == "" {
			continue // an operator release, not a claim
		}
		if i.Attempts[k-1].Outcome == events.WriteRejected {
			resends++
		} else {
			retries++
		}
	}
	return retries, resends
}

// RetriesLeft is how many retries after a possibly executed attempt the
// policy still allows.
func (i *Intent) RetriesLeft() int {
	r, _ := i.retriesAndResends()
	return i.Recorded.Policy.RetryBudget - r
}

// ResendsLeft is how many resends after a proven rejection the policy
// still allows.
func (i *Intent) ResendsLeft() int {
	_, r := i.retriesAndResends()
	return i.Recorded.Policy.ResendBudget - r
}

// RequiredChecks are the readback checks a receipt of this intent must
// hold, all passing: what the route's readback verifies.
func (i *Intent) RequiredChecks() []string { return RequiredChecks(i.Caps()) }

// RequiredChecks are the readback checks a receipt must hold on a route
// with capabilities c: status and payload on a status route; on others the
// identity checks (author, payload, parent) always, and url and visibility
// unless the route declares checks without them (an API whose objects have
// no public page).
func RequiredChecks(c events.Capabilities) []string {
	if c.StatusQuery {
		return []string{"status", "payload"}
	}
	if len(c.Checks) == 0 {
		return []string{"url", "author", "payload", "parent", "visibility"}
	}
	out := []string{}
	for _, name := range []string{"url", "author", "payload", "parent", "visibility"} {
		switch name {
		case "author", "payload", "parent":
			out = append(out, name)
		default:
			for _, d := range c.Checks {
				if d == name {
					out = append(out, name)
				}
			}
		}
	}
	return out
}

// PreExisting reports whether an object created at t cannot be this
// intent's effect: it was created before the first attempt started, by more
// than the clock-skew allowance. A zero t (the API gives no creation time)
// proves nothing.
func (i *Intent) PreExisting(t time.Time) bool {
	if t.IsZero() || len(i.Attempts) == 0 {
		return false
	}
	return t.Before(i.Attempts[0].StartedAt.Add(-i.Recorded.Policy.ClockSkew.D()))
}

// Route, Account, RequestID are shortcuts into Recorded.
func (i *Intent) Route() string     { return i.Recorded.Route }
func (i *Intent) Account() string   { return i.Recorded.Account }
func (i *Intent) RequestID() string { return i.Recorded.RequestID }

// LastAttempt is the newest attempt or nil.
func (i *Intent) LastAttempt() *Attempt {
	if len(i.Attempts) == 0 {
		return nil
	}
	return &i.Attempts[len(i.Attempts)-1]
}

// RetriesUsed is the number of attempts after the first.
func (i *Intent) RetriesUsed() int {
	if len(i.Attempts) == 0 {
		return 0
	}
	return len(i.Attempts) - 1
}

// BudgetLeft is how many more attempts the policy allows after the last:
// ResendsLeft after a proven rejection, else RetriesLeft.
func (i *Intent) BudgetLeft() int {
	if a := i.LastAttempt(); a != nil && a.Outcome == events.WriteRejected {
		return i.ResendsLeft()
	}
	return i.RetriesLeft()
}

// Fold rebuilds an intent from its history. An illegal history is refused
// with a *TransitionError naming the event, its version and the state.
func Fold(history []events.Event) (*Intent, error) {
	if len(history) == 0 {
		return nil, &TransitionError{Kind: ErrBadHistory, Reason: "empty history"}
	}
	i := &Intent{State: None}
	for _, e := range history {
		if err := i.Apply(e); err != nil {
			return nil, err
		}
	}
	return i, nil
}

// Can reports whether event type t is legal in the intent's state (the
// looplab/fsm table; guards are checked by Apply).
func (i *Intent) Can(t events.Type) bool {
	return withMachine(i.State, func(m *lfsm.FSM) bool { return m.Can(string(t)) })
}

// Apply checks that e may follow the intent's history and folds it in. On
// error the intent is unchanged.
func (i *Intent) Apply(e events.Event) error {
	fail := func(kind error, reason string) error {
		return &TransitionError{Kind: kind, Type: e.Type, Version: e.Version, State: i.State, Reason: reason}
	}
	if e.Version != i.Version+1 {
		return fail(ErrBadHistory, fmt.Sprintf("expected version %d", i.Version+1))
	}
	if i.ID != "" && e.IntentID != i.ID {
		return fail(ErrBadHistory, "event of another intent "+e.IntentID)
	}
	if e.Data == nil || e.Data.EventType() != e.Type {
		return fail(ErrBadHistory, "event body does not match its type")
	}
	if _, ok := e.Data.(*events.IntentStartedData); ok {
		return i.applyStarted(e, fail)
	}
	to, ok := withMachine(i.State, func(m *lfsm.FSM) moved {
		if err := m.Event(context.Background(), string(e.Type)); err != nil {
			return moved{}
		}
		return moved{State(m.Current()), true}
	}).unpack()
	if !ok {
		return fail(ErrIllegalTransition, "")
	}
	if err := i.guard(e); err != nil {
		return fail(ErrGuard, err.Error())
	}
	i.fold(e, to)
	return nil
}

// applyStarted folds an IntentStarted as the IntentRecorded and first
// WriteStarted it stands for (events.Split), each through the table and
// its guards, all or nothing. The intent is then at e's version: one
// message, one version. A refusal names the IntentStarted.
func (i *Intent) applyStarted(e events.Event, fail func(error, string) error) error {
	if !i.Can(e.Type) {
		return fail(ErrIllegalTransition, "")
	}
	rec, ws, _ := events.Split(e)
	n := i.Clone()
	for _, part := range []events.Event{rec, ws} {
		if err := n.Apply(part); err != nil {
			var te *TransitionError
			if errors.As(err, &te) {
				return fail(te.Kind, te.Reason)
			}
			return fail(ErrBadHistory, err.Error())
		}
	}
	n.Version, n.LastType = e.Version, e.Type
	*i = *n
	return nil
}

type moved struct {
	to State
	ok bool
}

func (m moved) unpack() (State, bool) { return m.to, m.ok }

// guard checks the conditions that the transition table alone cannot. The
// safety rules live here as well as in the decision function, so that no
// caller can append around them: see safetyGuard.
func (i *Intent) guard(e events.Event) error {
	p := i.Recorded.Policy
	switch d := e.Data.(type) {
	case *events.IntentRecordedData:
		if e.IntentID != events.ScopedIntentID(d.Tenant, d.Route, d.Account, d.RequestID) {
			return errors.New("intent id is not derived from tenant, route, account and request id")
		}
		if d.IdempotencyKey != events.IdempotencyKey(e.IntentID) {
			return errors.New("idempotency key is not derived from the intent")
		}
	case *events.WriteStartedData:
		n := len(i.Attempts) + 1
		if d.Attempt != n {
			return errors.Errorf("attempt %d, expected %d", d.Attempt, n)
		}
		if e.AttemptID != events.AttemptID(i.ID, n) {
			return errors.Errorf("attempt id %q, expected %q", e.AttemptID, events.AttemptID(i.ID, n))
		}
		if d.IdempotencyKey != i.Recorded.IdempotencyKey {
			return errors.New("every attempt must carry the intent's idempotency key")
		}
		if first := i.SentRequest(); first != nil && d.Request != nil && !d.Request.Equal(first) {
			return errors.New("a retry sends the request its first attempt recorded, not another")
		}
		switch i.State {
		case Recorded:
			if n > 1 && !i.Released {
				return errors.New("a retry needs a won claim or an operator release")
			}
			if n == 1 && p.FirstWrite == events.PolicyApproval {
				return errors.New("the route requires approval before the first write")
			}
		case ApprovedState:
			if n > 1 {
				return errors.New("an approved retry still needs a won claim")
			}
		case RetryClaimed:
			if i.Claim == nil || i.Claim.Attempt != n {
				return errors.New("the claim is for another attempt")
			}
			if d.ClaimOwner != i.Claim.Owner {
				return errors.Errorf("claim belongs to %q", i.Claim.Owner)
			}
			if !e.At.Before(i.Claim.LeaseUntil) {
				return errors.New("the claim's lease expired")
			}
		}
	case *events.WriteSucceededData, *events.WriteConfirmedData, *events.WriteRejectedData, *events.OutcomeUnknownData:
		if a := i.LastAttempt(); a == nil || e.AttemptID != a.ID {
			return errors.New("outcome must name the open attempt")
		}
	case *events.CandidateFoundData:
		if d.Account != "" && d.Account != i.Recorded.Account {
			return errors.New("the candidate belongs to another account: it cannot be this intent's effect")
		}
	case *events.RetryClaimedData:
		n := len(i.Attempts) + 1
		if d.Attempt != n {
			return errors.Errorf("claim for attempt %d, expected %d", d.Attempt, n)
		}
		if p.Retry == events.PolicyNever {
			return errors.New("route policy never retries")
		}
		if p.Retry == events.PolicyApproval && i.State != ApprovedState {
			return errors.New("route policy requires approval before a retry")
		}
		if i.State == Rejected && (i.LastRejection == nil || !i.LastRejection.Retryable) {
			return errors.New("the rejection is not retryable")
		}
		if !e.At.Before(d.LeaseUntil) {
			return errors.New("lease ends before it starts")
		}
	case *events.ClaimExpiredData:
		if i.Claim == nil {
			return errors.New("no claim to expire")
		}
		if e.At.Before(i.Claim.LeaseUntil) {
			return errors.New("the claim's lease has not expired")
		}
	case *events.ReadbackPassedData:
		if d.Receipt.PayloadSHA256 != i.Recorded.PayloadSHA256 {
			return errors.New("receipt payload digest differs from the intent's")
		}
		for _, c := range d.Receipt.Checks {
			if !c.OK {
				return errors.Errorf("check %s failed", c.Name)
			}
		}
	}
	return i.safetyGuard(e)
}

// safetyGuard holds the safety rules, judged by the capabilities frozen
// into the intent. Each is also what the decision function decides, so a
// refusal here means a caller tried to append around it.
func (i *Intent) safetyGuard(e events.Event) error {
	switch d := e.Data.(type) {
	case *events.WriteStartedData:
		if i.Expired(e.At) {
			return errors.New("the intent expired: no write may start after expires_at")
		}
	case *events.RetryClaimedData:
		if i.WriteProven {
			return errors.New("an attempt was proven written: the intent can only be confirmed or handed off, never retried")
		}
		if e.At.Before(i.RetryNotBefore) {
			return errors.Errorf("the API asked for no request before %s (Retry-After)", i.RetryNotBefore.UTC().Format(time.RFC3339))
		}
		if i.Expired(e.At) {
			return errors.New("the intent expired: no retry after expires_at")
		}
		if !i.Recorded.ExpiresAt.IsZero() && d.LeaseUntil.After(i.Recorded.ExpiresAt) {
			return errors.New("the claim's lease outlives expires_at")
		}
		last := i.LastAttempt()
		if last != nil && last.Outcome == events.WriteRejected {
			if i.ResendsLeft() <= 0 {
				return errors.New("resend budget spent")
			}
		} else if i.RetriesLeft() <= 0 {
			return errors.New("retry budget spent")
		}
		if i.RiskyAttempts() {
			kv := i.KeyValidUntil()
			if kv.IsZero() {
				return errors.New("a retry needs a dedup proof: an attempt may have executed, no authoritative search cleared it and the route has no key with a known retention")
			}
			if d.LeaseUntil.After(kv) {
				return errors.New("a retry needs a dedup proof: the claim's lease outlives the idempotency key's retention")
			}
			if d.LeaseUntil.After(ClaimBy(i, kv)) {
				return errors.New("a retry needs a dedup proof: the claim's lease plus the attempt deadline and the clock-skew allowance outlive the idempotency key's retention (the attempt could reach the API after the key expired)")
			}
		}
	case *events.SearchWindowElapsedData, *events.StatusNotFoundData:
		if i.WriteProven {
			return errors.New("an attempt was proven written: it is never not_found")
		}
	case *events.CandidateFoundData:
		marked := i.Caps().Correlation && d.CorrelationID == i.ID
		if i.PreExisting(d.CreatedAt) && !marked {
			return errors.New("the candidate was created before the intent's first attempt: it cannot be our effect")
		}
		if i.Caps().Correlation && d.Source != events.SourceResponse && d.CorrelationID != i.ID {
			return errors.New("the candidate's correlation marker does not name this intent")
		}
	case *events.ReadbackPassedData:
		have := map[string]bool{}
		for _, c := range d.Receipt.Checks {
			have[c.Name] = c.OK
		}
		for _, name := range i.RequiredChecks() {
			if !have[name] {
				return errors.Errorf("the receipt lacks the %s check the route's readback requires", name)
			}
		}
		if i.ExternalID != "" && d.Receipt.ExternalID != i.ExternalID {
			return errors.Errorf("the receipt names %q, the object found was %q", d.Receipt.ExternalID, i.ExternalID)
		}
	}
	return nil
}

// fold applies e, already checked, moving to state to.
func (i *Intent) fold(e events.Event, to State) {
	from := i.State
	i.Version = e.Version
	i.State = to
	i.UpdatedAt = e.At
	i.LastType = e.Type
	switch to {
	case Unknown, Reconciling, InProgress:
		if i.UnknownSince.IsZero() {
			i.UnknownSince = e.At
		}
	case Verifying:
	default:
		i.UnknownSince = time.Time{}
	}
	if to != Unknown && to != InProgress {
		i.NextCheckAt = time.Time{}
	}
	if from == Reconciling {
		i.LeaseOwner, i.LeaseUntil = "", time.Time{}
	}
	// A run of failed reads ends with the first read that succeeded;
	// steps that read nothing (a worker taking the intent, a lease expiry,
	// handing a known external id to readback) neither end nor extend it.
	switch d := e.Data.(type) {
	case *events.ReconcileStartedData:
	case *events.CandidateFoundData:
		if d.Source != events.SourceResponse {
			i.ReadFailingSince, i.ReadErrors = time.Time{}, nil
		}
	case *events.CheckDeferredData:
		if d.Reason == events.DeferLeaseExpired {
			break
		}
		if d.Reason == events.DeferReadFailed {
			if i.ReadFailingSince.IsZero() {
				i.ReadFailingSince = e.At
			}
			i.ReadErrors = append(i.ReadErrors, d.Error)
			if len(i.ReadErrors) > maxReadErrors {
				i.ReadErrors = i.ReadErrors[len(i.ReadErrors)-maxReadErrors:]
			}
			break
		}
		i.ReadFailingSince, i.ReadErrors = time.Time{}, nil
	default:
		i.ReadFailingSince, i.ReadErrors = time.Time{}, nil
	}
	switch d := e.Data.(type) {
	case *events.IntentRecordedData:
		i.ID = e.IntentID
		i.Recorded = *d
		i.CreatedAt = e.At
	case *events.ApprovalRequiredData:
		i.ApprovalFor = d.For
		i.ApprovedBy = ""
	case *events.ApprovedData:
		i.ApprovedBy = d.Operator
	case *events.WriteStartedData:
		i.Attempts = append(i.Attempts, Attempt{N: d.Attempt, ID: e.AttemptID, StartedAt: e.At, Deadline: d.Deadline, ClaimOwner: d.ClaimOwner, Request: d.Request})
		i.Claim = nil
		i.Released = false
		i.ApprovalFor = ""
		i.NotFoundBy = ""
		i.RetryNotBefore = time.Time{}
	case *events.WriteSucceededData:
		i.closeAttempt(e.Type, "")
		i.ExternalID, i.LiveURL = d.ExternalID, d.LiveURL
		i.WriteProven = true
	case *events.WriteConfirmedData:
		i.closeAttempt(e.Type, "")
		i.confirm(d.Receipt)
		i.WriteProven = true
	case *events.WriteRejectedData:
		i.closeAttempt(e.Type, d.Code)
		i.LastRejection = d
		if d.RetryAfter > 0 {
			i.RetryNotBefore = e.At.Add(min(d.RetryAfter.D(), MaxRetryAfter))
		}
	case *events.OutcomeUnknownData:
		i.closeAttempt(e.Type, d.Code)
	case *events.ReconcileStartedData:
		i.Checks++
		i.LeaseOwner, i.LeaseUntil = d.Worker, d.LeaseUntil
	case *events.CheckDeferredData:
		i.NextCheckAt = d.NextCheckAt
	case *events.CandidateFoundData:
		i.ExternalID, i.LiveURL = d.ExternalID, d.LiveURL
		i.WriteProven = true
	case *events.ReadbackPassedData:
		i.confirm(d.Receipt)
	case *events.ReadbackFailedData:
		i.ManualReason = events.ReasonReadbackFailed
		i.Evidence = &events.Evidence{Checks: d.Checks, Unverified: d.Failed}
	case *events.TargetProcessingData:
		i.Polls++
		i.NextCheckAt = d.NextCheckAt
		if i.ProcessingDeadline.IsZero() {
			i.ProcessingDeadline = d.Deadline
		}
	case *events.SearchWindowElapsedData:
		i.NotFoundBy = e.Type
		if i.Caps().SearchAuthoritative {
			// The window covered every attempt so far (Window spans them
			// all): none of them made an effect.
			for k := range i.Attempts {
				i.Attempts[k].Cleared = true
			}
		}
	case *events.StatusNotFoundData:
		i.NotFoundBy = e.Type
	case *events.TargetFailedData:
		i.Failure = d.Code
		i.PartialEffects = d.PartialEffects
	case *events.RetryClaimedData:
		i.Claim = &Claim{Owner: d.Owner, LeaseUntil: d.LeaseUntil, Attempt: d.Attempt}
	case *events.ClaimExpiredData:
		i.Claim = nil
		i.NextCheckAt = e.At
	case *events.ManualActionRequiredData:
		i.ManualReason = d.Reason
		i.ManualOwner = d.Owner
		ev := d.Evidence
		i.Evidence = &ev
		i.Claim = nil
	case *events.OperatorConfirmedData:
		i.confirm(d.Receipt)
	case *events.OperatorReleasedData:
		i.Released = true
		i.ManualReason, i.ManualOwner, i.Evidence = "", "", nil
	case *events.AbandonedData:
		i.AbandonedFrom = from
		i.EffectPossible = d.EffectPossible
	}
}

func (i *Intent) closeAttempt(t events.Type, code string) {
	if a := i.LastAttempt(); a != nil {
		a.Outcome, a.Code = t, code
	}
}

func (i *Intent) confirm(r events.Receipt) {
	rc := r
	i.Receipt = &rc
	i.ExternalID = r.ExternalID
	if r.LiveURL != "" {
		i.LiveURL = r.LiveURL
	}
	for _, id := range i.ConfirmedExternalIDs {
		if id == r.ExternalID {
			return
		}
	}
	i.ConfirmedExternalIDs = append(i.ConfirmedExternalIDs, r.ExternalID)
}

// Clone returns a deep-enough copy for speculative Apply.
func (i *Intent) Clone() *Intent {
	c := *i
	c.Attempts = append([]Attempt(nil), i.Attempts...)
	c.ConfirmedExternalIDs = append([]string(nil), i.ConfirmedExternalIDs...)
	c.ReadErrors = append([]string(nil), i.ReadErrors...)
	if i.Claim != nil {
		cl := *i.Claim
		c.Claim = &cl
	}
	return &c
}

// Fold codes: the stable name of why a history does not fold (an event
// the table or a guard refuses, or versions out of order). The
// projector's quarantine and the audit's report use these (defined here
// once).
const (
	CodeIllegalTransition = "illegal_transition"
	CodeGuardRefused      = "guard_refused"
	CodeBadHistory        = "bad_history"
)

// FoldCode is the fold code of an error returned by Fold or Apply.
func FoldCode(err error) string {
	switch {
	case errors.Is(err, ErrIllegalTransition):
		return CodeIllegalTransition
	case errors.Is(err, ErrGuard):
		return CodeGuardRefused
	default:
		return CodeBadHistory
	}
}
