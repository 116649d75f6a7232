package booking

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// DefaultTimeout is the timeout of the default HTTP client.
const DefaultTimeout = 10 * time.Second

// Config configures an Adapter.
type Config struct {
	// BaseURL is the API root, e.g. https://bookings.example.com (http or
	// https, no credentials, query or fragment).
	BaseURL string
	// Token is the bearer token sent to the API (and only to its origin).
	Token string
	// Client is the HTTP client; default: DefaultTimeout, redirects not
	// followed. It must not retry.
	Client *http.Client
	// Status classifies HTTP statuses; default adapter.DefaultStatusPolicy().
	// A 409 version_conflict, a 202 and a failure with partial effects are
	// classified by this package whatever the policy says.
	Status adapter.StatusPolicy
	// KeyRetention is how long the service keeps an Idempotency-Key from
	// its first receipt (required, > 0): settle retries with the same key
	// only inside it.
	KeyRetention time.Duration
	// ReflectionDelay is how long a completed change may stay invisible to
	// the status query (>= 0).
	ReflectionDelay time.Duration
}

// Adapter talks to one booking service.
type Adapter struct {
	cfg    Config
	base   string
	origin string // scheme://host of BaseURL: the only place the token goes
}

var (
	_ adapter.Adapter           = (*Adapter)(nil)
	_ adapter.StatusQuerier     = (*Adapter)(nil)
	_ adapter.PayloadNormalizer = (*Adapter)(nil)
)

func configError(field, reason string) error {
	return adapter.ConfigError("booking", field, reason)
}

// New validates cfg, fills its defaults and returns an Adapter. Errors name
// the field (config.BaseURL, config.Token, config.KeyRetention, ...) and
// never echo its value.
func New(cfg Config) (*Adapter, error) {
	u, err := adapter.CheckEndpoint("booking", cfg.BaseURL, cfg.Token)
	if err != nil {
		return nil, err
	}
	if cfg.KeyRetention <= 0 {
		return nil, configError("KeyRetention", "is required and must be positive (the service's documented Idempotency-Key retention)")
	}
	if cfg.ReflectionDelay < 0 {
		return nil, configError("ReflectionDelay", "must not be negative")
	}
	if cfg.Client == nil {
		cfg.Client = adapter.NewHTTPClient(DefaultTimeout)
	}
	if cfg.Status.Definite4xx == nil && cfg.Status.Retryable4xx == nil {
		cfg.Status = adapter.DefaultStatusPolicy()
	}
	return &Adapter{cfg: cfg, base: strings.TrimRight(u.String(), "/"), origin: u.Scheme + "://" + u.Host}, nil
}

// Capabilities: Idempotency-Key with a known retention, a status query by
// request id with a reflection delay, no search.
func (a *Adapter) Capabilities() adapter.Capabilities {
	return adapter.Capabilities{
		IdempotencyKey:  true,
		KeyRetention:    a.cfg.KeyRetention,
		StatusQuery:     true,
		ReflectionDelay: a.cfg.ReflectionDelay,
		Search:          false,
	}
}

// --- payload ---

// MaxBookingIDLen bounds booking_id.
const MaxBookingIDLen = 128

// payload is the route's intent payload. Change is canonical JSON.
type payload struct {
	BookingID       string          `json:"booking_id"`
	Change          json.RawMessage `json:"change"`
	ExpectedVersion int64           `json:"expected_version"`
}

// NormalizePayload validates a caller's payload and returns its canonical
// form (canon/v1 of {"booking_id","change","expected_version"}):
//
//   - booking_id: 1..128 characters of A-Z a-z 0-9 . _ : -
//   - expected_version: an integer >= 0, the version the change was
//     approved against (a stale one is refused by the service with 409)
//   - change: a non-empty JSON object, the fields to set (null deletes)
//
// Errors are *events.FieldError naming the field (payload.booking_id,
// payload.change, payload["x y"], ...).
func (a *Adapter) NormalizePayload(raw json.RawMessage) (json.RawMessage, error) {
	return NormalizePayload(raw)
}

