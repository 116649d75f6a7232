package producer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
)

// Sentinel errors of Execute.
var (
	// ErrPayloadMismatch: the request id is already recorded with another
	// payload (or account, or parent). Nothing was written.
	ErrPayloadMismatch = errors.New("payload mismatch: request id already recorded with a different payload")
	// ErrUnknownRoute: no such route is configured.
	ErrUnknownRoute = errors.New("unknown route")
	// ErrInvalidRequest: a request field is missing or malformed (the error
	// wraps an *events.FieldError naming it).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrOutcomeNotRecorded: the external call happened but its outcome
	// could not be appended; the intent stays write_started until its
	// deadline turns it unknown and reconciliation settles it.
	ErrOutcomeNotRecorded = errors.New("outcome not recorded")
)

// Route is a configured external operation.
type Route struct {
	Name    string
	Adapter adapter.Adapter
	Policy  events.Policy
}

// DefaultPolicy is a sane route policy: automatic first write, one retry
// after a proven not_found, 1 minute attempt deadline, search window
// planned_at −5m … +30m.
func DefaultPolicy() events.Policy {
	return events.Policy{
		FirstWrite:      events.PolicyAuto,
		Retry:           events.PolicyAuto,
		RetryBudget:     1,
		AttemptDeadline: events.Duration(time.Minute),
		SearchBefore:    events.Duration(5 * time.Minute),
		SearchAfter:     events.Duration(30 * time.Minute),
		ClockSkew:       events.Duration(5 * time.Second),
	}
}

// Config configures a Producer.
type Config struct {
	// Tenant is the default tenant for requests that name none.
	Tenant string
	// Actor names this process on every event it appends.
	Actor string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OutcomeTimeout bounds recording an outcome after the call, even when
	// the caller's context is cancelled (default 30s).
	OutcomeTimeout time.Duration
	// OnCall, if set, is told of every external write attempt and its
	// classified outcome (for metrics). It must not block.
	OnCall func(route string, outcome events.Type)
}

// DefaultConfig returns a config with tenant "default".
func DefaultConfig() Config {
	return Config{Tenant: "default", Actor: "settle", Now: time.Now, OutcomeTimeout: 30 * time.Second}
}

// Validate checks the config.
func (c Config) Validate() error {
	if err := events.ValidateToken("producer config: Tenant", c.Tenant); err != nil {
		return err
	}
	if c.Actor == "" {
		return errors.New("producer config: Actor: is required")
	}
	if c.Now == nil {
		return errors.New("producer config: Now: is required")
	}
	if c.OutcomeTimeout <= 0 {
		return errors.New("producer config: OutcomeTimeout: must be positive")
	}
	return nil
}

// Producer records intents and makes their writes: intent first, then
// WriteStarted (acknowledged), then the call, then the classified outcome.
type Producer struct {
	store  *Store
	cfg    Config
	routes map[string]Route
}

// New returns a producer over store with the given routes.
func New(store *Store, cfg Config, routes ...Route) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Producer{store: store, cfg: cfg, routes: map[string]Route{}}
	for _, r := range routes {
		if err := events.ValidateToken("route.name", r.Name); err != nil {
			return nil, err
		}
		if r.Adapter == nil {
			return nil, fmt.Errorf("route %s: adapter: is required", r.Name)
		}
		if err := r.Policy.Validate("route " + r.Name + ": policy."); err != nil {
			return nil, err
		}
		if _, dup := p.routes[r.Name]; dup {
			return nil, fmt.Errorf("route %s: defined twice", r.Name)
		}
		p.routes[r.Name] = r
	}
	return p, nil
}

// Store returns the event store.
func (p *Producer) Store() *Store { return p.store }

// Route returns a configured route.
func (p *Producer) Route(name string) (Route, bool) { r, ok := p.routes[name]; return r, ok }

