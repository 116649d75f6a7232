package social

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/errors"
	"golang.org/x/text/unicode/norm"

	"github.com/settle-dev/settle/adapter"
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
	// Built once for every write: the posts URL and the Authorization
	// header's value.
	postsURL, auth string
}

var (
	_ adapter.Adapter           = (*Adapter)(nil)
	_ adapter.PayloadNormalizer = (*Adapter)(nil)
	_ adapter.Resembler         = (*Adapter)(nil)
)

func configError(field, reason string) error {
	return adapter.ConfigError("social", field, reason)
}

// New validates cfg, fills its defaults and returns an Adapter. Errors name
// the field (config.BaseURL, config.Token, ...) and never echo its value.
func New(cfg Config) (*Adapter, error) {
	u, err := adapter.CheckEndpoint("social", cfg.BaseURL, cfg.Token)
	if err != nil {
		return nil, err
	}
	if cfg.KeyRetention < 0 {
		return nil, configError("KeyRetention", "must not be negative")
	}
	if cfg.IdempotencyKey && cfg.KeyRetention == 0 {
		return nil, configError("KeyRetention", "is required when IdempotencyKey is set")
	}
	if cfg.Client == nil {
		cfg.Client = adapter.NewHTTPClient(DefaultTimeout)
	}
	if cfg.Status.Definite4xx == nil && cfg.Status.Retryable4xx == nil {
		cfg.Status = adapter.DefaultStatusPolicy()
	}
	base := strings.TrimRight(u.String(), "/")
	return &Adapter{cfg: cfg, base: base, postsURL: base + "/v1/posts", auth: "Bearer " + cfg.Token}, nil
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
		// Every listed post carries author_id and parent_id.
		SearchAuthoritative: true,
	}
}

// --- payload ---

// payload is the route's intent payload.
type payload struct {
	Assets []string `json:"assets"`
	Body   string   `json:"body"`
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
	if out, ok := normalizeFast(raw); ok {
		return out, nil
	}
	return normalizeFull(raw)
}

// normalizeFull is NormalizePayload without its fast path: it decides
// every error.
func normalizeFull(raw []byte) (json.RawMessage, error) {
	p, err := parsePayload(raw)
	if err != nil {
		return nil, err
	}
	return canonicalPayload(p.Body, p.Assets)
}

func parsePayload(raw []byte) (payload, error) {
	if p, ok := parseCanonical(raw); ok {
		return p, nil
	}
	return parsePayloadFull(raw)
}

// parsePayloadFull is parsePayload without its shortcut: it decides every
// error.
func parsePayloadFull(raw []byte) (payload, error) {
	var p payload
	m, err := adapter.PayloadObject(raw, "body", "assets")
	if err != nil {
		return p, err
	}

	b, ok := m["body"]
	if !ok {
		return p, adapter.PayloadError("payload.body", "is required")
	}
	if string(b) == "null" || json.Unmarshal(b, &p.Body) != nil {
		return p, adapter.PayloadError("payload.body", "must be a string")
	}
	if strings.TrimSpace(p.Body) == "" {
		return p, adapter.PayloadError("payload.body", "must not be empty")
	}

	p.Assets = []string{}
	if as, ok := m["assets"]; ok {
		var items []json.RawMessage
		if string(as) == "null" || json.Unmarshal(as, &items) != nil {
			return p, adapter.PayloadError("payload.assets", "must be an array of sha256 hex strings")
		}
		for i, it := range items {
			field := "payload.assets[" + strconv.Itoa(i) + "]"
			var s string
			if string(it) == "null" || json.Unmarshal(it, &s) != nil {
				return p, adapter.PayloadError(field, "must be a string")
			}
			if !adapter.IsSHA256Hex(s) {
				return p, adapter.PayloadError(field, "must be a sha256: 64 lowercase hex characters")
			}
			p.Assets = append(p.Assets, s)
		}
	}
	return p, nil
}