// NormalizePayload is Adapter.NormalizePayload without an Adapter.
func NormalizePayload(raw json.RawMessage) (json.RawMessage, error) {
	p, err := parsePayload(raw)
	if err != nil {
		return nil, err
	}
	return canonicalPayload(p)
}

func parsePayload(raw []byte) (payload, error) {
	var p payload
	m, err := adapter.PayloadObject(raw, "booking_id", "expected_version", "change")
	if err != nil {
		return p, err
	}

	id, ok := m["booking_id"]
	if !ok {
		return p, adapter.PayloadError("payload.booking_id", "is required")
	}
	if string(id) == "null" || json.Unmarshal(id, &p.BookingID) != nil {
		return p, adapter.PayloadError("payload.booking_id", "must be a string")
	}
	if !validBookingID(p.BookingID) {
		return p, adapter.PayloadError("payload.booking_id", "must be 1 to 128 characters of A-Z a-z 0-9 . _ : -")
	}

	v, ok := m["expected_version"]
	if !ok {
		return p, adapter.PayloadError("payload.expected_version", "is required (the version the change was approved against)")
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 {
		return p, adapter.PayloadError("payload.expected_version", "must be an integer >= 0")
	}
	p.ExpectedVersion = n

	ch, ok := m["change"]
	if !ok {
		return p, adapter.PayloadError("payload.change", "is required")
	}
	if ch[0] != '{' {
		return p, adapter.PayloadError("payload.change", "must be a JSON object")
	}
	if string(ch) == "{}" {
		return p, adapter.PayloadError("payload.change", "must change at least one field")
	}
	p.Change = ch
	return p, nil
}

func validBookingID(s string) bool {
	if s == "" || len(s) > MaxBookingIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return s != "." && s != ".."
}

// canonicalPayload is the canon/v1 form of p: what NormalizePayload returns
// and what Status rebuilds from the service's record.
func canonicalPayload(p payload) (json.RawMessage, error) {
	return adapter.CanonicalJSON(p)
}

// ExternalID names a booking at a version: "<booking_id>@v<version>".
func ExternalID(bookingID string, version int64) string {
	return bookingID + "@v" + strconv.FormatInt(version, 10)
}

// --- HTTP ---

func (a *Adapter) bookingURL(id string) string {
	return a.base + "/v1/bookings/" + url.PathEscape(id)
}

// putBody is what the service receives.
type putBody struct {
	Account         string          `json:"account,omitempty"`
	RequestID       string          `json:"request_id"`
	ExpectedVersion int64           `json:"expected_version"`
	Change          json.RawMessage `json:"change"`
}

// putAnswer is any answer to a PUT: success, processing or error.
type putAnswer struct {
	BookingID      string   `json:"booking_id"`
	Version        int64    `json:"version"`
	RequestID      string   `json:"request_id"`
	Status         string   `json:"status"`
	Error          string   `json:"error"`
	CurrentVersion *int64   `json:"current_version"`
	PartialEffects []string `json:"partial_effects"`
}

// Write sends the change: one PUT /v1/bookings/{booking_id} with
// Idempotency-Key = req.IdempotencyKey (the same on every attempt) and
// request_id = req.RequestID; req.AttemptID only travels as a correlation
// header. It never retries. Failures are *adapter.CallError:
//
//   - 409 version_conflict: Rejected, code version_conflict (nothing was
//     applied; the booking was changed by someone else)
//   - 422 idempotency_key_reused: Unknown, code adapter.CodeKeyReused
//     (the key is bound to another request: evidence that an earlier
//     request with the key reached the service, never a rejection)
//   - 202 processing: Unknown, code accepted_processing (the status query
//     will tell when it completes)
//   - any answer listing partial_effects: Unknown, code
//     failed_with_partial_effects (a failure that is not "nothing
//     happened"; the status query reports it as failed with the effects)
//   - other statuses: Config.Status; lost responses: adapter.Do
func (a *Adapter) Write(ctx context.Context, req adapter.WriteRequest) (adapter.WriteResult, error) {
	p, err := parsePayload(req.Payload)
	if err != nil {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_payload", err.Error())
	}
	if req.RequestID == "" {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_request", "the write request has no request id")
	}
	if req.IdempotencyKey == "" {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_request", "the write request has no idempotency key; the booking service requires one")
	}
	for name, v := range map[string]string{"idempotency key": req.IdempotencyKey, "attempt id": req.AttemptID} {
		if !adapter.ValidHeaderValue(v) {
			return adapter.WriteResult{}, adapter.InvalidRequest("invalid_request", "the "+name+" contains control characters")
		}
	}
	body, err := json.Marshal(putBody{Account: req.Account, RequestID: req.RequestID, ExpectedVersion: p.ExpectedVersion, Change: p.Change})
	if err != nil {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_request", "cannot encode the request body")
	}
	hreq, err := adapter.NewRequest(ctx, http.MethodPut, a.bookingURL(p.BookingID), body)
	if err != nil {
		return adapter.WriteResult{}, err
	}
	hreq.Header.Set("Authorization", "Bearer "+a.cfg.Token)
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("Idempotency-Key", req.IdempotencyKey)
	if req.AttemptID != "" {
		hreq.Header.Set("X-Settle-Attempt", req.AttemptID)
		hreq.Header.Set("X-Request-Id", req.AttemptID)
	}
	resp, err := adapter.Do(ctx, a.cfg.Client, hreq)
	if err != nil {
		return adapter.WriteResult{}, err
	}
	return a.writeOutcome(resp, p, req.RequestID)
}

func (a *Adapter) writeOutcome(resp *adapter.Response, p payload, requestID string) (adapter.WriteResult, error) {
	code := resp.StatusCode
	var ans putAnswer
	parsed := json.Unmarshal(resp.Body, &ans) == nil
	if parsed && len(ans.PartialEffects) > 0 {
		return adapter.WriteResult{}, &adapter.CallError{Class: adapter.Unknown, Code: "failed_with_partial_effects", StatusCode: code,
			Message: fmt.Sprintf("the change failed but left %d partial effect(s); the status query has them", len(ans.PartialEffects))}
	}
	switch {
	case code == http.StatusOK:
		if !parsed || ans.Status != "completed" || ans.BookingID != p.BookingID || ans.RequestID != requestID || ans.Version <= 0 {
			return adapter.WriteResult{}, adapter.Unparseable(code, "the write")
		}
		return adapter.WriteResult{ExternalID: ExternalID(p.BookingID, ans.Version), LiveURL: a.bookingURL(p.BookingID), StatusCode: code}, nil
	case code == http.StatusAccepted:
		return adapter.WriteResult{}, &adapter.CallError{Class: adapter.Unknown, Code: "accepted_processing", StatusCode: code,
			Message: "the service accepted the change and is still processing it; completion is not confirmed"}
	case code == http.StatusConflict && parsed && ans.Error == "version_conflict":
		msg := fmt.Sprintf("the booking is no longer at the approved version %d; nothing was applied or overwritten", p.ExpectedVersion)
		if ans.CurrentVersion != nil {
			msg = fmt.Sprintf("the booking is at version %d, not the approved version %d; nothing was applied or overwritten", *ans.CurrentVersion, p.ExpectedVersion)
		}
		return adapter.WriteResult{}, &adapter.CallError{Class: adapter.Rejected, Code: "version_conflict", StatusCode: code, Message: msg}
	case code == http.StatusUnprocessableEntity && parsed && ans.Error == "idempotency_key_reused":
		return adapter.WriteResult{}, &adapter.CallError{Class: adapter.Unknown, Code: adapter.CodeKeyReused, StatusCode: code,
			Message: "the service has this idempotency key bound to another request: an earlier request with the key reached it and may have applied"}
	}
	err := a.cfg.Status.Classify(code)
	if err == nil { // another 2xx: not the contract, prove it by status
		return adapter.WriteResult{}, &adapter.CallError{Class: adapter.Unknown, Code: "unexpected_status", StatusCode: code,
			Message: "the service answered an unexpected success status"}
	}
	var ce *adapter.CallError
	if errors.As(err, &ce) && ce.Class == adapter.Rejected && !ce.Retryable && parsed && isCode(ans.Error) {
		ce.Code = ans.Error
	}
	return adapter.WriteResult{}, err
}

// isCode accepts a service error code worth keeping: short snake_case.
func isCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '_' && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

// get sends one authenticated GET to the API and returns the response of
// any status.
func (a *Adapter) get(ctx context.Context, u string) (*adapter.Response, error) {
	return adapter.AuthGet(ctx, a.cfg.Client, a.cfg.Token, u)
}

// statusAnswer is the service's record of one request.
type statusAnswer struct {
	Account         string           `json:"account"`
	RequestID       string           `json:"request_id"`
	State           string           `json:"state"`
	BookingID       string           `json:"booking_id"`
	ExpectedVersion *int64           `json:"expected_version"`
	AppliedVersion  int64            `json:"applied_version"`
	CurrentVersion  int64            `json:"current_version"`
	Change          json.RawMessage  `json:"change"`
	Code            string           `json:"code"`
	PartialEffects  []string         `json:"partial_effects"`
	ReceivedAt      adapter.JSONTime `json:"received_at"`
}

// Status asks the service for its record of q.RequestID made by
// q.Account (GET /v1/requests/{request_id}?account=...: request ids are the
// callers', and two accounts may use one); adapter.ErrNotFound when it
// has none (which, within ReflectionDelay of the attempt, proves nothing)
// or when its record is another account's. Account is the answer's. Payload is the
// canonical payload of what the service applied (or is applying), so its
// hash equals the intent's exactly when the applied change is the approved
// one. Version is the booking's current version, AppliedVersion the one
// this request produced; they differ when someone changed it later.
func (a *Adapter) Status(ctx context.Context, q adapter.StatusQuery) (adapter.StatusResult, error) {
	if q.RequestID == "" {
		return adapter.StatusResult{}, errors.New("booking: status: the request id is required")
	}
	u := a.base + "/v1/requests/" + url.PathEscape(q.RequestID)
	if q.Account != "" {
		u += "?account=" + url.QueryEscape(q.Account)
	}
	resp, err := a.get(ctx, u)
	if err != nil {
		return adapter.StatusResult{}, errors.Errorf("booking: status: %w", err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return adapter.StatusResult{}, adapter.ErrNotFound
	}
	if err := a.cfg.Status.Classify(resp.StatusCode); err != nil {
		return adapter.StatusResult{}, errors.Errorf("booking: status: %w", err)
	}
	var s statusAnswer
	if err := json.Unmarshal(resp.Body, &s); err != nil || s.RequestID != q.RequestID || s.BookingID == "" {
		return adapter.StatusResult{}, errors.Errorf("booking: status: %w", adapter.Unparseable(resp.StatusCode, "a status query"))
	}
	switch s.State {
	case adapter.StatusCompleted, adapter.StatusProcessing, adapter.StatusFailed:
	default:
		return adapter.StatusResult{}, errors.Errorf("booking: status: %w", adapter.Unparseable(resp.StatusCode, "a status query"))
	}
	if q.Account != "" && s.Account != q.Account {
		return adapter.StatusResult{}, adapter.ErrNotFound // another account's request with the same id
	}
	out := adapter.StatusResult{
		Account:        s.Account,
		State:          s.State,
		LiveURL:        a.bookingURL(s.BookingID),
		Code:           s.Code,
		PartialEffects: s.PartialEffects,
		ReceivedAt:     s.ReceivedAt.Time,
	}
	if s.CurrentVersion > 0 {
		out.Version = strconv.FormatInt(s.CurrentVersion, 10)
	}
	if s.AppliedVersion > 0 {
		out.AppliedVersion = strconv.FormatInt(s.AppliedVersion, 10)
		out.ExternalID = ExternalID(s.BookingID, s.AppliedVersion)
	}
	// The payload is evidence: when the record lacks a precondition or its
	// change is not an object, it is left out (or differs) and the hash
	// check fails rather than guessing.
	if s.ExpectedVersion != nil && len(s.Change) > 0 {
		if ch, err := events.Canonicalize(s.Change); err == nil && ch[0] == '{' {
			out.Payload, _ = canonicalPayload(payload{BookingID: s.BookingID, Change: ch, ExpectedVersion: *s.ExpectedVersion})
		}
	}
	return out, nil
}

// Search is not offered by the booking service: nil, nil.
func (a *Adapter) Search(context.Context, adapter.SearchQuery) ([]adapter.Record, error) {
	return nil, nil
}

// apiBooking is a booking as the service returns it.
type apiBooking struct {
	BookingID        string           `json:"booking_id"`
	Version          int64            `json:"version"`
	Data             json.RawMessage  `json:"data"`
	UpdatedByRequest string           `json:"updated_by_request"`
	UpdatedAt        adapter.JSONTime `json:"updated_at"`
}

// currentState is the Payload of a Get record: the booking as it is now.
type currentState struct {
	BookingID        string          `json:"booking_id"`
	Data             json.RawMessage `json:"data"`
	UpdatedByRequest string          `json:"updated_by_request"`
	Version          int64           `json:"version"`
}

// Get reads a booking's current state. externalID is a booking id or an
// ExternalID ("B-001@v8"; the version is ignored: the booking is read as it
// is now). The record's ExternalID carries the current version, CreatedAt is
// the last update and Payload is canon/v1 of {"booking_id","data",
// "updated_by_request","version"}: the current state, not a change, so it
// never hashes like an intent payload (a booking write is proven by Status).
func (a *Adapter) Get(ctx context.Context, externalID string) (adapter.Record, error) {
	id, _, _ := strings.Cut(externalID, "@")
	if id == "" {
		return adapter.Record{}, errors.New("booking: get: the external id is required")
	}
	resp, err := a.get(ctx, a.bookingURL(id))
	if err != nil {
		return adapter.Record{}, errors.Errorf("booking: get: %w", err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return adapter.Record{}, adapter.ErrNotFound
	}
	if err := a.cfg.Status.Classify(resp.StatusCode); err != nil {
		return adapter.Record{}, errors.Errorf("booking: get: %w", err)
	}
	var b apiBooking
	if err := json.Unmarshal(resp.Body, &b); err != nil || b.BookingID != id || len(b.Data) == 0 {
		return adapter.Record{}, errors.Errorf("booking: get: %w", adapter.Unparseable(resp.StatusCode, "a get"))
	}
	raw, err := json.Marshal(currentState{BookingID: b.BookingID, Data: b.Data, UpdatedByRequest: b.UpdatedByRequest, Version: b.Version})
	if err != nil {
		return adapter.Record{}, errors.Errorf("booking: get: %w", adapter.Unparseable(resp.StatusCode, "a get"))
	}
	pl, err := events.Canonicalize(raw)
	if err != nil {
		return adapter.Record{}, errors.Errorf("booking: get: booking %q: cannot canonicalise its state: %w", id, err)
	}
	return adapter.Record{
		ExternalID: ExternalID(b.BookingID, b.Version),
		LiveURL:    a.bookingURL(b.BookingID),
		CreatedAt:  b.UpdatedAt.Time,
		Payload:    pl,
	}, nil
}

// Probe reads a booking URL of this API and returns its HTTP status (200
// for a known booking). The booking service has no public page, so unlike
// a social post the probe is authenticated - and therefore refuses any URL
// outside the configured API origin, so the token never leaves it.
func (a *Adapter) Probe(ctx context.Context, liveURL string) (int, error) {
	u, err := url.Parse(liveURL)
	if err != nil || u.User != nil || u.Scheme+"://"+u.Host != a.origin || !strings.HasPrefix(u.String(), a.base+"/v1/bookings/") {
		return 0, errors.New("booking: probe: not a booking URL of the configured API")
	}
	resp, err := a.get(ctx, u.String())
	if err != nil {
		return 0, errors.Errorf("booking: probe: %w", err)
	}
	return resp.StatusCode, nil
}