// Request is a caller's decision to make one external write.
type Request struct {
	Tenant           string
	Route            string
	Account          string
	RequestID        string
	ParentExternalID string
	Payload          json.RawMessage
	// PlannedAt anchors the search window (default: now).
	PlannedAt time.Time
	// ExpiresAt: no write (first or retry) after it. Zero: never expires.
	ExpiresAt time.Time
	// DryRun does everything but append and write, and reports.
	DryRun bool
}

// Result is what Execute knows after it returns.
type Result struct {
	IntentID string
	Route    string
	State    fsm.State
	Intent   *fsm.Intent
	History  []events.Event
	// Replayed: the request id was already recorded with the same payload;
	// the stored state is returned and nothing new was written.
	Replayed bool
	// DryRun is set for dry runs.
	DryRun *DryRunReport
}

// DryRunReport says what Execute would do.
type DryRunReport struct {
	IntentID         string
	Subject          string
	IdempotencyKey   string
	PayloadSHA256    string
	CanonicalPayload json.RawMessage
	ExistingState    fsm.State // "" when the intent is new
	WouldAppend      []events.Type
	WouldWrite       bool
	Reason           string
}

// prepared is a validated request with its frozen intent.
type prepared struct {
	route    Route
	intentID string
	// legacyID is the intent's "intent/v1" id (without the account),
	// under which an intent recorded before ScopedIntentID may exist.
	legacyID string
	rec      events.IntentRecordedData
}

func (p *Producer) prepare(req Request) (*prepared, error) {
	if req.Tenant == "" {
		req.Tenant = p.cfg.Tenant
	}
	invalid := func(err error) error { return fmt.Errorf("%w: %w", ErrInvalidRequest, err) }
	if err := events.ValidateToken("tenant", req.Tenant); err != nil {
		return nil, invalid(err)
	}
	if err := events.ValidateToken("route", req.Route); err != nil {
		return nil, invalid(err)
	}
	route, ok := p.routes[req.Route]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownRoute, req.Route)
	}
	if err := events.ValidateFreeform("account", req.Account); err != nil {
		return nil, invalid(err)
	}
	if err := events.ValidateFreeform("request_id", req.RequestID); err != nil {
		return nil, invalid(err)
	}
	if req.ParentExternalID != "" {
		if err := events.ValidateFreeform("parent_external_id", req.ParentExternalID); err != nil {
			return nil, invalid(err)
		}
	}
	if len(req.Payload) == 0 {
		return nil, invalid(&events.FieldError{Field: "payload", Reason: "is required"})
	}
	var canon json.RawMessage
	var err error
	if n, ok := route.Adapter.(adapter.PayloadNormalizer); ok {
		canon, err = n.NormalizePayload(req.Payload)
	} else {
		canon, err = events.Canonicalize(req.Payload)
	}
	if err != nil {
		return nil, invalid(&events.FieldError{Field: "payload", Reason: err.Error()})
	}
	sum, err := events.PayloadSHA256(canon)
	if err != nil {
		return nil, invalid(&events.FieldError{Field: "payload", Reason: err.Error()})
	}
	now := p.cfg.Now().UTC()
	planned := req.PlannedAt
	if planned.IsZero() {
		planned = now
	}
	id := events.ScopedIntentID(req.Tenant, req.Route, req.Account, req.RequestID)
	return &prepared{route: route, intentID: id, legacyID: events.IntentID(req.Tenant, req.Route, req.RequestID), rec: events.IntentRecordedData{
		Tenant: req.Tenant, Route: req.Route, Account: req.Account, RequestID: req.RequestID,
		IdempotencyKey: events.IdempotencyKey(id), ParentExternalID: req.ParentExternalID,
		Payload: canon, PayloadSHA256: sum, Canon: events.CanonV1,
		PlannedAt: planned.UTC(), ExpiresAt: req.ExpiresAt.UTC(), Policy: route.Policy,
	}}, nil
}

