package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
)

// executeTimeout bounds one Execute. The external call runs detached from
// the client's connection: a client that hangs up must not turn a write
// into an unknown outcome.
const executeTimeout = 3 * time.Minute

// Settled reports whether an intent in state s waits for nothing automatic:
// its outcome is known (confirmed, rejected, failed, abandoned) or a human
// must act (manual_action, awaiting_approval). ?wait= waits for it.
func Settled(s fsm.State) bool { return fsm.Settled(s) }

// AttemptView is one attempt of an intent.
type AttemptView struct {
	N          int         `json:"n"`
	ID         string      `json:"attempt_id"`
	StartedAt  time.Time   `json:"started_at"`
	Deadline   time.Time   `json:"deadline"`
	ClaimOwner string      `json:"claim_owner,omitempty"`
	Outcome    events.Type `json:"outcome,omitempty"`
	Code       string      `json:"code,omitempty"`
}

// IntentDetail is one intent as folded from the log: the projector's view
// of it (same fields as list items) plus its payload, attempts, complete
// history and the operator actions its state allows.
type IntentDetail struct {
	projector.IntentView
	ParentExternalID string            `json:"parent_external_id,omitempty"`
	ExpiresAt        time.Time         `json:"expires_at,omitzero"`
	Payload          json.RawMessage   `json:"payload"`
	ApprovalFor      string            `json:"approval_for,omitempty"`
	ApprovedBy       string            `json:"approved_by,omitempty"`
	AttemptHistory   []AttemptView     `json:"attempt_history"`
	History          []json.RawMessage `json:"history"`
	// Actions lists what an operator may do now: approve,
	// resolve_confirmed, resolve_not_executed, abandon.
	Actions []string `json:"actions"`
	Settled bool     `json:"settled"`
}

// DryRunView is the answer to a dry run: what Execute would do.
type DryRunView struct {
	DryRun           bool            `json:"dry_run"`
	IntentID         string          `json:"intent_id"`
	Route            string          `json:"route"`
	Subject          string          `json:"subject"`
	IdempotencyKey   string          `json:"idempotency_key"`
	PayloadSHA256    string          `json:"payload_sha256"`
	CanonicalPayload json.RawMessage `json:"canonical_payload"`
	ExistingState    fsm.State       `json:"existing_state,omitempty"`
	WouldAppend      []events.Type   `json:"would_append"`
	WouldWrite       bool            `json:"would_write"`
	Reason           string          `json:"reason"`
}

// detailOf is the detail of an intent as loaded: its history h and its
// fold i (no second fold).
func detailOf(h *ledger.History, i *fsm.Intent) (*IntentDetail, error) {
	d := &IntentDetail{IntentView: projector.ViewOf(i, h.LastSeq), ParentExternalID: i.Recorded.ParentExternalID, Payload: i.Recorded.Payload,
		ApprovalFor: i.ApprovalFor, ApprovedBy: i.ApprovedBy, Settled: Settled(i.State),
		AttemptHistory: []AttemptView{}, History: make([]json.RawMessage, 0, len(h.Events)), Actions: actionsOf(i)}
	if !i.Recorded.ExpiresAt.IsZero() {
		d.ExpiresAt = i.Recorded.ExpiresAt.UTC()
	}
	for _, a := range i.Attempts {
		d.AttemptHistory = append(d.AttemptHistory, AttemptView{N: a.N, ID: a.ID, StartedAt: a.StartedAt.UTC(),
			Deadline: a.Deadline.UTC(), ClaimOwner: a.ClaimOwner, Outcome: a.Outcome, Code: a.Code})
	}
	for _, e := range h.Events {
		b, err := events.Encode(e)
		if err != nil {
			return nil, err
		}
		d.History = append(d.History, b)
	}
	return d, nil
}

func actionsOf(i *fsm.Intent) []string {
	out := []string{}
	if i.Can(events.Approved) {
		out = append(out, "approve")
	}
	if i.Can(events.OperatorConfirmed) {
		out = append(out, "resolve_confirmed")
	}
	if i.Can(events.OperatorReleased) {
		out = append(out, "resolve_not_executed")
	}
	if i.Can(events.Abandoned) {
		out = append(out, "abandon")
	}
	return out
}

// --- in-flight requests ---

