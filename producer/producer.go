package producer

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/internal/errkind"
	"github.com/settle-dev/settle/internal/telemetry"
	"github.com/settle-dev/settle/ledger"
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
	// could not be appended (the log refused it, or another worker moved
	// the intent meanwhile: then the error also matches
	// ledger.ErrConflict); the intent stays write_started until its
	// deadline turns it unknown, if no one recorded an outcome, and
	// reconciliation settles it. Execute returns it with the result and
	// never drives such an intent again.
	ErrOutcomeNotRecorded = errors.New("outcome not recorded")
	// ErrPayloadTooLarge: the payload, frozen into its IntentRecorded event,
	// would exceed the decoder's limit (events.MaxPayloadSize). Nothing was
	// recorded or written.
	ErrPayloadTooLarge = errors.New("payload too large")
)

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
	OnCall CallObserver
	// ClaimLease bounds a retry claim this producer takes (default 30s).
	ClaimLease time.Duration
	// Hold names intents that lost events in an accepted log loss: no
	// write is made for them (hold.go).
	Hold map[string]string
	// Logger receives a WARN for every write whose outcome could not be
	// recorded, naming the intent (nil: slog.Default()).
	Logger *slog.Logger
}

// DefaultConfig returns a config with tenant "default".
func DefaultConfig() Config {
	return Config{Tenant: "default", Actor: "settle", Now: time.Now, OutcomeTimeout: 30 * time.Second, ClaimLease: 30 * time.Second}
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
	if c.ClaimLease < 0 {
		return errors.New("producer config: ClaimLease: must not be negative")
	}
	return nil
}

// Producer records intents and makes their writes: intent first, then
// WriteStarted (acknowledged), then the call, then the classified outcome.
// What to do next is always fsm.Decider's decision; the producer takes the
// steps of the write path.
type Producer struct {
	store  Store
	cfg    Config
	dec    fsm.Decider
	routes map[string]adapter.Route
	w      *Writer // write.go
}

// Store is the log a Producer records on and reads: a *ledger.Store, or a
// wrapper of one.
type Store interface {
	Log
	AppendEvents(ctx context.Context, route string, evs []events.Event, expectedLastSeq uint64) ([]uint64, error)
	LoadByID(ctx context.Context, intentID string) (*ledger.History, error)
	LoadIfAny(ctx context.Context, route, intentID string) (*ledger.History, error)
}

var _ Store = (*ledger.Store)(nil)

// New returns a producer over store with the given routes.
func New(store Store, cfg Config, routes ...adapter.Route) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dec := fsm.DefaultDecider(cfg.Actor)
	dec.RecordedGrace = 0 // the writer starts what it records at once
	if cfg.ClaimLease > 0 {
		dec.Lease = cfg.ClaimLease
	}
	w, err := NewWriter(store, WriterConfig{Actor: cfg.Actor, Now: cfg.Now, OutcomeTimeout: cfg.OutcomeTimeout, OnCall: cfg.OnCall, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	p := &Producer{store: store, cfg: cfg, dec: dec, routes: map[string]adapter.Route{}, w: w}
	for _, r := range routes {
		if err := adapter.ValidateRoute(r); err != nil {
			return nil, err
		}
		if _, dup := p.routes[r.Name]; dup {
			return nil, errors.Errorf("route %s: defined twice", r.Name)
		}
		p.routes[r.Name] = r
	}
	return p, nil
}

// Route returns a configured route.
func (p *Producer) Route(name string) (adapter.Route, bool) { r, ok := p.routes[name]; return r, ok }

// RouteNames lists the configured routes, sorted.
func (p *Producer) RouteNames() []string { return slices.Sorted(maps.Keys(p.routes)) }

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
	// LastSeq is the stream sequence of the last event of History: the
	// result is the intent as the log holds it, with no need to read it
	// again.
	LastSeq uint64
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
	route    adapter.Route
	intentID string
	rec      events.IntentRecordedData
}