// parseCanonical reads a payload already in the form canonicalPayload
// writes, {"assets":["<sha256 hex>",…],"body":"…"}, with a body of valid
// UTF-8 in NFC without escapes: what Write receives (the recorded payload), read
// without canonicalizing and decoding it again (that second parse was a
// sixth of an Execute's own CPU at 256 callers). ok is false on anything
// else, which parsePayload then reads the full way; where ok, the result
// is the full way's (TestParseCanonicalAgrees, FuzzParseCanonicalAgrees).
func parseCanonical(raw []byte) (payload, bool) {
	// Far below canon/v1's size limit, which the full way enforces.
	if len(raw) > 1<<16 {
		return payload{}, false
	}
	rest, ok := bytes.CutPrefix(raw, []byte(`{"assets":[`))
	if !ok {
		return payload{}, false
	}
	p := payload{Assets: []string{}}
	for len(rest) > 0 && rest[0] != ']' {
		if len(p.Assets) > 0 {
			if rest[0] != ',' {
				return payload{}, false
			}
			rest = rest[1:]
		}
		if len(rest) < 66 || rest[0] != '"' || rest[65] != '"' || !adapter.IsSHA256Hex(string(rest[1:65])) {
			return payload{}, false
		}
		p.Assets = append(p.Assets, string(rest[1:65]))
		rest = rest[66:]
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`],"body":"`)); !ok {
		return payload{}, false
	}
	body, ok := bytes.CutSuffix(rest, []byte(`"}`))
	// canon/v1 writes strings in NFC: a body that is not would read as
	// its normal form the full way.
	if !ok || !utf8.Valid(body) || !norm.NFC.IsNormal(body) {
		return payload{}, false
	}
	for _, c := range body {
		if c < 0x20 || c == '"' || c == '\\' {
			return payload{}, false
		}
	}
	p.Body = string(body)
	if strings.TrimSpace(p.Body) == "" {
		return payload{}, false
	}
	return p, true
}

// canonicalPayload builds the canonical payload from a body and assets, as
// NormalizePayload does and as Search and Get rebuild it.
func canonicalPayload(body string, assets []string) (json.RawMessage, error) {
	if assets == nil {
		assets = []string{}
	}
	return adapter.CanonicalJSON(payload{Assets: assets, Body: body})
}

// --- HTTP ---

// apiPost is a post as the API returns it. Body is a pointer so that a
// listing without bodies is told apart from an empty body.
type apiPost struct {
	ID         string           `json:"id"`
	URL        string           `json:"url"`
	AuthorID   string           `json:"author_id"`
	Body       *string          `json:"body"`
	Assets     []string         `json:"assets"`
	ParentID   string           `json:"parent_id"`
	Visibility string           `json:"visibility"`
	CreatedAt  adapter.JSONTime `json:"created_at"`
}

type createBody struct {
	Account  string   `json:"account"`
	Body     string   `json:"body"`
	Assets   []string `json:"assets,omitempty"`
	ParentID string   `json:"parent_id,omitempty"`
}