// flights tracks submits executing in this process, by route and request
// id: a second submit of the same id while the first executes gets 409
// (or waits for it with ?wait=).
type flights struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func newFlights() *flights { return &flights{m: map[string]chan struct{}{}} }

// begin claims key. It returns a release func, or the channel that closes
// when the current holder releases.
func (f *flights) begin(key string) (release func(), busy <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ch, ok := f.m[key]; ok {
		return nil, ch
	}
	ch := make(chan struct{})
	f.m[key] = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.m, key)
			f.mu.Unlock()
			close(ch)
		})
	}, nil
}

// --- POST /v1/intents ---

type submitBody struct {
	Route, Account, RequestID, ParentExternalID string
	Payload                                     json.RawMessage
	PlannedAt, ExpiresAt                        time.Time
	DryRun                                      bool
	// keyFromHeader: the request id came as the Idempotency-Key header, so
	// a refusal of it names the header.
	keyFromHeader bool
}

// parseSubmit reads the body and the Idempotency-Key header. It checks
// what is HTTP's (JSON, known fields and their types, the header's form,
// the header and the body agreeing); the request's fields are validated
// once, by Execute, and its refusals name them.

func (s *Server) parseSubmit(w http.ResponseWriter, r *http.Request) (*submitBody, *Problem) {
	data, prob := readJSONBody(w, r)
	if prob != nil {
		return nil, prob
	}
	var b submitBody
	if prob := decodeObject(data, map[string]any{
		"route": &b.Route, "account": &b.Account, "request_id": &b.RequestID,
		"parent_external_id": &b.ParentExternalID, "payload": &b.Payload,
		"planned_at": &b.PlannedAt, "expires_at": &b.ExpiresAt, "dry_run": &b.DryRun,
	}); prob != nil {
		return nil, prob
	}
	hdr := r.Header.Values(IdempotencyKeyHeader)
	if len(hdr) > 1 {
		return nil, invalid(IdempotencyKeyHeader, IdempotencyKeyHeader+": the header appears more than once")
	}
	if len(hdr) == 1 {
		key, err := parseIdempotencyKey(hdr[0])
		if err != nil {
			return nil, invalid(IdempotencyKeyHeader, IdempotencyKeyHeader+": is not a valid sf-string (\"key\") or bare key: "+err.Error())
		}
		if key == "" {
			return nil, invalid(IdempotencyKeyHeader, IdempotencyKeyHeader+": the header is empty")
		}
		if b.RequestID != "" && b.RequestID != key {
			return nil, invalid(IdempotencyKeyHeader, IdempotencyKeyHeader+": the header and the body's request_id differ")
		}
		b.RequestID, b.keyFromHeader = key, true
	}
	if b.RequestID == "" {
		return nil, invalid("request_id", "request_id: is required, in the body or as the Idempotency-Key header")
	}
	return &b, nil
}

// IdempotencyKeyHeader is the header of the IETF Idempotency-Key draft:
// the request id, as an sf-string ("key") or a bare key.
const IdempotencyKeyHeader = "Idempotency-Key"

// maxWaitSeconds is the largest ?wait= in whole seconds that a
// time.Duration holds.
const maxWaitSeconds = math.MaxInt64 / int64(time.Second)