func (p *Producer) prepare(req Request) (*prepared, error) {
	req.Tenant = cmp.Or(req.Tenant, p.cfg.Tenant)
	invalid := func(err error) error { return errkind.Wrap(ErrInvalidRequest, err) }
	if err := cmp.Or(events.ValidateToken("tenant", req.Tenant), events.ValidateToken("route", req.Route)); err != nil {
		return nil, invalid(err)
	}
	route, ok := p.routes[req.Route]
	if !ok {
		return nil, errors.WithHintf(errors.Errorf("%w: %q", ErrUnknownRoute, req.Route),
			"the routes configured here are %s", strings.Join(p.RouteNames(), ", "))
	}
	if err := cmp.Or(events.ValidateFreeform("account", req.Account), events.ValidateFreeform("request_id", req.RequestID)); err != nil {
		return nil, invalid(err)
	}
	if req.ParentExternalID != "" {
		if err := events.ValidateFreeform("parent_external_id", req.ParentExternalID); err != nil {
			return nil, invalid(err)
		}
	}
	if pc, ok := route.Adapter.(adapter.ParentChecker); ok {
		if err := pc.CheckParent(req.ParentExternalID); err != nil {
			return nil, invalid(&events.FieldError{Field: "parent_external_id", Reason: err.Error()})
		}
	}
	if len(req.Payload) == 0 {
		return nil, invalid(&events.FieldError{Field: "payload", Reason: "is required"})
	}
	canon, err := normalize(route, req.Payload)
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
	caps := adapter.FrozenCaps(route.Adapter)
	pr := &prepared{route: route, intentID: id, rec: events.IntentRecordedData{
		Tenant: req.Tenant, Route: req.Route, Account: req.Account, RequestID: req.RequestID,
		IdempotencyKey: events.IdempotencyKey(id), ParentExternalID: req.ParentExternalID,
		Payload: canon, PayloadSHA256: sum, Canon: events.CanonV1,
		PlannedAt: planned.UTC(), ExpiresAt: req.ExpiresAt.UTC(), Policy: route.Policy, Caps: &caps,
	}}
	// The payload is frozen into IntentRecorded: refuse it now if that
	// event could not be decoded again, before anything is recorded or
	// written.
	if len(canon) > events.MaxPayloadSize {
		return nil, errkind.Wrap(ErrPayloadTooLarge, &events.FieldError{Field: "payload",
			Reason: fmt.Sprintf("is %d bytes in canonical form, the limit is %d", len(canon), events.MaxPayloadSize)})
	}
	// The event is validated here; its size is checked when it is encoded
	// to be appended (tooLarge), not by encoding it twice.
	if err := pr.event(now, p.cfg.Actor).Validate(); err != nil {
		return nil, invalid(err)
	}
	return pr, nil
}

// tooLarge maps an IntentRecorded that encodes over the log's limit to
// ErrPayloadTooLarge (nothing was recorded or written).
func tooLarge(err error) error {
	if errors.Is(err, events.ErrTooLarge) {
		return errkind.Wrap(ErrPayloadTooLarge, &events.FieldError{Field: "payload",
			Reason: fmt.Sprintf("makes an event over the log's %d-byte limit once encoded", events.MaxEventSize)})
	}
	return err
}

// event is the IntentRecorded event of a prepared request.
func (pr *prepared) event(at time.Time, actor string) events.Event {
	rec := pr.rec
	return events.New(pr.intentID, 1, at, actor, "", &rec)
}

// mismatchHint is what the caller of a refused request id should do.
const mismatchHint = "a different write needs a new request id; resending this one must carry the same payload, account and parent"

// sameRequest compares the identity of a stored intent with a new request.
func sameRequest(stored events.IntentRecordedData, rec events.IntentRecordedData) error {
	var err error
	switch {
	case stored.PayloadSHA256 != rec.PayloadSHA256:
		err = errors.Errorf("%w: payload_sha256 is %s, the request has %s", ErrPayloadMismatch, stored.PayloadSHA256[:12], rec.PayloadSHA256[:12])
	case stored.Account != rec.Account:
		err = errors.Errorf("%w: account differs", ErrPayloadMismatch)
	case stored.ParentExternalID != rec.ParentExternalID:
		err = errors.Errorf("%w: parent_external_id differs", ErrPayloadMismatch)
	default:
		return nil
	}
	return errors.WithHint(err, mismatchHint)
}

