package social

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// DefaultTimeout is the timeout of the default HTTP client.
const DefaultTimeout = 10 * time.Second

// MaxSearchPages bounds how many list pages one Search reads.
const MaxSearchPages = 100

// Config configures an Adapter.
type Config struct {
	// BaseURL is the API root, e.g. https://api.example.com (http or https,
	// no credentials, query or fragment).
	BaseURL string
	// Token is the bearer token sent to the API (never to live URLs).
	Token string
	// Client is the HTTP client; default: 10s timeout, redirects not
	// followed. It must not retry.
	Client *http.Client
	// Status classifies HTTP statuses; default adapter.DefaultStatusPolicy().
	Status adapter.StatusPolicy
	// IdempotencyKey: the API deduplicates POSTs by Idempotency-Key for
	// KeyRetention (required, > 0, when set).
	IdempotencyKey bool
	KeyRetention   time.Duration
	// OmitsBody: the list endpoint returns posts without body and assets;
	// Search records are then Partial and must be read with Get.
	OmitsBody bool
}

// Adapter talks to one social posting API.
type Adapter struct {
	cfg  Config
	base string
}

var (
	_ adapter.Adapter           = (*Adapter)(nil)
	_ adapter.PayloadNormalizer = (*Adapter)(nil)
	_ adapter.Resembler         = (*Adapter)(nil)
)

func configError(field, reason string) error {
	return fmt.Errorf("social: %w", &events.FieldError{Field: "config." + field, Reason: reason})
}