// parseWait reads ?wait= (a Go duration like 5s, or whole seconds). A
// value beyond MaxWait waits MaxWait; a negative one, or one too large
// for a duration, is refused.
func (s *Server) parseWait(q url.Values) (time.Duration, *Problem) {
	v := q.Get("wait")
	if v == "" {
		return 0, nil
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n > maxWaitSeconds {
			return 0, invalid("wait", fmt.Sprintf("wait: %s seconds is out of range (the server waits at most %s)", clip(v, 32), s.cfg.MaxWait))
		}
		d = time.Duration(n) * time.Second
	} else if errors.Is(err, strconv.ErrRange) {
		return 0, invalid("wait", fmt.Sprintf("wait: %s is out of range (the server waits at most %s)", clip(v, 32), s.cfg.MaxWait))
	} else if d, err = time.ParseDuration(v); err != nil {
		return 0, invalid("wait", "wait: must be a duration like 5s or whole seconds, within range")
	}
	if d < 0 {
		return 0, invalid("wait", "wait: must not be negative")
	}
	return min(d, s.cfg.MaxWait), nil
}

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request, p *principal) error {
	wait, prob := s.parseWait(r.URL.Query())
	if prob != nil {
		return prob
	}
	b, prob := s.parseSubmit(w, r)
	if prob != nil {
		return prob
	}
	if !p.routeAllowed(b.Route) {
		return newProblem(http.StatusForbidden, ProbForbidden, "the token may not use route "+b.Route).withField("route")
	}
	if !p.accountAllowed(b.Account) {
		return newProblem(http.StatusForbidden, ProbForbidden, "the token may not use this account").withField("account")
	}
	req := producer.Request{Tenant: p.tenant, Route: b.Route, Account: b.Account, RequestID: b.RequestID,
		ParentExternalID: b.ParentExternalID, Payload: b.Payload, PlannedAt: b.PlannedAt,
		ExpiresAt: b.ExpiresAt, DryRun: b.DryRun}

	ctx := r.Context()
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if b.DryRun {
		res, err := s.cfg.Intents.Execute(ctx, req)
		if err != nil {
			return b.problem(err, nil)
		}
		d := res.DryRun
		if d.ExistingState != "" && !p.mayRead(p.tenant, b.Route, b.Account) {
			return replayForbidden()
		}
		wouldAppend := d.WouldAppend
		if wouldAppend == nil {
			wouldAppend = []events.Type{}
		}
		writeJSON(w, http.StatusOK, DryRunView{DryRun: true, IntentID: d.IntentID, Route: res.Route, Subject: d.Subject,
			IdempotencyKey: d.IdempotencyKey, PayloadSHA256: d.PayloadSHA256, CanonicalPayload: d.CanonicalPayload,
			ExistingState: d.ExistingState, WouldAppend: wouldAppend, WouldWrite: d.WouldWrite, Reason: d.Reason})
		return nil
	}

	key := p.tenant + "\x00" + b.Route + "\x00" + b.Account + "\x00" + b.RequestID
	var release func()
	for release == nil {
		var busy <-chan struct{}
		release, busy = s.flights.begin(key)
		if release != nil {
			break
		}
		if wait == 0 {
			w.Header().Set("Retry-After", "1")
			return newProblem(http.StatusConflict, ProbInFlight, "a request with this request id is executing; retry later or send ?wait=")
		}
		select {
		case <-busy:
		case <-waitCtx.Done():
			w.Header().Set("Retry-After", "1")
			return newProblem(http.StatusConflict, ProbInFlight, "a request with this request id is still executing")
		}
	}
	execCtx, execCancel := context.WithTimeout(context.WithoutCancel(ctx), executeTimeout)
	res, err := s.cfg.Intents.Execute(execCtx, req)
	execCancel()
	release()
	if errors.Is(err, ledger.ErrLogUnavailable) && !errors.Is(err, producer.ErrOutcomeNotRecorded) {
		return unavailableProblem(w, err)
	}
	if err != nil {
		return b.problem(err, res)
	}
	// A replay shows the intent as it is now: only to a token that may
	// read it (the request's tenant, route and account are the token's
	// already; the read scope is what a submit-only token lacks).
	if res.Replayed && !p.mayRead(p.tenant, b.Route, b.Account) {
		return replayForbidden()
	}
	if !res.Replayed {
		s.metrics.observeSubmitWrite(res.Route, res.History)
	}
	// The answer is the intent as Execute left it on the log (its events
	// and the stream sequence of the last, folded once): the log is not
	// read again, unless the client waits for the intent to settle.
	h, i := &ledger.History{Route: res.Route, Events: res.History, LastSeq: res.LastSeq}, res.Intent
	waited := wait > 0 && !Settled(res.State)
	if waited {
		if h, i, err = s.awaitSettled(waitCtx, res.IntentID); err != nil {
			return err
		}
	}
	if i.State == fsm.WriteStarted && (res.Replayed || waited) {
		w.Header().Set("Retry-After", "1")
		return newProblem(http.StatusConflict, ProbInFlight, "the intent's write is in flight (write_started); retry later or send ?wait=").
			withIntent(res.IntentID, string(i.State))
	}
	d, err := detailOf(h, i)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/intents/"+res.IntentID)
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, http.StatusOK, d)
		return nil
	}
	writeJSON(w, http.StatusCreated, d)
	return nil
}