// Execute records the intent and makes its write, at most once per
// request id:
//
//  1. The intent recorded (payload frozen, hash, keys, policy, the route's
//     capabilities) with CAS "subject empty", without reading its subject
//     first (when the CAS fails the intent is read and answered as a
//     resubmission). The same request id with the same payload returns the
//     stored state without writing; with a different payload
//     ErrPayloadMismatch. Before a new intent is recorded, a route that can
//     tell its credential's identity (adapter.IdentityChecker) checks the
//     account: a mismatch is ErrInvalidRequest and nothing is written.
//  2. Whatever fsm.Decider says next on the write path: an approval
//     request, an abandonment (the intent expired: a normal result in
//     state abandoned), a retry claim, or WriteStarted — acknowledged
//     before the adapter is called, and only the party whose WriteStarted
//     wins the CAS calls it. A new intent's first step goes with its
//     record (recordAndStart).
//  3. The call, then the classified outcome: WriteConfirmed/WriteSucceeded,
//     WriteRejected (proven not executed), or OutcomeUnknown.
//
// Execute makes at most one external call. Reconciliation (unknown
// outcomes, readback, resends after a proven rejection once their backoff
// has passed) is the reconciler's.
//
// Traced, Execute is the span settle.submit: a child of the caller's span
// (or of the traceparent the caller sent), with the intent's id, route and
// state as Execute leaves it.
func (p *Producer) Execute(ctx context.Context, req Request) (*Result, error) {
	if !telemetry.Enabled() {
		return p.execute(ctx, req)
	}
	ctx, span := telemetry.Start(ctx, "settle.submit")
	res, err := p.execute(ctx, req)
	if res != nil {
		span.Intent(res.IntentID, res.Route)
		span.State(string(res.State))
	} else {
		span.Str(telemetry.AttrRoute, req.Route)
	}
	span.End(err)
	return res, err
}

func (p *Producer) execute(ctx context.Context, req Request) (*Result, error) {
	pr, err := p.prepare(req)
	if err != nil {
		return nil, err
	}
	recordedNow, checked := false, false
	if !req.DryRun {
		res, done, err := p.recordNew(ctx, pr, false)
		if done {
			return res, err
		}
		recordedNow, checked = res != nil, err == nil || errors.Is(err, ledger.ErrConflict)
	}
	for round := 0; round < 5; round++ {
		h, intent, err := p.loadPrepared(ctx, pr)
		if err != nil {
			return nil, errors.Errorf("execute: %w", err)
		}
		if req.DryRun {
			return p.dryRun(pr, h, intent)
		}
		if h == nil {
			res, done, err := p.recordNew(ctx, pr, checked)
			if done || !errors.Is(err, ledger.ErrConflict) {
				return res, err // recorded, failed, held or not the account
			}
			// Someone recorded it concurrently (compare with theirs), or
			// moved our new intent on before our first step.
			checked, recordedNow = true, recordedNow || res != nil
			continue
		}
		if err := sameRequest(intent.Recorded, pr.rec); err != nil {
			return nil, err
		}
		if p.held(h, intent) { // hold.go
			res, err := p.handOffHeld(ctx, h, intent)
			if errors.Is(err, ledger.ErrConflict) {
				continue
			}
			return res, err
		}
		res, err := p.drive(ctx, pr.route, h, intent, already{recorded: recordedNow})
		if errors.Is(err, ledger.ErrConflict) && !errors.Is(err, ErrOutcomeNotRecorded) {
			continue // another party moved the intent before any call: reload
		}
		return res, err
	}
	return nil, errors.Errorf("execute %s: %w: too much contention", pr.intentID, ledger.ErrConflict)
}