// Write creates the post: one POST /v1/posts, never retried. Failures are
// *adapter.CallError; a write that cannot be built (bad payload, no account)
// is NotSent and not retryable.
func (a *Adapter) Write(ctx context.Context, req adapter.WriteRequest) (adapter.WriteResult, error) {
	p, err := parsePayload(req.Payload)
	if err != nil {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_payload", err.Error())
	}
	if req.Account == "" {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_request", "the write request has no account")
	}
	for name, v := range map[string]string{"idempotency key": req.IdempotencyKey, "attempt id": req.AttemptID} {
		if !adapter.ValidHeaderValue(v) {
			return adapter.WriteResult{}, adapter.InvalidRequest("invalid_request", "the "+name+" contains control characters")
		}
	}
	body, err := encodeCreateBody(createBody{Account: req.Account, Body: p.Body, Assets: p.Assets, ParentID: req.ParentExternalID})
	if err != nil {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_request", "cannot encode the request body")
	}
	hreq, err := adapter.NewRequest(ctx, http.MethodPost, a.postsURL, body)
	if err != nil {
		return adapter.WriteResult{}, err
	}
	// What Header.Set gives (the keys are in canonical form already), the
	// values in one allocation.
	vals := make([]string, 5)
	vals[0], vals[1], vals[2], vals[3], vals[4] = a.auth, "application/json", "application/json", req.IdempotencyKey, req.AttemptID
	hreq.Header["Authorization"] = vals[0:1:1]
	hreq.Header["Content-Type"] = vals[1:2:2]
	hreq.Header["Accept"] = vals[2:3:3]
	if req.IdempotencyKey != "" {
		hreq.Header["Idempotency-Key"] = vals[3:4:4]
	}
	if req.AttemptID != "" {
		hreq.Header["X-Settle-Attempt"] = vals[4:5:5]
	}
	resp, err := adapter.Do(ctx, a.cfg.Client, hreq)
	if err != nil {
		return adapter.WriteResult{}, err
	}
	if err := a.cfg.Status.Classify(resp.StatusCode); err != nil {
		return adapter.WriteResult{}, err
	}
	id, liveURL, ok := createdPost(resp.Body)
	if !ok || id == "" {
		return adapter.WriteResult{}, adapter.Unparseable(resp.StatusCode, "the write")
	}
	return adapter.WriteResult{ExternalID: id, LiveURL: liveURL, StatusCode: resp.StatusCode}, nil
}

// get sends one authenticated GET and returns the response of any status.
func (a *Adapter) get(ctx context.Context, u string) (*adapter.Response, error) {
	return adapter.AuthGet(ctx, a.cfg.Client, a.cfg.Token, u)
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
		CreatedAt:  p.CreatedAt.Time,
	}
	if (listing && a.cfg.OmitsBody) || p.Body == nil {
		r.Partial = true
		return r, nil
	}
	pl, err := canonicalPayload(*p.Body, p.Assets)
	if err != nil {
		return adapter.Record{}, errors.Errorf("social: post %q: cannot rebuild its payload: %w", p.ID, err)
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
			return nil, errors.Errorf("social: search: more than %d pages in one window; narrow the window", MaxSearchPages)
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
			return nil, errors.Errorf("social: search page %d: %w", page, err)
		}
		if err := a.cfg.Status.Classify(resp.StatusCode); err != nil {
			return nil, errors.Errorf("social: search page %d: %w", page, err)
		}
		var lr struct {
			Items      *[]apiPost `json:"items"`
			NextCursor string     `json:"next_cursor"`
		}
		// A page without its items array is an error, never "no posts":
		// on the last check that would license a retry.
		if err := json.Unmarshal(resp.Body, &lr); err != nil || lr.Items == nil {
			return nil, errors.Errorf("social: search page %d: %w", page, adapter.Unparseable(resp.StatusCode, "a search"))
		}
		for _, it := range *lr.Items {
			if it.ID == "" {
				return nil, errors.Errorf("social: search page %d: %w", page, adapter.Unparseable(resp.StatusCode, "a search"))
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
			return nil, errors.Errorf("social: search page %d: the cursor did not advance", page)
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
		return adapter.Record{}, errors.Errorf("social: get: %w", err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return adapter.Record{}, adapter.ErrNotFound
	}
	if err := a.cfg.Status.Classify(resp.StatusCode); err != nil {
		return adapter.Record{}, errors.Errorf("social: get: %w", err)
	}
	var p apiPost
	if err := json.Unmarshal(resp.Body, &p); err != nil || p.ID == "" {
		return adapter.Record{}, errors.Errorf("social: get: %w", adapter.Unparseable(resp.StatusCode, "a get"))
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
		return 0, errors.Errorf("social: probe: %w", err)
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