// sameRequest compares the identity of a stored intent with a new request.
func sameRequest(stored events.IntentRecordedData, rec events.IntentRecordedData) error {
	switch {
	case stored.PayloadSHA256 != rec.PayloadSHA256:
		return fmt.Errorf("%w: payload_sha256 is %s, the request has %s", ErrPayloadMismatch, stored.PayloadSHA256[:12], rec.PayloadSHA256[:12])
	case stored.Account != rec.Account:
		return fmt.Errorf("%w: account differs", ErrPayloadMismatch)
	case stored.ParentExternalID != rec.ParentExternalID:
		return fmt.Errorf("%w: parent_external_id differs", ErrPayloadMismatch)
	}
	return nil
}

// Execute records the intent and makes its write, at most once per
// request id:
//
//  1. IntentRecorded (payload frozen, hash, keys, policy) with CAS "subject
//     empty". The same request id with the same payload returns the stored
//     state without writing; with a different payload ErrPayloadMismatch.
//  2. WriteStarted, acknowledged, before the adapter is called. Only the
//     party whose WriteStarted wins the CAS calls the adapter.
//  3. The call, then the classified outcome: WriteConfirmed/WriteSucceeded,
//     WriteRejected (proven not executed), or OutcomeUnknown.
//
// An intent found in recorded (its writer died before WriteStarted) is
// started by Execute. A retryable rejection is retried through a
// RetryClaimed when the budget and policy allow.
func (p *Producer) Execute(ctx context.Context, req Request) (*Result, error) {
	pr, err := p.prepare(req)
	if err != nil {
		return nil, err
	}
	recordedNow := false
	for round := 0; round < 5; round++ {
		h, err := p.loadPrepared(ctx, pr)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("execute: %w", err)
		}
		if req.DryRun {
			return p.dryRun(pr, h)
		}
		if h == nil {
			h, err = p.record(ctx, pr)
			if errors.Is(err, ErrConflict) {
				continue // someone recorded it concurrently: compare with theirs
			}
			if err != nil {
				return nil, err
			}
			recordedNow = true
		}
		intent, err := h.Fold()
		if err != nil {
			return nil, fmt.Errorf("execute: %w", err)
		}
		if err := sameRequest(intent.Recorded, pr.rec); err != nil {
			return nil, err
		}
		res, err := p.advance(ctx, pr.route, h, intent, recordedNow)
		if errors.Is(err, ErrConflict) {
			continue // another party moved the intent: reload
		}
		return res, err
	}
	return nil, fmt.Errorf("execute %s: %w: too much contention", pr.intentID, ErrConflict)
}

func (p *Producer) record(ctx context.Context, pr *prepared) (*History, error) {
	rec := pr.rec
	e := events.New(pr.intentID, 1, p.cfg.Now(), p.cfg.Actor, "", &rec)
	seq, err := p.store.Append(ctx, rec.Route, e, 0)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	return &History{Route: rec.Route, Events: []events.Event{e}, LastSeq: seq}, nil
}

// advance moves a loaded intent as far as Execute may.
func (p *Producer) advance(ctx context.Context, route Route, h *History, intent *fsm.Intent, recordedNow bool) (*Result, error) {
	switch intent.State {
	case fsm.Recorded:
		if intent.Recorded.Policy.FirstWrite == events.PolicyApproval && len(intent.Attempts) == 0 {
			if err := p.appendTo(ctx, h, intent, "", &events.ApprovalRequiredData{For: "first_write", Reason: "route policy requires approval before the first write"}); err != nil {
				return nil, err
			}
			return p.result(h, intent, false), nil
		}
		if err := p.checkNotExpired(ctx, h, intent); err != nil {
			return p.result(h, intent, false), err
		}
		return p.write(ctx, route, h, intent, "")
	case fsm.ApprovedState:
		if len(intent.Attempts) == 0 {
			return p.write(ctx, route, h, intent, "")
		}
	case fsm.Rejected:
		if intent.LastRejection != nil && intent.LastRejection.Retryable && intent.BudgetLeft() > 0 && intent.Recorded.Policy.Retry == events.PolicyAuto {
			now := p.cfg.Now()
			if err := p.appendTo(ctx, h, intent, "", &events.RetryClaimedData{Owner: p.cfg.Actor, LeaseUntil: now.Add(intent.Recorded.Policy.AttemptDeadline.D()),
				Attempt: len(intent.Attempts) + 1, BudgetLeft: intent.BudgetLeft() - 1}); err != nil {
				return nil, err
			}
			return p.write(ctx, route, h, intent, p.cfg.Actor)
		}
	case fsm.RetryClaimed:
		if intent.Claim != nil && intent.Claim.Owner == p.cfg.Actor && p.cfg.Now().Before(intent.Claim.LeaseUntil) {
			return p.write(ctx, route, h, intent, p.cfg.Actor)
		}
	}
	return p.result(h, intent, !recordedNow), nil
}