// recordNew records a new intent (its identity checked first unless
// checked) with the CAS "subject empty" of its first message as the check
// a read would make. done reports an answer to return; otherwise the
// intent exists (err is ledger.ErrConflict, res non-nil when its first
// message was ours), or it is held or failed its identity check (err says
// which; nil res): execute's rounds read the log and answer as for any
// resubmission.
func (p *Producer) recordNew(ctx context.Context, pr *prepared, checked bool) (res *Result, done bool, err error) {
	if err := p.heldUnrecorded(pr.intentID); err != nil {
		return nil, false, err
	}
	if !checked {
		if err := p.checkIdentity(ctx, pr); err != nil {
			return nil, false, err
		}
	}
	res, err = p.recordAndStart(ctx, pr)
	switch {
	case errors.Is(err, ErrOutcomeNotRecorded):
		// The call was made: never driven again (its lost outcome append
		// may also be a conflict).
		return res, true, err
	case errors.Is(err, ledger.ErrConflict):
		return res, false, err
	case err != nil:
		return nil, true, err
	default:
		return res, true, nil
	}
}

// checkIdentity asks a route that knows its credential's identity whether
// the intent's account is it.
func (p *Producer) checkIdentity(ctx context.Context, pr *prepared) error {
	ic, ok := pr.route.Adapter.(adapter.IdentityChecker)
	if !ok {
		return nil
	}
	err := ic.CheckAccount(adapter.Calling(ctx, pr.route, adapter.KindIdentity), pr.rec.Account)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, adapter.ErrAccountMismatch):
		return errkind.Wrap(ErrInvalidRequest, &events.FieldError{Field: "account",
			Reason: "is not the identity of the route's credential: the write would be authored by someone else"})
	}
	return errors.Errorf("execute: identity check of route %s: %w", pr.route.Name, err)
}

// recordAndStart records a new intent together with the first step the
// decider gives on it, appended as one unit. An automatic first write is
// one message, IntentStarted (IntentRecorded and WriteStarted in one event,
// acknowledged before the call). Any other first step, or a first write
// whose IntentStarted would exceed the log's event limit, follows its
// IntentRecorded in the same AppendEvents. A conflict on the first message
// (ErrConflict, nil result) makes the caller reload and compare. When
// IntentRecorded landed but its step did not, the result is non-nil with
// the error (ErrConflict: reload and drive).
func (p *Producer) recordAndStart(ctx context.Context, pr *prepared) (*Result, error) {
	realStart := time.Now()
	now := p.cfg.Now()
	rec := pr.event(now, p.cfg.Actor)
	intent, err := fsm.Fold([]events.Event{rec})
	if err != nil {
		return nil, errors.Errorf("record: %w", err)
	}
	evs := []events.Event{rec}
	caps := intent.Caps()
	step := p.dec.Next(intent, caps, now)
	var prepErr error
	if step.Kind == fsm.StepWrite {
		prepErr = render(pr.route, intent, step)
	}
	next := intent
	if step.WritePath && step.Event != nil && (step.Kind == fsm.StepWrite || step.Kind == fsm.StepAppend) {
		e := events.New(intent.ID, 2, now, p.cfg.Actor, step.AttemptID, step.Event)
		n := intent.Clone()
		if err := n.Apply(e); err == nil {
			evs, next = append(evs, e), n
		}
	}
	pair := evs
	if step.Kind == fsm.StepWrite && len(evs) == 2 {
		if started, ok := events.Join(evs[0], evs[1]); ok {
			n := &fsm.Intent{State: fsm.None}
			if err := n.Apply(started); err == nil {
				evs, next = []events.Event{started}, n
			}
		}
	}
	if len(evs) == 1 {
		if d, ok := evs[0].Data.(*events.IntentStartedData); ok {
			d.Traceparent = telemetry.Traceparent(ctx) // the caller's trace, for reconciliation
		}
	}
	rctx, span := telemetry.Start(ctx, "settle.record")
	span.Intent(pr.intentID, pr.rec.Route)
	span.Str(telemetry.AttrEvent, string(evs[0].Type))
	seqs, err := p.store.AppendEvents(rctx, pr.rec.Route, evs, 0)
	span.End(err)
	if len(seqs) == 0 && len(pair) == 2 && len(evs) == 1 && errors.Is(err, events.ErrTooLarge) {
		// Together over the limit: the record and the start as two
		// messages, as an intent that is not started at once.
		evs, next = pair, intent.Clone()
		if err := next.Apply(pair[1]); err != nil {
			return nil, errors.Errorf("record: %w", err)
		}
		seqs, err = p.store.AppendEvents(ctx, pr.rec.Route, evs, 0)
	}
	if len(seqs) == 0 {
		return nil, errors.Errorf("record: %w", tooLarge(err))
	}
	h := &ledger.History{Route: pr.rec.Route, Events: evs[:len(seqs)], LastSeq: seqs[len(seqs)-1]}
	if len(seqs) < len(evs) {
		return p.result(h, intent, false), errors.Errorf("record: %s: %w", evs[1].Type, err)
	}
	if len(pair) == 1 {
		return p.drive(ctx, pr.route, h, intent, already{recorded: true})
	}
	intent = next
	if step.Kind != fsm.StepWrite {
		return p.drive(ctx, pr.route, h, intent, already{recorded: true, appended: 1})
	}
	// The start is acknowledged: make the call, record its outcome.
	if err := p.w.call(ctx, pr.route, h, intent, step, prepErr, realStart); err != nil {
		if errors.Is(err, ErrOutcomeNotRecorded) {
			return p.result(h, intent, false), err
		}
		return nil, err
	}
	return p.drive(ctx, pr.route, h, intent, already{recorded: true, wrote: true, appended: 2})
}

