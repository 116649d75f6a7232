package fsm

import (
	"context"
	"fmt"
	"slices"
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
	if k := slices.IndexFunc(i.Attempts, func(a Attempt) bool { return a.Request != nil }); k >= 0 {
		return i.Attempts[k].Request
	}
	return nil
}

// Expired reports whether no write may start at t (ExpiresAt passed).
func (i *Intent) Expired(t time.Time) bool {
	return !i.Recorded.ExpiresAt.IsZero() && !t.Before(i.Recorded.ExpiresAt)
}

// RiskyAttempts reports whether any attempt may have executed.
func (i *Intent) RiskyAttempts() bool { return slices.ContainsFunc(i.Attempts, Attempt.Risky) }

// AnyEffectPossible reports whether any attempt may have executed: it did
// not end in a proven rejection (a cleared attempt still counts: a search
// proves absence in a window, not forever).
func (i *Intent) AnyEffectPossible() bool { return i.WritingAttempts() > 0 }

// retriesAndResends counts the claimed attempts that followed an attempt
// that may have executed (retries) and those that followed a rejection
// (resends, see Policy.ResendBudget).
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

// WritingAttempts counts the attempts that could have written: every one
// that did not end in a proven rejection.
func (i *Intent) WritingAttempts() int {
	n := 0
	for _, a := range i.Attempts {
		if !a.provenNotExecuted() {
			n++
		}
	}
	return n
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
	out := []string{}
	for _, name := range []string{"url", "author", "payload", "parent", "visibility"} {
		if len(c.Checks) == 0 || name == "author" || name == "payload" || name == "parent" || slices.Contains(c.Checks, name) {
			out = append(out, name)
		}
	}
	return out
}

// InsideSkewBefore reports whether an object created at t was created
// before the first attempt started, but inside the clock-skew allowance:
// it may be the attempt's effect (the API's clock behind ours) or an
// object made just before it. A zero t proves nothing.
func (i *Intent) InsideSkewBefore(t time.Time) bool {
	if t.IsZero() || len(i.Attempts) == 0 {
		return false
	}
	return t.Before(i.Attempts[0].StartedAt) && !i.PreExisting(t)
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

// Route and Account are shortcuts into Recorded.
func (i *Intent) Route() string   { return i.Recorded.Route }
func (i *Intent) Account() string { return i.Recorded.Account }

// LastAttempt is the newest attempt or nil.
func (i *Intent) LastAttempt() *Attempt {
	if len(i.Attempts) == 0 {
		return nil
	}
	return &i.Attempts[len(i.Attempts)-1]
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
	var to State
	if !withMachine(i.State, func(m *lfsm.FSM) bool {
		err := m.Event(context.Background(), string(e.Type))
		to = State(m.Current())
		return err == nil
	}) {
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
	if !slices.Contains(i.ConfirmedExternalIDs, r.ExternalID) {
		i.ConfirmedExternalIDs = append(i.ConfirmedExternalIDs, r.ExternalID)
	}
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
