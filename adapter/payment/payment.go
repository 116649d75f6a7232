package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
)

// DefaultTimeout is the timeout of the default HTTP client.
const DefaultTimeout = 10 * time.Second

// Config configures an Adapter.
type Config struct {
	// BaseURL is the API root, e.g. https://api.payments.example (http or
	// https, no credentials, query or fragment).
	BaseURL string
	// Token is the bearer token sent to the API (and only to its origin).
	Token string
	// Client is the HTTP client; default: DefaultTimeout, redirects not
	// followed. It must not retry.
	Client *http.Client
	// Status classifies HTTP statuses; default adapter.DefaultStatusPolicy().
	// 409 (same key in flight), 422 and a 400 idempotency_error (key
	// reused with another body) are unknown whatever it says.
	Status adapter.StatusPolicy
	// KeyRetention is how long the API keeps an Idempotency-Key from its
	// first receipt (required, > 0; Stripe: 24h).
	KeyRetention time.Duration
}

// Adapter talks to one payments API.
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
	return adapter.ConfigError("payment", field, reason)
}

// New validates cfg, fills its defaults and returns an Adapter. Errors name
// the field (config.BaseURL, config.Token, config.KeyRetention) and never
// echo its value.
func New(cfg Config) (*Adapter, error) {
	u, err := adapter.CheckEndpoint("payment", cfg.BaseURL, cfg.Token)
	if err != nil {
		return nil, err
	}
	if cfg.KeyRetention <= 0 {
		return nil, configError("KeyRetention", "is required and must be positive (the API's documented Idempotency-Key retention)")
	}
	if cfg.Client == nil {
		cfg.Client = adapter.NewHTTPClient(DefaultTimeout)
	}
	if cfg.Status.Definite4xx == nil && cfg.Status.Retryable4xx == nil {
		cfg.Status = adapter.DefaultStatusPolicy()
	}
	return &Adapter{cfg: cfg, base: strings.TrimRight(u.String(), "/"), origin: u.Scheme + "://" + u.Host}, nil
}

// Capabilities: Idempotency-Key with a known retention, a status lookup by
// key, no search.
func (a *Adapter) Capabilities() adapter.Capabilities {
	return adapter.Capabilities{
		IdempotencyKey: true,
		KeyRetention:   a.cfg.KeyRetention,
		StatusQuery:    true,
		Search:         false,
	}
}

// --- payload ---

// MaxCustomerLen and MaxDescriptionLen bound the string fields.
const (
	MaxCustomerLen    = 255
	MaxDescriptionLen = 1000
)

// payload is the route's intent payload; an empty description is omitted.
type payload struct {
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Customer    string `json:"customer"`
	Description string `json:"description,omitempty"`
}

// NormalizePayload validates a caller's payload and returns its canonical
// form (canon/v1 of {"amount","currency","customer"[,"description"]}):
//
//   - amount: an integer > 0 in the currency's smallest unit
//   - currency: three lowercase letters (ISO 4217, e.g. "jpy")
//   - customer: a non-empty string without control characters
//   - description: optional string; empty is the same as absent and is
//     left out
//
// Errors are *events.FieldError naming the field (payload.amount, ...).
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
	m, err := adapter.PayloadObject(raw, "amount", "currency", "customer", "description")
	if err != nil {
		return p, err
	}

	am, ok := m["amount"]
	if !ok {
		return p, adapter.PayloadError("payload.amount", "is required")
	}
	n, err := strconv.ParseInt(string(am), 10, 64)
	if err != nil || n <= 0 {
		return p, adapter.PayloadError("payload.amount", "must be an integer > 0 in the currency's smallest unit")
	}
	p.Amount = n

	cur, ok := m["currency"]
	if !ok {
		return p, adapter.PayloadError("payload.currency", "is required")
	}
	if string(cur) == "null" || json.Unmarshal(cur, &p.Currency) != nil || !isLowerISO4217(p.Currency) {
		return p, adapter.PayloadError("payload.currency", `must be three lowercase letters (ISO 4217, e.g. "jpy")`)
	}

	cu, ok := m["customer"]
	if !ok {
		return p, adapter.PayloadError("payload.customer", "is required")
	}
	if string(cu) == "null" || json.Unmarshal(cu, &p.Customer) != nil {
		return p, adapter.PayloadError("payload.customer", "must be a string")
	}
	if strings.TrimSpace(p.Customer) == "" || len(p.Customer) > MaxCustomerLen || !adapter.ValidHeaderValue(p.Customer) {
		return p, adapter.PayloadError("payload.customer", "must be 1 to 255 bytes without control characters")
	}

	if d, ok := m["description"]; ok {
		if string(d) == "null" || json.Unmarshal(d, &p.Description) != nil {
			return p, adapter.PayloadError("payload.description", "must be a string")
		}
		if len(p.Description) > MaxDescriptionLen {
			return p, adapter.PayloadError("payload.description", "must be at most 1000 bytes")
		}
	}
	return p, nil
}