// already is what a caller of drive did on the intent before.
type already struct {
	// recorded: the intent was recorded by this call (its result is not
	// a replay).
	recorded bool
	// wrote: the external call was made.
	wrote bool
	// appended is how many events were appended.
	appended int
}

// drive takes the write-path steps the decider gives, making at most one
// external call, and returns the result.
func (p *Producer) drive(ctx context.Context, route adapter.Route, h *ledger.History, intent *fsm.Intent, did already) (*Result, error) {
	wrote, appended := did.wrote, did.appended
	caps := intent.Caps()
	for k := 0; k < 8; k++ {
		realStart := time.Now()
		step := p.dec.Next(intent, caps, p.cfg.Now())
		if !step.WritePath || (step.Kind == fsm.StepWrite && wrote) {
			break
		}
		if step.Kind == fsm.StepWrite {
			wrote = true
			if err := p.w.TakeWrite(ctx, route, h, intent, step, realStart); err != nil {
				if errors.Is(err, ErrOutcomeNotRecorded) {
					return p.result(h, intent, false), err
				}
				return nil, err
			}
			appended += 2
			continue
		}
		if err := p.w.appendTo(ctx, h, intent, step.AttemptID, step.Event); err != nil {
			return nil, err
		}
		appended++
	}
	return p.result(h, intent, !did.recorded && appended == 0), nil
}