func (p *Producer) checkNotExpired(ctx context.Context, h *History, intent *fsm.Intent) error {
	exp := intent.Recorded.ExpiresAt
	if exp.IsZero() || p.cfg.Now().Before(exp) {
		return nil
	}
	return p.appendTo(ctx, h, intent, "", &events.AbandonedData{By: p.cfg.Actor, Reason: "intent expired before its write started"})
}

// write appends WriteStarted, calls the adapter, appends the outcome.
func (p *Producer) write(ctx context.Context, route Route, h *History, intent *fsm.Intent, claimOwner string) (*Result, error) {
	n := len(intent.Attempts) + 1
	attemptID := events.AttemptID(intent.ID, n)
	now := p.cfg.Now()
	deadline := now.Add(intent.Recorded.Policy.AttemptDeadline.D())
	started := &events.WriteStartedData{Attempt: n, IdempotencyKey: intent.Recorded.IdempotencyKey, Deadline: deadline, ClaimOwner: claimOwner}
	if err := p.appendTo(ctx, h, intent, attemptID, started); err != nil {
		return nil, err
	}
	// WriteStarted is acknowledged: only now may the request leave. The
	// call's own timeout is real time (the injected clock may be a test's).
	callCtx, cancel := context.WithTimeout(ctx, intent.Recorded.Policy.AttemptDeadline.D())
	res, callErr := route.Adapter.Write(callCtx, adapter.WriteRequest{
		IntentID: intent.ID, AttemptID: attemptID, RequestID: intent.Recorded.RequestID,
		IdempotencyKey: intent.Recorded.IdempotencyKey, Account: intent.Recorded.Account,
		ParentExternalID: intent.Recorded.ParentExternalID, Payload: intent.Recorded.Payload,
	})
	cancel()
	outcome := Classify(intent, attemptID, res, callErr)
	if p.cfg.OnCall != nil {
		p.cfg.OnCall(route.Name, outcome.EventType())
	}
	// Record the outcome even if the caller gave up: the call happened.
	octx, ocancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.OutcomeTimeout)
	defer ocancel()
	if err := p.appendTo(octx, h, intent, attemptID, outcome); err != nil {
		return p.result(h, intent, false), fmt.Errorf("%w: %s: %w", ErrOutcomeNotRecorded, attemptID, err)
	}
	return p.result(h, intent, false), nil
}

