package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/service"
)

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
	// Actions lists what an operator may do now (service.Actions):
	// approve, resolve_confirmed, resolve_not_executed, abandon.
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

// writeDetail answers with the detail of an intent as loaded: its history
// h and its fold i (no second fold).
func writeDetail(w http.ResponseWriter, status int, h *ledger.History, i *fsm.Intent) error {
	d := &IntentDetail{IntentView: projector.ViewOf(i, h.LastSeq), ParentExternalID: i.Recorded.ParentExternalID, Payload: i.Recorded.Payload,
		ApprovalFor: i.ApprovalFor, ApprovedBy: i.ApprovedBy, Settled: service.Settled(i.State),
		ExpiresAt: i.Recorded.ExpiresAt.UTC(), AttemptHistory: []AttemptView{}, History: make([]json.RawMessage, 0, len(h.Events)), Actions: service.Actions(i)}
	for _, a := range i.Attempts {
		d.AttemptHistory = append(d.AttemptHistory, AttemptView{N: a.N, ID: a.ID, StartedAt: a.StartedAt.UTC(),
			Deadline: a.Deadline.UTC(), ClaimOwner: a.ClaimOwner, Outcome: a.Outcome, Code: a.Code})
	}
	for _, e := range h.Events {
		b, err := events.Encode(e)
		if err != nil {
			return err
		}
		d.History = append(d.History, b)
	}
	writeJSON(w, status, d)
	return nil
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

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request, c *service.Caller) error {
	wait, prob := s.parseWait(r.URL.Query())
	if prob != nil {
		return prob
	}
	b, prob := s.parseSubmit(w, r)
	if prob != nil {
		return prob
	}
	// A submit of the same request executing in this process is waited
	// for only with ?wait= (otherwise 409 at once).
	out, err := s.cfg.Service.Submit(r.Context(), *c, service.Submission{Route: b.Route, Account: b.Account,
		RequestID: b.RequestID, ParentExternalID: b.ParentExternalID, Payload: b.Payload, PlannedAt: b.PlannedAt,
		ExpiresAt: b.ExpiresAt, DryRun: b.DryRun, Wait: wait, Queue: wait})
	switch {
	case errors.Is(err, service.ErrInFlight):
		w.Header().Set("Retry-After", "1")
		if wait == 0 {
			return newProblem(http.StatusConflict, ProbInFlight, "a request with this request id is executing; retry later or send ?wait=")
		}
		return newProblem(http.StatusConflict, ProbInFlight, "a request with this request id is still executing")
	case errors.Is(err, service.ErrLogUnavailable) && !errors.Is(err, service.ErrOutcomeNotRecorded):
		return unavailableProblem(w, err)
	case err != nil:
		var res *producer.Result
		if out != nil {
			res = out.Result
		}
		return b.problem(err, res)
	}
	res := out.Result
	if b.DryRun {
		d := res.DryRun
		if d.ExistingState != "" && !out.Visible {
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
	// A replay shows the intent as it is now: only to a token that may
	// read it (the read scope is what a submit-only token lacks).
	if res.Replayed && !out.Visible {
		return replayForbidden()
	}
	if !res.Replayed {
		s.metrics.observeSubmitWrite(res.Route, events.SplitStarted(res.History)) // the start of a new intent's write is its IntentStarted
	}
	// The answer is the intent as Execute left it on the log (its events
	// and the stream sequence of the last, folded once): the log is not
	// read again, unless the client waits for the intent to settle.
	h, i := out.History, out.Intent
	if i.State == fsm.WriteStarted && (res.Replayed || out.Waited) {
		w.Header().Set("Retry-After", "1")
		return newProblem(http.StatusConflict, ProbInFlight, "the intent's write is in flight (write_started); retry later or send ?wait=").
			withIntent(res.IntentID, string(i.State))
	}
	w.Header().Set("Location", "/v1/intents/"+res.IntentID)
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
		return writeDetail(w, http.StatusOK, h, i)
	}
	return writeDetail(w, http.StatusCreated, h, i)
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
	case errors.Is(err, service.ErrInvalidRequest) && b.keyFromHeader && errors.As(err, &fe) && fe.Field == "request_id":
		return invalid(IdempotencyKeyHeader, IdempotencyKeyHeader+": "+fe.Reason)
	case errors.Is(err, service.ErrInvalidRequest):
		return fieldProblem(err)
	case errors.Is(err, service.ErrPayloadTooLarge):
		return newProblem(http.StatusRequestEntityTooLarge, ProbTooLarge,
			fmt.Sprintf("payload: too large for the log (at most %d bytes in canonical form, and its event within %d bytes); nothing was recorded or written", events.MaxPayloadSize, events.MaxEventSize)).withField("payload")
	case errors.Is(err, service.ErrUnknownRoute):
		return invalid("route", "route: no such route is configured")
	case errors.Is(err, service.ErrPayloadMismatch):
		return newProblem(http.StatusUnprocessableEntity, ProbPayloadMismatch,
			"this request id is already recorded with a different payload, account or parent; nothing was written")
	case errors.Is(err, service.ErrOutcomeNotRecorded):
		p := newProblem(http.StatusServiceUnavailable, ProbOutcomeUnsettled,
			"the write was made but its outcome could not be recorded; the intent will be settled by reconciliation (resubmitting the same request is safe)")
		if res != nil {
			p.withIntent(res.IntentID, string(res.State))
		}
		return p
	case errors.Is(err, service.ErrConflict):
		return newProblem(http.StatusConflict, ProbConflict, "the intent changed concurrently too often; retry")
	}
	return err
}