// replayForbidden: the request id names an existing intent the token may
// not read. Nothing of the intent is shown.
func replayForbidden() *Problem {
	return newProblem(http.StatusForbidden, ProbForbidden,
		"this request id names an existing intent, and the token lacks the read scope to be shown it; nothing was written").withField(IdempotencyKeyHeader)
}

// OutcomeLabel is the outcome label of settle_external_calls_total for an
// attempt's outcome event: confirmed, succeeded, rejected or unknown. Wire
// it as producer.Config.OnCall = func(route string, o events.Type) {
// metrics.CountCall(route, api.OutcomeLabel(o)) }, so that every write —
// the API's and the reconcilers' — is counted once.
func OutcomeLabel(t events.Type) string {
	switch t {
	case events.WriteConfirmed:
		return "confirmed"
	case events.WriteSucceeded:
		return "succeeded"
	case events.WriteRejected:
		return "rejected"
	case events.OutcomeUnknown:
		return "unknown"
	}
	return strings.ToLower(string(t))
}

// problem maps an Execute error. A refused request id that came as the
// Idempotency-Key header names the header.
func (b *submitBody) problem(err error, res *producer.Result) error {
	var fe *events.FieldError
	switch {
	case errors.Is(err, producer.ErrInvalidRequest) && b.keyFromHeader && errors.As(err, &fe) && fe.Field == "request_id":
		return invalid(IdempotencyKeyHeader, IdempotencyKeyHeader+": "+fe.Reason)
	case errors.Is(err, producer.ErrInvalidRequest):
		return fieldProblem(err)
	case errors.Is(err, producer.ErrPayloadTooLarge):
		return newProblem(http.StatusRequestEntityTooLarge, ProbTooLarge,
			fmt.Sprintf("payload: too large for the log (at most %d bytes in canonical form, and its event within %d bytes); nothing was recorded or written", events.MaxPayloadSize, events.MaxEventSize)).withField("payload")
	case errors.Is(err, producer.ErrUnknownRoute):
		return invalid("route", "route: no such route is configured")
	case errors.Is(err, producer.ErrPayloadMismatch):
		return newProblem(http.StatusUnprocessableEntity, ProbPayloadMismatch,
			"this request id is already recorded with a different payload, account or parent; nothing was written")
	case errors.Is(err, producer.ErrOutcomeNotRecorded):
		p := newProblem(http.StatusServiceUnavailable, ProbOutcomeUnsettled,
			"the write was made but its outcome could not be recorded; the intent will be settled by reconciliation (resubmitting the same request is safe)")
		if res != nil {
			p.withIntent(res.IntentID, string(res.State))
		}
		return p
	case errors.Is(err, ledger.ErrConflict):
		return newProblem(http.StatusConflict, ProbConflict, "the intent changed concurrently too often; retry")
	}
	return err
}