func isLowerISO4217(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return true
}

// canonicalPayload is the canon/v1 form of p: what NormalizePayload returns
// and what Status and Get rebuild from a charge.
func canonicalPayload(p payload) (json.RawMessage, error) {
	return adapter.CanonicalJSON(p)
}

// --- HTTP ---

func (a *Adapter) chargeURL(id string) string {
	return a.base + "/v1/charges/" + url.PathEscape(id)
}

// apiCharge is a charge as the API returns it.
type apiCharge struct {
	ID          string `json:"id"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Customer    string `json:"customer"`
	Description string `json:"description"`
	Status      string `json:"status"`
	Created     int64  `json:"created"`
}

func (c apiCharge) payload() (json.RawMessage, error) {
	return canonicalPayload(payload{Amount: c.Amount, Currency: c.Currency, Customer: c.Customer, Description: c.Description})
}

// apiError is the API's error body.
type apiError struct {
	Error struct {
		Type string `json:"type"`
		Code string `json:"code"`
	} `json:"error"`
}

// Write creates the charge: one POST /v1/charges with Idempotency-Key =
// req.IdempotencyKey (the same on every attempt). It never retries.
// Failures are *adapter.CallError:
//
//   - 409: Unknown, code idempotency_key_in_flight - a request with this
//     key is still executing; it may yet charge. Never a rejection.
//   - 422, or 400 with error type idempotency_error (Stripe): Unknown,
//     code adapter.CodeKeyReused - the key is bound to another body: an
//     earlier request with the key reached the API and may have charged.
//     Evidence of an earlier request, never a rejection.
//   - a success whose charge is not the requested one, or not
//     "succeeded": Unknown (settled by Status)
//   - other statuses: Config.Status; lost responses: adapter.Do
func (a *Adapter) Write(ctx context.Context, req adapter.WriteRequest) (adapter.WriteResult, error) {
	p, err := parsePayload(req.Payload)
	if err != nil {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_payload", err.Error())
	}
	if req.IdempotencyKey == "" {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_request", "the write request has no idempotency key; a charge is never sent without one")
	}
	for name, v := range map[string]string{"idempotency key": req.IdempotencyKey, "attempt id": req.AttemptID} {
		if !adapter.ValidHeaderValue(v) {
			return adapter.WriteResult{}, adapter.InvalidRequest("invalid_request", "the "+name+" contains control characters")
		}
	}
	body, err := canonicalPayload(p)
	if err != nil {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_request", "cannot encode the request body")
	}
	hreq, err := adapter.NewRequest(ctx, http.MethodPost, a.base+"/v1/charges", body)
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
	return a.writeOutcome(resp, body)
}

func (a *Adapter) writeOutcome(resp *adapter.Response, sent json.RawMessage) (adapter.WriteResult, error) {
	code := resp.StatusCode
	switch code {
	case http.StatusConflict:
		return adapter.WriteResult{}, &adapter.CallError{Class: adapter.Unknown, Code: "idempotency_key_in_flight", StatusCode: code,
			Message: "a request with this idempotency key is still being processed; it may yet charge"}
	case http.StatusUnprocessableEntity:
		return adapter.WriteResult{}, keyReused(code)
	}
	var e apiError
	if code == http.StatusBadRequest && json.Unmarshal(resp.Body, &e) == nil && e.Error.Type == "idempotency_error" {
		return adapter.WriteResult{}, keyReused(code)
	}
	if err := a.cfg.Status.Classify(code); err != nil {
		var ce *adapter.CallError
		var e apiError
		if errors.As(err, &ce) && ce.Class == adapter.Rejected && !ce.Retryable &&
			json.Unmarshal(resp.Body, &e) == nil && isCode(e.Error.Code) {
			ce.Code = e.Error.Code
		}
		return adapter.WriteResult{}, err
	}
	var c apiCharge
	if err := json.Unmarshal(resp.Body, &c); err != nil || c.ID == "" {
		return adapter.WriteResult{}, adapter.Unparseable(code, "the write")
	}
	if pl, err := c.payload(); err != nil || !bytes.Equal(pl, sent) {
		return adapter.WriteResult{}, &adapter.CallError{Class: adapter.Unknown, Code: "response_mismatch", StatusCode: code,
			Message: "the charge in the response is not the requested one"}
	}
	if c.Status != "succeeded" {
		return adapter.WriteResult{}, &adapter.CallError{Class: adapter.Unknown, Code: "charge_not_succeeded", StatusCode: code,
			Message: "the charge exists but has not succeeded (yet)"}
	}
	return adapter.WriteResult{ExternalID: c.ID, LiveURL: a.chargeURL(c.ID), StatusCode: code}, nil
}

// keyReused is the answer that the key is bound to another body: an
// earlier request with it reached the API.
func keyReused(code int) error {
	return &adapter.CallError{Class: adapter.Unknown, Code: adapter.CodeKeyReused, StatusCode: code,
		Message: "the API has this idempotency key bound to another request body: an earlier request with the key reached it and may have charged"}
}

// isCode accepts an API error code worth keeping: short snake_case.
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

// readCharge GETs u and decodes a charge; adapter.ErrNotFound on 404.
func (a *Adapter) readCharge(ctx context.Context, u, what string) (apiCharge, error) {
	resp, err := a.get(ctx, u)
	if err != nil {
		return apiCharge{}, errors.Errorf("payment: %s: %w", what, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return apiCharge{}, adapter.ErrNotFound
	}
	if err := a.cfg.Status.Classify(resp.StatusCode); err != nil {
		return apiCharge{}, errors.Errorf("payment: %s: %w", what, err)
	}
	var c apiCharge
	if err := json.Unmarshal(resp.Body, &c); err != nil || c.ID == "" {
		return apiCharge{}, errors.Errorf("payment: %s: %w", what, adapter.Unparseable(resp.StatusCode, "a "+what))
	}
	return c, nil
}

// Status looks the charge up by q.IdempotencyKey (GET
// /v1/charges?idempotency_key=K): completed when a succeeded charge is
// found, processing for a pending one, failed for a failed one;
// adapter.ErrNotFound when the API has no charge for the key. Payload is
// the charge rebuilt in the intent's canonical shape.
func (a *Adapter) Status(ctx context.Context, q adapter.StatusQuery) (adapter.StatusResult, error) {
	if q.IdempotencyKey == "" {
		return adapter.StatusResult{}, errors.New("payment: status: the idempotency key is required")
	}
	c, err := a.readCharge(ctx, a.base+"/v1/charges?"+url.Values{"idempotency_key": {q.IdempotencyKey}}.Encode(), "status")
	if err != nil {
		return adapter.StatusResult{}, err
	}
	out := adapter.StatusResult{ExternalID: c.ID, LiveURL: a.chargeURL(c.ID)}
	switch c.Status {
	case "succeeded":
		out.State = adapter.StatusCompleted
	case "pending":
		out.State = adapter.StatusProcessing
	case "failed":
		out.State, out.Code = adapter.StatusFailed, "charge_failed"
	default:
		return adapter.StatusResult{}, errors.Errorf("payment: status: %w", adapter.Unparseable(http.StatusOK, "a status lookup"))
	}
	if c.Created > 0 {
		out.ReceivedAt = time.Unix(c.Created, 0).UTC()
	}
	out.Payload, _ = c.payload() // nil when unbuildable: the hash check then fails
	return out, nil
}

// Search is not offered by the payments API: nil, nil.
func (a *Adapter) Search(context.Context, adapter.SearchQuery) ([]adapter.Record, error) {
	return nil, nil
}

// Get reads a charge back by id; adapter.ErrNotFound when absent. Payload
// is the charge in the intent's canonical shape.
func (a *Adapter) Get(ctx context.Context, externalID string) (adapter.Record, error) {
	if externalID == "" {
		return adapter.Record{}, errors.New("payment: get: the external id is required")
	}
	c, err := a.readCharge(ctx, a.chargeURL(externalID), "get")
	if err != nil {
		return adapter.Record{}, err
	}
	pl, err := c.payload()
	if err != nil {
		return adapter.Record{}, errors.Errorf("payment: get: charge %q: cannot rebuild its payload: %w", c.ID, err)
	}
	r := adapter.Record{ExternalID: c.ID, LiveURL: a.chargeURL(c.ID), Payload: pl}
	if c.Created > 0 {
		r.CreatedAt = time.Unix(c.Created, 0).UTC()
	}
	return r, nil
}

// Probe reads a charge URL of this API and returns its HTTP status (200 for
// a known charge). Charges have no public page, so the probe is
// authenticated and refuses any URL outside the configured API origin.
func (a *Adapter) Probe(ctx context.Context, liveURL string) (int, error) {
	u, err := url.Parse(liveURL)
	if err != nil || u.User != nil || u.Scheme+"://"+u.Host != a.origin || !strings.HasPrefix(u.String(), a.base+"/v1/charges/") {
		return 0, errors.New("payment: probe: not a charge URL of the configured API")
	}
	resp, err := a.get(ctx, u.String())
	if err != nil {
		return 0, errors.Errorf("payment: probe: %w", err)
	}
	return resp.StatusCode, nil
}