// --- GET /v1/intents/{id} ---

// intentProblem maps the service's refusal to read or act on intent id.
func intentProblem(id string, err error) error {
	switch {
	case errors.Is(err, service.ErrNotFound):
		// Also another tenant's intent: not even its existence is shown.
		return newProblem(http.StatusNotFound, ProbNotFound, "no such intent").withIntent(id, "")
	case errors.Is(err, service.ErrForbidden):
		return problemOf(err).withIntent(id, "")
	}
	return err
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, c *service.Caller) error {
	id := r.PathValue("id")
	h, i, err := s.cfg.Service.Get(r.Context(), *c, id, 0)
	if err != nil {
		return intentProblem(id, err)
	}
	return writeDetail(w, http.StatusOK, h, i)
}

// --- GET /v1/intents ---

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, c *service.Caller) error {
	q := r.URL.Query() // checked by checkQuery: known parameters, each once
	var f projector.Filter
	for k, vs := range q {
		name := clip(k, 64)
		v := vs[0]
		switch k {
		case "state":
			st := fsm.State(v)
			if st == fsm.None || !slices.Contains(fsm.AllStates(), st) {
				return invalid("state", "state: is not a lifecycle state")
			}
			f.State = st
		case "route":
			if err := events.ValidateToken(k, v); err != nil {
				return fieldProblem(err)
			}
			f.Route = v
		case "account", "request_id":
			if err := events.ValidateFreeform(k, v); err != nil {
				return fieldProblem(err)
			}
			if k == "account" {
				f.Account = v
			} else {
				f.RequestID = v
			}
		case "q":
			if v == "" || len(v) > 256 {
				return invalid("q", "q: must be an intent id or a request id (1 to 256 bytes)")
			}
			f.Search = v
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
	// The caller's tenant, and its route and account limits, are the
	// service's to apply.
	page, err := s.cfg.Service.List(r.Context(), *c, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// listParams are the query parameters of GET /v1/intents.
var listParams = []string{"state", "route", "account", "request_id", "q", "from", "to", "limit", "after"}

// --- operator actions ---

type actionBody struct {
	Operator, Reason, Resolution, ExternalID, LiveURL string
}

// parseAction decodes an action's body (the service checks its fields).
func parseAction(w http.ResponseWriter, r *http.Request, resolve bool) (*actionBody, *Problem) {
	data, prob := readJSONBody(w, r)
	if prob != nil {
		return nil, prob
	}
	var b actionBody
	fields := map[string]any{"operator": &b.Operator, "reason": &b.Reason}
	if resolve {
		fields["resolution"] = &b.Resolution
		fields["external_id"] = &b.ExternalID
		fields["live_url"] = &b.LiveURL
	}
	if prob := decodeObject(data, fields); prob != nil {
		return nil, prob
	}
	return &b, nil
}

// action is the handler of an operator action of kind; "" is resolve,
// whose kind is the body's resolution.
func (s *Server) action(kind string) func(http.ResponseWriter, *http.Request, *service.Caller) error {
	return func(w http.ResponseWriter, r *http.Request, c *service.Caller) error { return s.operate(w, r, c, kind) }
}

// operate runs one operator action (service.Act: the intent read once,
// the decision appended to it) and answers with the intent the action
// left. With a token the operator is the token's name, whatever the body
// says; in dev mode the body names the operator.
func (s *Server) operate(w http.ResponseWriter, r *http.Request, c *service.Caller, kind string) error {
	id := r.PathValue("id")
	b, prob := parseAction(w, r, kind == "")
	if prob != nil {
		return prob
	}
	if kind == "" {
		var err error
		if kind, err = service.ResolutionAction(b.Resolution); err != nil {
			return err
		}
	}
	h, i, err := s.cfg.Service.Act(r.Context(), *c, id, service.Action{Kind: kind, Reason: b.Reason,
		ExternalID: b.ExternalID, LiveURL: b.LiveURL, Operator: b.Operator})
	switch {
	case err == nil:
	case errors.Is(err, service.ErrNotAllowed):
		// Refused on the state just read (the intent is unchanged).
		return newProblem(http.StatusConflict, ProbNotAllowed, "the intent is "+string(i.State)+"; this action is not allowed there").
			withIntent(i.ID, string(i.State))
	case errors.Is(err, service.ErrConflict):
		return newProblem(http.StatusConflict, ProbConflict, "the intent changed while the action was recorded; reload and decide again").withIntent(id, "")
	default:
		return intentProblem(id, err)
	}
	return writeDetail(w, http.StatusOK, h, i)
}