// Classify maps one attempt's result to its outcome event body.
func Classify(intent *fsm.Intent, attemptID string, res adapter.WriteResult, err error) events.Data {
	if err == nil {
		if intent.Recorded.Policy.TrustResponse {
			return &events.WriteConfirmedData{StatusCode: res.StatusCode, Receipt: events.Receipt{
				ExternalID: res.ExternalID, LiveURL: res.LiveURL, PayloadSHA256: intent.Recorded.PayloadSHA256,
				Source: "response", IdempotencyKey: intent.Recorded.IdempotencyKey, RequestID: intent.Recorded.RequestID, AttemptID: attemptID,
			}}
		}
		return &events.WriteSucceededData{ExternalID: res.ExternalID, LiveURL: res.LiveURL, StatusCode: res.StatusCode}
	}
	var ce *adapter.CallError
	if errors.As(err, &ce) {
		switch ce.Class {
		case adapter.NotSent:
			return &events.WriteRejectedData{Code: ce.Code, Message: ce.Message, Retryable: true}
		case adapter.Rejected:
			return &events.WriteRejectedData{Code: ce.Code, Message: ce.Message, StatusCode: ce.StatusCode, Retryable: ce.Retryable}
		default:
			return &events.OutcomeUnknownData{Code: ce.Code, Message: ce.Message, StatusCode: ce.StatusCode}
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &events.OutcomeUnknownData{Code: "cancelled_after_send", Message: "the call was cancelled; the request may have been sent"}
	}
	// An adapter error we cannot classify proves nothing: unknown.
	return &events.OutcomeUnknownData{Code: "unclassified", Message: "the adapter failed without a classified error"}
}

// appendTo appends the next event to h and folds it into intent.
func (p *Producer) appendTo(ctx context.Context, h *History, intent *fsm.Intent, attemptID string, d events.Data) error {
	return p.store.AppendNext(ctx, h, intent, p.cfg.Actor, p.cfg.Now(), attemptID, d)
}

func (p *Producer) result(h *History, intent *fsm.Intent, replayed bool) *Result {
	return &Result{IntentID: intent.ID, Route: h.Route, State: intent.State, Intent: intent, History: h.Events, Replayed: replayed}
}

func (p *Producer) dryRun(pr *prepared, h *History) (*Result, error) {
	rep := &DryRunReport{IntentID: pr.intentID, Subject: events.Subject(pr.rec.Route, pr.intentID),
		IdempotencyKey: pr.rec.IdempotencyKey, PayloadSHA256: pr.rec.PayloadSHA256, CanonicalPayload: pr.rec.Payload}
	res := &Result{IntentID: pr.intentID, Route: pr.rec.Route, DryRun: rep}
	if h == nil {
		rep.WouldAppend = []events.Type{events.IntentRecorded}
		if pr.rec.Policy.FirstWrite == events.PolicyApproval {
			rep.WouldAppend = append(rep.WouldAppend, events.ApprovalRequired)
			rep.Reason = "the route requires approval before the first write"
		} else {
			rep.WouldAppend = append(rep.WouldAppend, events.WriteStarted, "<outcome>")
			rep.WouldWrite = true
			rep.Reason = "new intent: record, start, write"
		}
		return res, nil
	}
	intent, err := h.Fold()
	if err != nil {
		return nil, err
	}
	res.Intent, res.State, res.History = intent, intent.State, h.Events
	rep.ExistingState = intent.State
	// An intent recorded under its v1 id (see load) is reported as is.
	rep.IntentID, res.IntentID, rep.Subject = intent.ID, intent.ID, events.Subject(pr.rec.Route, intent.ID)
	rep.IdempotencyKey = intent.Recorded.IdempotencyKey
	if err := sameRequest(intent.Recorded, pr.rec); err != nil {
		return nil, err
	}
	if intent.State == fsm.Recorded {
		rep.WouldAppend = []events.Type{events.WriteStarted, "<outcome>"}
		rep.WouldWrite = true
		rep.Reason = "recorded but never started: start and write"
	} else {
		rep.Reason = "already recorded: the stored state is returned, nothing is written"
	}
	return res, nil
}

// WriteAttempt makes the next attempt of a loaded intent: the first write
// of a recorded (or approved) intent, or the retry under a claim that this
// producer's Actor owns. It appends WriteStarted (CAS), calls the adapter
// and appends the outcome, like Execute.
func (p *Producer) WriteAttempt(ctx context.Context, h *History, intent *fsm.Intent) (*Result, error) {
	route, ok := p.routes[intent.Route()]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownRoute, intent.Route())
	}
	owner := ""
	if intent.State == fsm.RetryClaimed {
		owner = p.cfg.Actor
	}
	return p.write(ctx, route, h, intent, owner)
}