// New validates cfg, fills its defaults and returns an Adapter. Errors name
// the field (config.BaseURL, config.Token, ...) and never echo its value.
func New(cfg Config) (*Adapter, error) {
	if cfg.BaseURL == "" {
		return nil, configError("BaseURL", "is required")
	}
	u, err := url.Parse(cfg.BaseURL)
	switch {
	case err != nil:
		return nil, configError("BaseURL", "is not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, configError("BaseURL", "must be an http or https URL")
	case u.Host == "":
		return nil, configError("BaseURL", "has no host")
	case u.User != nil:
		return nil, configError("BaseURL", "must not carry credentials; use Token")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, configError("BaseURL", "must not have a query or a fragment")
	}
	if cfg.Token == "" {
		return nil, configError("Token", "is required")
	}
	if !validHeaderValue(cfg.Token) || strings.ContainsAny(cfg.Token, " \t") {
		return nil, configError("Token", "must be printable and contain no white space")
	}
	if cfg.KeyRetention < 0 {
		return nil, configError("KeyRetention", "must not be negative")
	}
	if cfg.IdempotencyKey && cfg.KeyRetention == 0 {
		return nil, configError("KeyRetention", "is required when IdempotencyKey is set")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{
			Timeout: DefaultTimeout,
			// A redirect is an answer, not something to follow: a 3xx to a
			// write is ambiguous, and a live URL redirecting to a login page
			// is not a public page.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if cfg.Status.Definite4xx == nil && cfg.Status.Retryable4xx == nil {
		cfg.Status = adapter.DefaultStatusPolicy()
	}
	return &Adapter{cfg: cfg, base: strings.TrimRight(u.String(), "/")}, nil
}

// Capabilities: Search (by account and window), optional Idempotency-Key,
// no status query.
func (a *Adapter) Capabilities() adapter.Capabilities {
	return adapter.Capabilities{
		IdempotencyKey:  a.cfg.IdempotencyKey,
		KeyRetention:    a.cfg.KeyRetention,
		StatusQuery:     false,
		Search:          true,
		SearchOmitsBody: a.cfg.OmitsBody,
	}
}

// --- payload ---

// payload is the route's intent payload.
type payload struct {
	Assets []string `json:"assets"`
	Body   string   `json:"body"`
}

func payloadError(field, reason string) error {
	return &events.FieldError{Field: field, Reason: reason}
}

// NormalizePayload validates a caller's payload, {"body": non-empty string,
// "assets": [sha256 hex, ...] (optional)}, and returns its canonical form:
// canon/v1 of {"assets":[...],"body":"..."}, assets always present and in
// the given order. Errors are *events.FieldError naming the field
// (payload.body, payload.assets[2], ...).
func (a *Adapter) NormalizePayload(raw json.RawMessage) (json.RawMessage, error) {
	return NormalizePayload(raw)
}

// NormalizePayload is Adapter.NormalizePayload without an Adapter.
func NormalizePayload(raw json.RawMessage) (json.RawMessage, error) {
	p, err := parsePayload(raw)
	if err != nil {
		return nil, err
	}
	return canonicalPayload(p.Body, p.Assets)
}

func parsePayload(raw []byte) (payload, error) {
	var p payload
	if len(bytes.TrimSpace(raw)) == 0 {
		return p, payloadError("payload", "is required")
	}
	canon, err := events.Canonicalize(raw)
	if err != nil {
		var ce *events.CanonError
		if errors.As(err, &ce) {
			return p, payloadError("payload"+strings.TrimPrefix(ce.Path, "$"), ce.Reason)
		}
		return p, payloadError("payload", "is not canonicalizable")
	}
	if canon[0] != '{' {
		return p, payloadError("payload", "must be a JSON object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(canon, &m); err != nil {
		return p, payloadError("payload", "must be a JSON object")
	}
	var unknown []string
	for k := range m {
		if k != "body" && k != "assets" {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return p, payloadError(fieldPath("payload", unknown[0]), "is not a known field (known: body, assets)")
	}

	b, ok := m["body"]
	if !ok {
		return p, payloadError("payload.body", "is required")
	}
	if string(b) == "null" || json.Unmarshal(b, &p.Body) != nil {
		return p, payloadError("payload.body", "must be a string")
	}
	if strings.TrimSpace(p.Body) == "" {
		return p, payloadError("payload.body", "must not be empty")
	}

	p.Assets = []string{}
	if as, ok := m["assets"]; ok {
		var items []json.RawMessage
		if string(as) == "null" || json.Unmarshal(as, &items) != nil {
			return p, payloadError("payload.assets", "must be an array of sha256 hex strings")
		}
		for i, it := range items {
			field := "payload.assets[" + strconv.Itoa(i) + "]"
			var s string
			if string(it) == "null" || json.Unmarshal(it, &s) != nil {
				return p, payloadError(field, "must be a string")
			}
			if !isSHA256Hex(s) {
				return p, payloadError(field, "must be a sha256: 64 lowercase hex characters")
			}
			p.Assets = append(p.Assets, s)
		}
	}
	return p, nil
}

// fieldPath renders parent.key, or parent["key"] when key is not a plain
// identifier; long keys are cut.
func fieldPath(parent, key string) string {
	plain := key != ""
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			plain = false
			break
		}
	}
	if len(key) > 64 {
		key = strings.ToValidUTF8(key[:64], "") + "..."
		plain = false
	}
	if plain {
		return parent + "." + key
	}
	return parent + "[" + strconv.Quote(key) + "]"
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// canonicalPayload builds the canonical payload from a body and assets, as
// NormalizePayload does and as Search and Get rebuild it.
func canonicalPayload(body string, assets []string) (json.RawMessage, error) {
	if assets == nil {
		assets = []string{}
	}
	b, err := json.Marshal(payload{Assets: assets, Body: body})
	if err != nil {
		return nil, err
	}
	c, err := events.Canonicalize(b)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(c), nil
}

// --- HTTP ---

// apiPost is a post as the API returns it. Body is a pointer so that a
// listing without bodies is told apart from an empty body.
type apiPost struct {
	ID         string    `json:"id"`
	URL        string    `json:"url"`
	AuthorID   string    `json:"author_id"`
	Body       *string   `json:"body"`
	Assets     []string  `json:"assets"`
	ParentID   string    `json:"parent_id"`
	Visibility string    `json:"visibility"`
	CreatedAt  time.Time `json:"created_at"`
}

type createBody struct {
	Account  string   `json:"account"`
	Body     string   `json:"body"`
	Assets   []string `json:"assets,omitempty"`
	ParentID string   `json:"parent_id,omitempty"`
}

// validHeaderValue refuses control characters (CR, LF, NUL, ...), which
// net/http would refuse before sending.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

func invalidRequest(code, msg string) error {
	return &adapter.CallError{Class: adapter.NotSent, Code: code, Message: msg}
}

func unparseable(status int, what string) error {
	return &adapter.CallError{Class: adapter.Unknown, Code: "response_unparseable", StatusCode: status,
		Message: "the response to " + what + " cannot be parsed"}
}

// Write creates the post: one POST /v1/posts, never retried. Failures are
// *adapter.CallError; a write that cannot be built (bad payload, no account)
// is NotSent and not retryable.
func (a *Adapter) Write(ctx context.Context, req adapter.WriteRequest) (adapter.WriteResult, error) {
	p, err := parsePayload(req.Payload)
	if err != nil {
		return adapter.WriteResult{}, invalidRequest("invalid_payload", err.Error())
	}
	if req.Account == "" {
		return adapter.WriteResult{}, invalidRequest("invalid_request", "the write request has no account")
	}
	for name, v := range map[string]string{"idempotency key": req.IdempotencyKey, "attempt id": req.AttemptID} {
		if !validHeaderValue(v) {
			return adapter.WriteResult{}, invalidRequest("invalid_request", "the "+name+" contains control characters")
		}
	}
	body, err := json.Marshal(createBody{Account: req.Account, Body: p.Body, Assets: p.Assets, ParentID: req.ParentExternalID})
	if err != nil {
		return adapter.WriteResult{}, invalidRequest("invalid_request", "cannot encode the request body")
	}
	hreq, err := adapter.NewRequest(ctx, http.MethodPost, a.base+"/v1/posts", body)
	if err != nil {
		return adapter.WriteResult{}, err
	}
	hreq.Header.Set("Authorization", "Bearer "+a.cfg.Token)
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if req.IdempotencyKey != "" {
		hreq.Header.Set("Idempotency-Key", req.IdempotencyKey)
	}
	if req.AttemptID != "" {
		hreq.Header.Set("X-Settle-Attempt", req.AttemptID)
	}
	resp, err := adapter.Do(ctx, a.cfg.Client, hreq)
	if err != nil {
		return adapter.WriteResult{}, err
	}
	if err := a.cfg.Status.Classify(resp.StatusCode); err != nil {
		return adapter.WriteResult{}, err
	}
	var created apiPost
	if err := json.Unmarshal(resp.Body, &created); err != nil || created.ID == "" {
		return adapter.WriteResult{}, unparseable(resp.StatusCode, "the write")
	}
	return adapter.WriteResult{ExternalID: created.ID, LiveURL: created.URL, StatusCode: resp.StatusCode}, nil
}

// get sends one authenticated GET and returns the response of any status.
func (a *Adapter) get(ctx context.Context, u string) (*adapter.Response, error) {
	hreq, err := adapter.NewRequest(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Authorization", "Bearer "+a.cfg.Token)
	hreq.Header.Set("Accept", "application/json")
	return adapter.Do(ctx, a.cfg.Client, hreq)
}

// record turns an API post into a Record. listing says it came from the
// list endpoint, which omits bodies when OmitsBody is configured.
func (a *Adapter) record(p apiPost, listing bool) (adapter.Record, error) {
	r := adapter.Record{
		ExternalID: p.ID,
		LiveURL:    p.URL,
		AuthorID:   p.AuthorID,
		ParentID:   p.ParentID,
		Visibility: p.Visibility,
		CreatedAt:  p.CreatedAt,
	}
	if (listing && a.cfg.OmitsBody) || p.Body == nil {
		r.Partial = true
		return r, nil
	}
	pl, err := canonicalPayload(*p.Body, p.Assets)
	if err != nil {
		return adapter.Record{}, fmt.Errorf("social: post %q: cannot rebuild its payload: %w", p.ID, err)
	}
	r.Payload = pl
	return r, nil
}

// Search lists q.Account's posts created in [q.From, q.To] (a zero bound is
// open), newest first, reading at most MaxSearchPages pages.
func (a *Adapter) Search(ctx context.Context, q adapter.SearchQuery) ([]adapter.Record, error) {
	if q.Account == "" {
		return nil, errors.New("social: search: the account is required")
	}
	if !q.From.IsZero() && !q.To.IsZero() && q.To.Before(q.From) {
		return nil, errors.New("social: search: the window ends before it starts")
	}
	base := a.base + "/v1/accounts/" + url.PathEscape(q.Account) + "/posts"
	var out []adapter.Record
	seen := map[string]bool{}
	cursor := ""
	for page := 1; ; page++ {
		if page > MaxSearchPages {
			return nil, fmt.Errorf("social: search: more than %d pages in one window; narrow the window", MaxSearchPages)
		}
		v := url.Values{}
		if !q.From.IsZero() {
			v.Set("since", q.From.UTC().Format(time.RFC3339Nano))
		}
		if !q.To.IsZero() {
			v.Set("until", q.To.UTC().Format(time.RFC3339Nano))
		}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		u := base
		if len(v) > 0 {
			u += "?" + v.Encode()
		}
		resp, err := a.get(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("social: search page %d: %w", page, err)
		}
		if err := a.cfg.Status.Classify(resp.StatusCode); err != nil {
			return nil, fmt.Errorf("social: search page %d: %w", page, err)
		}
		var lr struct {
			Items      []apiPost `json:"items"`
			NextCursor string    `json:"next_cursor"`
		}
		if err := json.Unmarshal(resp.Body, &lr); err != nil {
			return nil, fmt.Errorf("social: search page %d: %w", page, unparseable(resp.StatusCode, "a search"))
		}
		for _, it := range lr.Items {
			if it.ID == "" {
				return nil, fmt.Errorf("social: search page %d: %w", page, unparseable(resp.StatusCode, "a search"))
			}
			if seen[it.ID] {
				continue
			}
			seen[it.ID] = true
			rec, err := a.record(it, true)
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
		if lr.NextCursor == "" {
			return out, nil
		}
		if lr.NextCursor == cursor {
			return nil, fmt.Errorf("social: search page %d: the cursor did not advance", page)
		}
		cursor = lr.NextCursor
	}
}

// Get reads one post back; adapter.ErrNotFound when the API has no such
// (visible) post.
func (a *Adapter) Get(ctx context.Context, externalID string) (adapter.Record, error) {
	if externalID == "" {
		return adapter.Record{}, errors.New("social: get: the external id is required")
	}
	resp, err := a.get(ctx, a.base+"/v1/posts/"+url.PathEscape(externalID))
	if err != nil {
		return adapter.Record{}, fmt.Errorf("social: get: %w", err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return adapter.Record{}, adapter.ErrNotFound
	}
	if err := a.cfg.Status.Classify(resp.StatusCode); err != nil {
		return adapter.Record{}, fmt.Errorf("social: get: %w", err)
	}
	var p apiPost
	if err := json.Unmarshal(resp.Body, &p); err != nil || p.ID == "" {
		return adapter.Record{}, fmt.Errorf("social: get: %w", unparseable(resp.StatusCode, "a get"))
	}
	return a.record(p, false)
}

// Probe GETs a live URL without any credentials and returns its status.
// Redirects are not followed by the default client: a redirect (to a login
// page, say) is reported as its 3xx.
func (a *Adapter) Probe(ctx context.Context, liveURL string) (int, error) {
	u, err := url.Parse(liveURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return 0, errors.New("social: probe: the live URL is not an absolute http(s) URL")
	}
	u.User = nil // net/http would turn user info into an Authorization header
	hreq, err := adapter.NewRequest(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := adapter.Do(ctx, a.cfg.Client, hreq)
	if err != nil {
		return 0, fmt.Errorf("social: probe: %w", err)
	}
	return resp.StatusCode, nil
}

// Resembles reports a post with the intent's text but other assets (an
// image lost on the way, say): a near match, not ours for certain.
func (a *Adapter) Resembles(intentPayload, recordPayload json.RawMessage) bool {
	ip, err1 := parsePayload(intentPayload)
	rp, err2 := parsePayload(recordPayload)
	return err1 == nil && err2 == nil && ip.Body == rp.Body
}