// awaitSettled polls the log until the intent is settled or ctx ends, and
// returns the last history read and its fold.
func (s *Server) awaitSettled(ctx context.Context, id string) (*ledger.History, *fsm.Intent, error) {
	delay := 20 * time.Millisecond
	var last *ledger.History
	var lastIntent *fsm.Intent
	for {
		// The last read runs even when ctx has ended, so the answer is fresh.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		h, i, err := s.cfg.Intents.Load(rctx, id)
		cancel()
		if err != nil {
			if last != nil && ctx.Err() != nil {
				return last, lastIntent, nil
			}
			return nil, nil, err
		}
		last, lastIntent = h, i
		if Settled(i.State) || ctx.Err() != nil {
			return h, i, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// --- GET /v1/intents/{id} ---

// loadAuthorized loads the intent named by the path from the log (one
// read, folded once) and checks that p may see it.
func (s *Server) loadAuthorized(r *http.Request, p *principal) (*ledger.History, *fsm.Intent, error) {
	id := r.PathValue("id")
	if err := events.ValidateIntentID(id); err != nil {
		return nil, nil, invalid("intent_id", "intent_id: is not an intent id (in_ + 32 base32 characters)")
	}
	h, i, err := s.cfg.Intents.Load(r.Context(), id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil, newProblem(http.StatusNotFound, ProbNotFound, "no such intent").withIntent(id, "")
	}
	if err != nil {
		return nil, nil, err
	}
	if i.Recorded.Tenant != p.tenant {
		// Another tenant's intent: not even its existence is shown.
		return nil, nil, newProblem(http.StatusNotFound, ProbNotFound, "no such intent").withIntent(id, "")
	}
	if !p.routeAllowed(i.Route()) || !p.accountAllowed(i.Account()) {
		return nil, nil, newProblem(http.StatusForbidden, ProbForbidden, "the token may not see this intent's route or account").withIntent(id, "")
	}
	return h, i, nil
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	h, i, err := s.loadAuthorized(r, p)
	if err != nil {
		return err
	}
	d, err := detailOf(h, i)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// --- GET /v1/intents ---

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, p *principal) error {
	q := r.URL.Query() // checked by checkQuery: known parameters, each once
	f := projector.Filter{Tenant: p.tenant}
	for k, vs := range q {
		name := clip(k, 64)
		v := vs[0]
		switch k {
		case "state":
			st := fsm.State(v)
			if st == fsm.None || !validState(st) {
				return invalid("state", "state: is not a lifecycle state")
			}
			f.State = st
		case "route":
			if err := events.ValidateToken("route", v); err != nil {
				return fieldProblem(err)
			}
			f.Route = v
		case "account":
			if err := events.ValidateFreeform("account", v); err != nil {
				return fieldProblem(err)
			}
			f.Account = v
		case "from", "to":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return invalid(k, k+": must be an RFC 3339 time")
			}
			if k == "from" {
				f.From = t
			} else {
				f.To = t
			}
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > projector.MaxLimit {
				return invalid("limit", "limit: must be an integer in 1.."+strconv.Itoa(projector.MaxLimit))
			}
			f.Limit = n
		case "after":
			if v == "" || len(v) > 1024 {
				return invalid("after", "after: is not a cursor from a previous page")
			}
			f.After = v
		default:
			return invalid(name, name+": unknown query parameter")
		}
	}
	if f.Route == "" && len(p.routes) == 1 {
		f.Route = p.routes[0]
	}
	if f.Account == "" && len(p.accounts) == 1 {
		f.Account = p.accounts[0]
	}
	if (f.Route == "" && len(p.routes) > 0) || !p.routeAllowed(f.Route) {
		return newProblem(http.StatusForbidden, ProbForbidden, "the token is limited to some routes: name one of them with ?route=").withField("route")
	}
	if (f.Account == "" && len(p.accounts) > 0) || !p.accountAllowed(f.Account) {
		return newProblem(http.StatusForbidden, ProbForbidden, "the token is limited to some accounts: name one of them with ?account=").withField("account")
	}
	page, err := s.cfg.Views.List(r.Context(), f)
	if err != nil {
		if f.After != "" && strings.Contains(err.Error(), "After:") {
			return invalid("after", "after: is not a cursor from a previous page")
		}
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// listParams are the query parameters of GET /v1/intents.
var listParams = []string{"state", "route", "account", "from", "to", "limit", "after"}

func validState(s fsm.State) bool {
	for _, x := range fsm.AllStates() {
		if x == s {
			return true
		}
	}
	return false
}

// --- operator actions ---

type actionBody struct {
	Operator, Reason, Resolution, ExternalID, LiveURL string
}

// Resolutions of POST /v1/intents/{id}/resolve.
const (
	ResolutionConfirmed   = "confirmed"
	ResolutionNotExecuted = "not_executed"
	ResolutionAbandoned   = "abandoned"
)

func (s *Server) parseAction(w http.ResponseWriter, r *http.Request, p *principal, resolve bool) (*actionBody, string, *Problem) {
	data, prob := readJSONBody(w, r)
	if prob != nil {
		return nil, "", prob
	}
	var b actionBody
	fields := map[string]any{"operator": &b.Operator, "reason": &b.Reason}
	if resolve {
		fields["resolution"] = &b.Resolution
		fields["external_id"] = &b.ExternalID
		fields["live_url"] = &b.LiveURL
	}
	if prob := decodeObject(data, fields); prob != nil {
		return nil, "", prob
	}
	// With a token the operator is the token's name, whatever the body
	// says; in dev mode the body names the operator.
	operator := p.name
	if p.dev && b.Operator != "" {
		if err := validateName(b.Operator); err != nil {
			return nil, "", invalid("operator", "operator: "+err.Error())
		}
		operator = b.Operator
	}
	if strings.TrimSpace(b.Reason) == "" {
		return nil, "", invalid("reason", "reason: is required (it is recorded with the decision)")
	}
	if len(b.Reason) > 2000 {
		return nil, "", invalid("reason", "reason: is longer than 2000 bytes")
	}
	if resolve {
		switch b.Resolution {
		case ResolutionConfirmed:
			if err := events.ValidateFreeform("external_id", b.ExternalID); err != nil {
				return nil, "", fieldProblem(err)
			}
			if b.LiveURL != "" {
				u, err := url.Parse(b.LiveURL)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || len(b.LiveURL) > 2048 {
					return nil, "", invalid("live_url", "live_url: must be an http(s) URL without credentials")
				}
			}
		case ResolutionNotExecuted, ResolutionAbandoned:
			if b.ExternalID != "" || b.LiveURL != "" {
				return nil, "", invalid("external_id", "external_id: only a confirmed resolution names the external object")
			}
		case "":
			return nil, "", invalid("resolution", "resolution: is required (confirmed, not_executed or abandoned)")
		default:
			return nil, "", invalid("resolution", "resolution: must be confirmed, not_executed or abandoned")
		}
	}
	return &b, operator, nil
}

func (s *Server) handleApprove(w http.ResponseWriter, r *http.Request, p *principal) error {
	return s.operate(w, r, p, false, func(ctx context.Context, h *ledger.History, i *fsm.Intent, operator string, b *actionBody) error {
		return s.cfg.Intents.Approve(ctx, h, i, operator, b.Reason)
	})
}

func (s *Server) handleAbandon(w http.ResponseWriter, r *http.Request, p *principal) error {
	return s.operate(w, r, p, false, func(ctx context.Context, h *ledger.History, i *fsm.Intent, operator string, b *actionBody) error {
		return s.cfg.Intents.Abandon(ctx, h, i, operator, b.Reason)
	})
}

func (s *Server) handleResolve(w http.ResponseWriter, r *http.Request, p *principal) error {
	return s.operate(w, r, p, true, func(ctx context.Context, h *ledger.History, i *fsm.Intent, operator string, b *actionBody) error {
		switch b.Resolution {
		case ResolutionConfirmed:
			return s.cfg.Intents.ResolveConfirmed(ctx, h, i, operator, b.Reason, b.ExternalID, b.LiveURL)
		case ResolutionNotExecuted:
			return s.cfg.Intents.ResolveReleased(ctx, h, i, operator, b.Reason)
		default: // ResolutionAbandoned (parseAction allows no other)
			return s.cfg.Intents.Abandon(ctx, h, i, operator, b.Reason)
		}
	})
}

// operate runs one operator action on the intent as loadAuthorized read it
// and answers with the intent the action left (h and i hold the appended
// event): one read of the log. An intent that moved since is a conflict.
func (s *Server) operate(w http.ResponseWriter, r *http.Request, p *principal, resolve bool,
	act func(ctx context.Context, h *ledger.History, i *fsm.Intent, operator string, b *actionBody) error) error {
	h, i, err := s.loadAuthorized(r, p)
	if err != nil {
		return err
	}
	b, operator, prob := s.parseAction(w, r, p, resolve)
	if prob != nil {
		return prob
	}
	// The append is not tied to the client's connection: a decision that
	// reached the log is reported by the next read, never half made.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	if err := act(ctx, h, i, operator, b); err != nil {
		switch {
		case errors.Is(err, producer.ErrNotAllowed):
			// Refused on the state just read (the intent is unchanged).
			return newProblem(http.StatusConflict, ProbNotAllowed, "the intent is "+string(i.State)+"; this action is not allowed there").
				withIntent(i.ID, string(i.State))
		case errors.Is(err, producer.ErrInvalidRequest):
			return fieldProblem(err)
		case errors.Is(err, ledger.ErrConflict):
			return newProblem(http.StatusConflict, ProbConflict, "the intent changed while the action was recorded; reload and decide again").withIntent(i.ID, "")
		}
		return err
	}
	d, err := detailOf(h, i)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}