// Classify maps one attempt's result to its outcome event body.
func Classify(intent *fsm.Intent, attemptID string, res adapter.WriteResult, err error) events.Data {
	if err == nil {
		if intent.Recorded.Policy.TrustResponse {
			return &events.WriteConfirmedData{StatusCode: res.StatusCode, Receipt: events.Receipt{
				ExternalID: res.ExternalID, LiveURL: res.LiveURL, PayloadSHA256: intent.Recorded.PayloadSHA256,
				Source: events.SourceResponse, IdempotencyKey: intent.Recorded.IdempotencyKey, RequestID: intent.Recorded.RequestID, AttemptID: attemptID,
			}}
		}
		return &events.WriteSucceededData{ExternalID: res.ExternalID, LiveURL: res.LiveURL, StatusCode: res.StatusCode}
	}
	var ce *adapter.CallError
	if errors.As(err, &ce) {
		if ce.Code == adapter.CodeKeyReused {
			// The key was already used: an earlier request with it
			// reached the API and may have executed. Whatever class the
			// adapter gave the answer, it proves nothing was done.
			msg := cmp.Or(ce.Message, "the API says the idempotency key was already used: an earlier request with it reached the API")
			return &events.OutcomeUnknownData{Code: adapter.CodeKeyReused, Message: msg, StatusCode: ce.StatusCode}
		}
		switch ce.Class {
		case adapter.NotSent:
			// Never sent, so nothing executed; whether sending again can
			// help is the adapter's call (an invalid request cannot).
			return &events.WriteRejectedData{Code: ce.Code, Message: ce.Message, Retryable: ce.Retryable, RetryAfter: retryAfter(ce)}
		case adapter.Rejected:
			return &events.WriteRejectedData{Code: ce.Code, Message: ce.Message, StatusCode: ce.StatusCode, Retryable: ce.Retryable, RetryAfter: retryAfter(ce)}
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

// retryAfter is the wait a retryable rejection asked for, as the decider
// honours it (capped at fsm.MaxRetryAfter); 0 for a definite one.
func retryAfter(ce *adapter.CallError) events.Duration {
	if !ce.Retryable || ce.RetryAfter <= 0 {
		return 0
	}
	return events.Duration(min(ce.RetryAfter, fsm.MaxRetryAfter))
}

func (p *Producer) result(h *ledger.History, intent *fsm.Intent, replayed bool) *Result {
	return &Result{IntentID: intent.ID, Route: h.Route, State: intent.State, Intent: intent, History: h.Events, LastSeq: h.LastSeq, Replayed: replayed}
}

func (p *Producer) dryRun(pr *prepared, h *ledger.History, intent *fsm.Intent) (*Result, error) {
	rep := &DryRunReport{IntentID: pr.intentID, Subject: events.Subject(pr.rec.Route, pr.intentID),
		IdempotencyKey: pr.rec.IdempotencyKey, PayloadSHA256: pr.rec.PayloadSHA256, CanonicalPayload: pr.rec.Payload}
	res := &Result{IntentID: pr.intentID, Route: pr.rec.Route, DryRun: rep}
	now := p.cfg.Now()
	var sim *fsm.Intent
	if h == nil {
		var err error
		sim, err = fsm.Fold([]events.Event{pr.event(now, p.cfg.Actor)})
		if err != nil {
			return nil, err
		}
		rep.WouldAppend = []events.Type{events.IntentRecorded}
		rep.Reason = "new intent"
	} else {
		res.Intent, res.State, res.History, res.LastSeq = intent, intent.State, h.Events, h.LastSeq
		rep.ExistingState = intent.State
		rep.IntentID, res.IntentID, rep.Subject = intent.ID, intent.ID, events.Subject(pr.rec.Route, intent.ID)
		rep.IdempotencyKey = intent.Recorded.IdempotencyKey
		if err := sameRequest(intent.Recorded, pr.rec); err != nil {
			return nil, err
		}
		sim = intent.Clone()
		rep.Reason = "already recorded"
		if p.held(h, intent) {
			rep.Reason += "; held after an accepted log loss: it is handed to a human and nothing is written"
			return res, nil
		}
	}
	// Walk the decider's write path on a private copy, appending nothing.
	caps := sim.Caps()
	for k := 0; k < 8; k++ {
		step := p.dec.Next(sim, caps, now)
		if !step.WritePath {
			break
		}
		rep.WouldAppend = append(rep.WouldAppend, step.Event.EventType())
		rep.Reason += "; " + step.Why
		if step.Kind == fsm.StepWrite {
			rep.WouldAppend = append(rep.WouldAppend, "<outcome>")
			rep.WouldWrite = true
			break
		}
		if err := sim.Apply(events.New(sim.ID, sim.Version+1, now, p.cfg.Actor, step.AttemptID, step.Event)); err != nil {
			break
		}
	}
	if h == nil && len(rep.WouldAppend) >= 2 && rep.WouldAppend[1] == events.WriteStarted {
		// Recorded and started at once: one message (recordAndStart).
		rep.WouldAppend = append([]events.Type{events.IntentStarted}, rep.WouldAppend[2:]...)
	}
	if len(rep.WouldAppend) == 0 {
		rep.Reason += ": the stored state is returned, nothing is written"
	}
	return res, nil
}

// loadPrepared reads and folds the intent a prepared request maps to. It
// returns (nil, nil, nil) when the log holds none.
func (p *Producer) loadPrepared(ctx context.Context, pr *prepared) (*ledger.History, *fsm.Intent, error) {
	h, err := p.store.LoadIfAny(ctx, pr.rec.Route, pr.intentID)
	if err != nil {
		return nil, nil, p.unfoldable(pr.intentID, nil, err) // hold.go
	}
	if h == nil {
		return nil, nil, nil
	}
	i, err := h.Fold()
	if err != nil {
		return nil, nil, p.unfoldable(pr.intentID, h, err) // hold.go
	}
	return h, i, nil
}
