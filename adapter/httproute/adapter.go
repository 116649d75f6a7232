package httproute

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/internal/telemetry"
)

var (
	_ adapter.Adapter           = (*Adapter)(nil)
	_ adapter.StatusQuerier     = (*Adapter)(nil)
	_ adapter.PayloadNormalizer = (*Adapter)(nil)
	_ adapter.Resembler         = (*Adapter)(nil)
)

// Errors of methods a route did not configure. Go cannot drop a method
// from a type, so *Adapter always has Status and Get; Capabilities tells
// the reconciler which ones to use (StatusQuery is true exactly when the
// route has a status section).
var (
	// ErrNoStatusQuery is returned by Status on a route without a status
	// section.
	ErrNoStatusQuery = errors.New("httproute: the route has no status query")
	// ErrNoReadback is returned by Get on a route without a readback
	// section.
	ErrNoReadback = errors.New("httproute: the route has no readback")
)

// secret is a resolved header value: it formats as [redacted] whatever
// the verb, so that no log line or %+v of an Adapter can show it.
type secret string

func (secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, "[redacted]") }

type resolvedHeader struct {
	name  string
	value secret
}

type tmplHeader struct {
	name string
	t    *template
}

type expectation struct {
	path jpath
	want *template
}

// holds: the document's value at path renders as want.
func (e expectation) holds(s *scope) bool {
	if !s.hasDoc {
		return false
	}
	v, ok := e.path.eval(s.doc)
	if !ok || v == nil {
		return false
	}
	want, ok, err := e.want.render(s, nil, false)
	return err == nil && ok && text(v) == want
}

type outcomeRule struct {
	status    []int
	match     []expectation
	unless    []expectation
	nonEmpty  []jpath
	headers   []headerMatch
	has       []string
	class     adapter.Class
	retryable bool
	code      string
	message   string
	text      string // an MCP tool's error result holds it
}

func (r *outcomeRule) matches(code int, s *scope) bool {
	if len(r.status) > 0 && !slices.Contains(r.status, code) {
		return false
	}
	if r.text != "" && !strings.Contains(s.text, r.text) {
		return false
	}
	for _, m := range r.match {
		if !m.holds(s) {
			return false
		}
	}
	if len(r.unless) > 0 {
		all := true
		for _, u := range r.unless {
			all = all && u.holds(s)
		}
		if all {
			return false
		}
	}
	for _, p := range r.nonEmpty {
		if !s.hasDoc {
			return false
		}
		if v, ok := p.eval(s.doc); isEmpty(v, ok) {
			return false
		}
	}
	for _, h := range r.headers {
		if !h.holds(s) {
			return false
		}
	}
	for _, h := range r.has {
		if s.header == nil || len(s.header.Values(h)) == 0 {
			return false
		}
	}
	return true
}

// liveURL is either a raw value (a JSON path: the API's own URL) or a URL
// template whose values are escaped.
type liveURL struct {
	raw *template
	u   *urlTemplate
}

func (l *liveURL) render(s *scope) string {
	switch {
	case l == nil:
		return ""
	case l.raw != nil:
		return renderText(l.raw, s)
	}
	str, ok, err := l.u.render(s, false)
	if err != nil || !ok {
		return ""
	}
	return str
}

type writeSpec struct {
	method        string
	url           *urlTemplate
	idemHeader    string
	attemptHeader string
	headers       []tmplHeader
	body          *vnode
	form          bool
	success       []int
	externalID    *template
	liveURL       *liveURL
	expect        []expectation
	require       []jpath
	payload       *vnode
	outcomes      []outcomeRule
	errorCode     *jpath
	overrides     map[int]string // status code -> definite_4xx | retryable_4xx | unknown
}

// template is the live URL's template, whichever form it has.
func (l *liveURL) template() *template {
	switch {
	case l == nil:
		return nil
	case l.raw != nil:
		return l.raw
	}
	return l.u.path
}

type recordSpec struct {
	externalID *template
	liveURL    *liveURL
	authorID   *template
	parentID   *template
	visibility *template
	visMap     map[string]string
	visProbe   bool
	createdAt  *template
	payload    *vnode
}

// Pagination modes of a search.
const (
	pageNone   = ""
	pageCursor = "cursor"
	pageLink   = "link"
	pageNumber = "page"
	pageOffset = "offset"
)

// CodeListingIncomplete is the code of a search that could not read its
// listing to a proven end within search.max_pages: a read failure, never
// "nothing found".
const CodeListingIncomplete = "listing_incomplete"

// endEmptyPage is search.end's value: an empty page ends a listing.
const endEmptyPage = "empty_page"

// Window filters: what the API's from/to compare.
const (
	windowCreated = "created_at"
	windowUpdated = "updated_at"
	windowNone    = "none"
)

type searchSpec struct {
	url        *urlTemplate
	items      jpath
	mode       string
	nextCursor *jpath
	pageSize   int
	firstPage  int
	total      *jpath // the listing's total count (page and offset pagination)
	maxPages   int
	window     string
	fields     recordSpec
	omitsBody  bool
	urlUsed    map[string]bool
	fieldsUsed map[string]bool
	needs      []string // intent values only an intent-scoped read has
}

type readSpec struct {
	url     *urlTemplate
	item    *jpath
	fields  recordSpec
	expect  []expectation
	require []jpath
	checks  []string
	used    map[string]bool
	needs   []string
}

type statusSpec struct {
	url            *urlTemplate
	item           *jpath
	state          *template
	stateMap       map[string]string
	externalID     *template
	liveURL        *liveURL
	version        *template
	appliedVersion *template
	code           *template
	partialEffects *template
	receivedAt     *template
	payload        *vnode
	expect         []expectation
	require        []jpath
	account        *template
	used           map[string]bool
	needs          []string
}

// Adapter is the generic HTTP adapter of one declared route. It implements
// adapter.Adapter, adapter.StatusQuerier (Status answers ErrNoStatusQuery
// unless the route has a status section), adapter.PayloadNormalizer (from
// payload.fields) and adapter.Resembler (from payload.near_match; false
// when none is declared).
//
// Every call is one adapter.Do: never retried, classified with httptrace.
// Route headers (credentials) are sent to base_url's origin only, never
// with Probe, and never appear in an error, a record or a formatted
// Adapter.
type Adapter struct {
	name        string
	base        string
	origin      string
	client      *http.Client
	headers     []resolvedHeader
	caps        adapter.Capabilities
	policy      adapter.StatusPolicy
	routePolicy events.Policy
	schema      *schema
	write       *writeSpec
	search      *searchSpec
	readback    *readSpec
	status      *statusSpec
	identity    *identitySpec
	ident       *identityCache // shared by the intent-scoped copies
	corr        *corrSpec
	parent      *parentSpec
	rateLimit   *rateLimitSpec
	// up is the upstream MCP server of a route with an mcp section
	// (shared by the intent-scoped copies); nil on an HTTP route.
	up      *upstream
	gateway gatewaySpec
	now     func() time.Time
	sleeper func(ctx context.Context, d time.Duration) error
	// scope is the intent of an intent-scoped copy (ForIntent); nil on
	// the route's own adapter.
	scope *adapter.ReadScope
	// scrub removes the route's credentials (and parts of them) from
	// every response-derived value the adapter returns.
	scrub *adapter.Scrubber
	// propagate: the API's calls carry their span's traceparent
	// (propagate_trace).
	propagate bool
}

// do sends one API call (never Probe's page fetch) with adapter.Do,
// carrying the call's traceparent when the route propagates it.
func (a *Adapter) do(ctx context.Context, hreq *http.Request) (*adapter.Response, error) {
	if a.propagate {
		ctx = telemetry.Propagate(ctx)
	}
	return adapter.Do(ctx, a.client, hreq)
}

// String names the route only: an Adapter never formats its headers.
func (a *Adapter) String() string { return "httproute.Adapter(" + a.name + ")" }

// GoString is String.
func (a *Adapter) GoString() string { return a.String() }

// Name is the route's name.
func (a *Adapter) Name() string { return a.name }

// Capabilities as declared by the route; StatusQuery and Search follow
// from its status and search sections.
func (a *Adapter) Capabilities() adapter.Capabilities { return a.caps }

// NormalizePayload validates a payload against payload.fields and returns
// its canonical form (canon/v1 of the declared fields, defaults applied,
// omit_empty fields left out). Errors are *events.FieldError naming the
// field (payload.body, payload.assets[2]); they never quote a value.
// Without payload.fields any JSON value is accepted and canonicalised.
func (a *Adapter) NormalizePayload(raw json.RawMessage) (json.RawMessage, error) {
	return a.schema.normalize(raw)
}

// Resembles reports a record whose payload agrees with the intent's on
// every payload.near_match field: a near match a retry could duplicate.
func (a *Adapter) Resembles(intentPayload, recordPayload json.RawMessage) bool {
	return a.schema.resembles(intentPayload, recordPayload)
}

func (a *Adapter) errorf(format string, args ...any) error {
	return errors.Errorf("httproute: route %s: "+format, append([]any{a.name}, args...)...)
}

func mismatch(status int, what string) error {
	return &adapter.CallError{Class: adapter.Unknown, Code: "response_mismatch", StatusCode: status,
		Message: "the response to " + what + " is not the expected one"}
}

// classify applies the route's status policy; codes listed as unknown are
// unknown whatever the default says.
func (a *Adapter) classify(code int) error {
	if a.write != nil && a.write.overrides[code] == "unknown" {
		return &adapter.CallError{Class: adapter.Unknown, Code: "http_ambiguous", StatusCode: code,
			Message: "the response does not prove whether the request executed"}
	}
	return a.policy.Classify(code)
}

// sameOrigin: u goes to base_url's origin, without user info.
func (a *Adapter) sameOrigin(u string) bool {
	p, err := url.Parse(u)
	return err == nil && p.User == nil && p.Scheme+"://"+p.Host == a.origin
}

func (a *Adapter) setRouteHeaders(r *http.Request) {
	r.Header.Set("Accept", "application/json")
	for _, h := range a.headers {
		r.Header.Set(h.name, string(h.value))
	}
}

// get sends one authenticated GET to the API and returns the response of
// any status.
func (a *Adapter) get(ctx context.Context, u string) (*adapter.Response, error) {
	return a.send(ctx, readReq{method: http.MethodGet, url: u})
}

// readReq is one read request: a GET, or a POST with a JSON body that
// reads (a GraphQL query).
type readReq struct {
	method string
	url    string
	body   []byte
	tool   string // an MCP route's read: the tool called with body
}

// send sends one authenticated read request to the API and returns the
// response of any status.
func (a *Adapter) send(ctx context.Context, r readReq) (*adapter.Response, error) {
	if r.tool != "" {
		return a.up.read(ctx, r.tool, r.body)
	}
	if !a.sameOrigin(r.url) {
		return nil, adapter.InvalidRequest("invalid_request", "the URL leaves base_url's origin")
	}
	hreq, err := adapter.NewRequest(ctx, r.method, r.url, r.body)
	if err != nil {
		return nil, err
	}
	a.setRouteHeaders(hreq)
	if r.body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	return a.do(ctx, hreq)
}

func renderText(t *template, s *scope) string {
	if t == nil {
		return ""
	}
	str, ok, err := t.render(s, nil, false)
	if err != nil || !ok {
		return ""
	}
	return str
}

// typedValue is the value of an expression keeping its JSON type when it
// is one {{...}}.
func typedValue(t *template, s *scope) (any, bool) {
	if t == nil {
		return nil, false
	}
	if e := t.whole(); e != nil {
		return s.value(e)
	}
	str, ok, err := t.render(s, nil, false)
	return str, ok && err == nil
}

// parseTime reads an RFC 3339 string, or Unix seconds as a number or a
// decimal string ("1712345678.000100"); 10^11 and more are Unix
// milliseconds. Absent, null, "" and 0 are the zero time.
func parseTime(v any, ok bool) (time.Time, bool) {
	if !ok || v == nil {
		return time.Time{}, true
	}
	var num string
	switch x := v.(type) {
	case string:
		if x == "" {
			return time.Time{}, true
		}
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return t, true
		}
		num = x
	case json.Number:
		num = x.String()
	default:
		return time.Time{}, false
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || f > 1e15 || strings.ContainsAny(num, "eE") {
		return time.Time{}, false
	}
	if f == 0 {
		return time.Time{}, true
	}
	// Split the decimal text rather than the float, so that microseconds
	// survive exactly.
	intPart, frac, _ := strings.Cut(num, ".")
	sec, err := strconv.ParseInt(intPart, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	nanos := int64(0)
	if frac != "" {
		frac = (frac + "000000000")[:9]
		if nanos, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return time.Time{}, false
		}
	}
	if sec >= 1e11 { // milliseconds
		return time.UnixMilli(sec).Add(time.Duration(nanos / 1e3)).UTC(), true
	}
	return time.Unix(sec, nanos).UTC(), true
}

// --- Write ---

var _ adapter.Preparer = (*Adapter)(nil)

// Write makes one attempt: one request built from write.url, write.body
// and the headers, sent once with adapter.Do. A payload that fails
// payload.fields, an empty request variable the URL or body needs, or a
// URL leaving base_url's origin is NotSent (not retryable). The response
// is classified by write.outcomes (first match), then the status policy;
// a success is mapped by write.response.
func (a *Adapter) Write(ctx context.Context, req adapter.WriteRequest) (scrubbed adapter.WriteResult, err error) {
	defer func() { scrubbed, err = a.scrub.WriteResult(scrubbed), a.scrub.Error(err) }()
	s, canon, err := a.writeScope(req)
	if err != nil {
		return adapter.WriteResult{}, err
	}
	sent, err := a.renderWrite(s)
	if err != nil {
		return adapter.WriteResult{}, err
	}
	return a.sendWrite(ctx, req, s, canon, sent)
}

// PrepareWrite renders the write Write would send, without sending it
// (adapter.Preparer): the method, the URL after base_url, the body and
// write.headers — never the route's headers, whose credentials
// WritePrepared adds. A rendering that holds a credential (or base_url,
// which may hold one) is adapter.ErrNotRecordable.
func (a *Adapter) PrepareWrite(req adapter.WriteRequest) (events.SentRequest, error) {
	s, _, err := a.writeScope(req)
	if err != nil {
		return events.SentRequest{}, a.scrub.Error(err)
	}
	sent, err := a.renderWrite(s)
	if err != nil {
		return events.SentRequest{}, a.scrub.Error(err)
	}
	texts := []string{sent.Path, sent.Body}
	for _, h := range sent.Headers {
		texts = append(texts, h.Value)
	}
	var bases []string
	if a.base != "" {
		bases = []string{a.base, url.QueryEscape(a.base), url.PathEscape(a.base)}
	}
	for k, t := range texts {
		if a.scrub.Contains(t) {
			return events.SentRequest{}, adapter.ErrNotRecordable
		}
		for _, b := range bases {
			if k > 0 && strings.Contains(t, b) {
				return events.SentRequest{}, adapter.ErrNotRecordable
			}
		}
	}
	return sent, nil
}

// WritePrepared sends sent, a rendering PrepareWrite made (for this
// attempt or the intent's first), with the route's headers and the
// idempotency key's and attempt id's headers, and classifies the answer
// as Write does (adapter.Preparer).
func (a *Adapter) WritePrepared(ctx context.Context, req adapter.WriteRequest, sent events.SentRequest) (scrubbed adapter.WriteResult, err error) {
	defer func() { scrubbed, err = a.scrub.WriteResult(scrubbed), a.scrub.Error(err) }()
	s, canon, err := a.writeScope(req)
	if err != nil {
		return adapter.WriteResult{}, err
	}
	return a.sendWrite(ctx, req, s, canon, sent)
}

// writeScope checks a write request and returns the scope its templates
// and its response's checks are rendered in, with its canonical payload.
func (a *Adapter) writeScope(req adapter.WriteRequest) (*scope, json.RawMessage, error) {
	canon, err := a.NormalizePayload(req.Payload)
	if err != nil {
		return nil, nil, adapter.InvalidRequest("invalid_payload", err.Error())
	}
	if err := a.CheckParent(req.ParentExternalID); err != nil {
		return nil, nil, adapter.InvalidRequest("invalid_parent", err.Error()+"; nothing was sent")
	}
	if a.caps.IdempotencyKey && req.IdempotencyKey == "" {
		return nil, nil, adapter.InvalidRequest("invalid_request", "the write request has no idempotency key; the route requires one")
	}
	for name, v := range map[string]string{"idempotency key": req.IdempotencyKey, "attempt id": req.AttemptID} {
		if !printable(v) {
			return nil, nil, adapter.InvalidRequest("invalid_request", "the "+name+" contains control characters")
		}
	}
	payload, err := decodeJSON(canon)
	if err != nil {
		return nil, nil, adapter.InvalidRequest("invalid_payload", "the payload cannot be decoded")
	}
	s := &scope{
		vars: map[string]string{
			varBase: a.base, varAccount: req.Account, varRequestID: req.RequestID, varIntentID: req.IntentID,
			varAttemptID: req.AttemptID, varIdempotencyKey: req.IdempotencyKey, varParent: req.ParentExternalID,
		},
		payload: payload, hasPay: true,
	}
	if a.corr != nil && req.IntentID != "" {
		s.vars[varMarker] = a.corr.render(req.IntentID)
	}
	return s, canon, nil
}

// renderWrite renders write.url, write.body and write.headers in s.
func (a *Adapter) renderWrite(s *scope) (events.SentRequest, error) {
	w := a.write
	if a.up != nil {
		return a.renderToolWrite(s)
	}
	u, ok, err := w.url.render(s, true)
	switch {
	case err != nil:
		return events.SentRequest{}, adapter.InvalidRequest("invalid_request", err.Error())
	case !ok:
		return events.SentRequest{}, adapter.InvalidRequest("invalid_request", "the write URL needs a payload value that is absent")
	case !a.sameOrigin(u) || !strings.HasPrefix(u, a.base):
		return events.SentRequest{}, adapter.InvalidRequest("invalid_request", "the write URL leaves base_url's origin")
	}
	sent := events.SentRequest{Method: w.method, Path: u[len(a.base):]}
	if w.body != nil {
		v, _, err := w.body.eval(s, true)
		if err != nil {
			return events.SentRequest{}, adapter.InvalidRequest("invalid_request", err.Error())
		}
		if w.form {
			m, _ := v.(map[string]any)
			vals := url.Values{}
			for k, x := range m {
				vals.Set(k, text(x))
			}
			sent.Body, sent.ContentType = vals.Encode(), "application/x-www-form-urlencoded"
		} else {
			body, err := json.Marshal(v)
			if err != nil {
				return events.SentRequest{}, adapter.InvalidRequest("invalid_request", "cannot encode the request body")
			}
			sent.Body, sent.ContentType = string(body), "application/json"
		}
	}
	for _, h := range w.headers {
		v := renderText(h.t, s)
		if v == "" {
			continue
		}
		if !printable(v) {
			return events.SentRequest{}, adapter.InvalidRequest("invalid_request", "the header "+h.name+" would contain control characters")
		}
		sent.Headers = append(sent.Headers, events.HeaderField{Name: h.name, Value: v})
	}
	return sent, nil
}

// sendWrite sends one attempt's rendered request once and classifies its
// answer.
func (a *Adapter) sendWrite(ctx context.Context, req adapter.WriteRequest, s *scope, canon json.RawMessage, sent events.SentRequest) (adapter.WriteResult, error) {
	w := a.write
	if err := a.checkWriter(ctx, req.Account); err != nil {
		return adapter.WriteResult{}, err
	}
	if a.up != nil {
		return a.sendToolWrite(ctx, s, canon, sent)
	}
	u := a.base + sent.Path
	if !a.sameOrigin(u) {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_request", "the write URL leaves base_url's origin")
	}
	var body []byte
	if sent.ContentType != "" {
		body = []byte(sent.Body)
	}
	hreq, err := adapter.NewRequest(ctx, sent.Method, u, body)
	if err != nil {
		return adapter.WriteResult{}, err
	}
	a.setRouteHeaders(hreq)
	if sent.ContentType != "" {
		hreq.Header.Set("Content-Type", sent.ContentType)
	}
	for _, h := range sent.Headers {
		if !validHeaderName(h.Name) || !printable(h.Value) {
			return adapter.WriteResult{}, adapter.InvalidRequest("invalid_request", "the header "+h.Name+" would contain control characters")
		}
		hreq.Header.Set(h.Name, h.Value)
	}
	if w.idemHeader != "" && req.IdempotencyKey != "" {
		hreq.Header.Set(w.idemHeader, req.IdempotencyKey)
	}
	if w.attemptHeader != "" && req.AttemptID != "" {
		hreq.Header.Set(w.attemptHeader, req.AttemptID)
	}
	resp, err := a.do(ctx, hreq)
	if err != nil {
		return adapter.WriteResult{}, err
	}
	return a.writeOutcome(resp, s, canon)
}

func (a *Adapter) writeOutcome(resp *adapter.Response, s *scope, sent json.RawMessage) (adapter.WriteResult, error) {
	w := a.write
	code := resp.StatusCode
	s.header = resp.Header
	if doc, err := decodeJSON(resp.Body); err == nil {
		if m := s.vars[varMarker]; m != "" {
			doc = stripText(doc, m) // the marker is not part of the payload
		}
		s.doc, s.hasDoc = doc, true
	}
	for i := range w.outcomes {
		r := &w.outcomes[i]
		if r.matches(code, s) {
			return adapter.WriteResult{}, &adapter.CallError{Class: r.class, Code: r.code, StatusCode: code, Retryable: r.retryable, Message: r.message,
				RetryAfter: a.retryAfter(resp)}
		}
	}
	if err := a.withWait(a.classify(code), resp); err != nil {
		var ce *adapter.CallError
		if errors.As(err, &ce) && ce.Class == adapter.Rejected && !ce.Retryable && w.errorCode != nil && s.hasDoc {
			if v, ok := w.errorCode.eval(s.doc); ok && isCode(text(v)) {
				ce.Code = text(v)
			}
		}
		return adapter.WriteResult{}, err
	}
	if len(w.success) > 0 && !slices.Contains(w.success, code) {
		return adapter.WriteResult{}, &adapter.CallError{Class: adapter.Unknown, Code: "unexpected_status", StatusCode: code,
			Message: "the API answered an unexpected success status"}
	}
	if !s.hasDoc && len(bytes.TrimSpace(resp.Body)) > 0 {
		return adapter.WriteResult{}, adapter.Unparseable(code, "the write")
	}
	return a.writeSuccess(code, s, sent)
}

// writeSuccess maps a write's successful answer (write.response).
func (a *Adapter) writeSuccess(code int, s *scope, sent json.RawMessage) (adapter.WriteResult, error) {
	w := a.write
	ext := renderText(w.externalID, s)
	if ext == "" {
		return adapter.WriteResult{}, adapter.Unparseable(code, "the write")
	}
	for _, p := range w.require {
		if v, ok := p.eval(s.doc); !s.hasDoc || isEmpty(v, ok) {
			return adapter.WriteResult{}, mismatch(code, "the write")
		}
	}
	for _, e := range w.expect {
		if !e.holds(s) {
			return adapter.WriteResult{}, mismatch(code, "the write")
		}
	}
	if w.payload != nil {
		v, _, err := w.payload.eval(s, false)
		m, isMap := v.(map[string]any)
		if err != nil || !isMap {
			return adapter.WriteResult{}, mismatch(code, "the write")
		}
		got, _, err := a.schema.shape(m)
		if err != nil || !bytes.Equal(got, sent) {
			return adapter.WriteResult{}, mismatch(code, "the write")
		}
	}
	return adapter.WriteResult{ExternalID: ext, LiveURL: w.liveURL.render(s), StatusCode: code}, nil
}

// --- records ---

// record maps one JSON object with spec. base holds the variables of the
// read. listing: it comes from a search page (Partial when the route
// omits bodies or a required payload field is absent). The correlation
// marker is read and removed before the payload is mapped.
func (a *Adapter) record(item any, spec *recordSpec, base *scope, listing bool) (adapter.Record, error) {
	var corrID string
	if a.corr != nil {
		corrID = a.corr.extract(item)
	}
	s := &scope{vars: base.vars, doc: item, hasDoc: true}
	r := adapter.Record{
		ExternalID:    renderText(spec.externalID, s),
		LiveURL:       spec.liveURL.render(s),
		AuthorID:      renderText(spec.authorID, s),
		ParentID:      renderText(spec.parentID, s),
		Visibility:    renderText(spec.visibility, s),
		CorrelationID: corrID,
	}
	if spec.visMap != nil {
		v, ok := spec.visMap[r.Visibility]
		if !ok {
			v = "unknown"
		}
		r.Visibility = v
	}
	if spec.createdAt != nil {
		t, ok := parseTime(typedValue(spec.createdAt, s))
		if !ok {
			return adapter.Record{}, errors.New("created_at is not an RFC 3339 time or Unix seconds")
		}
		if t.IsZero() && a.routePolicy.Retry != events.PolicyNever {
			// A record without its creation time passes the
			// pre-existing rule: a look-alike made before the intent
			// would be confirmed as ours, and the write never made.
			// A route that may retry must map it (checkDedup), so a
			// time that is absent (null, 0, a path the API does not
			// fill) is an item that cannot be mapped.
			return adapter.Record{}, errors.New("created_at is absent")
		}
		r.CreatedAt = t
	}
	if listing && a.search.omitsBody {
		r.Partial = true
		return r, nil
	}
	if spec.payload != nil {
		v, _, err := spec.payload.eval(s, false)
		m, isMap := v.(map[string]any)
		if err != nil || !isMap {
			return adapter.Record{}, errors.New("the payload mapping did not yield an object")
		}
		pl, missing, err := a.schema.shape(m)
		if listing && missing {
			r.Partial = true
			return r, nil
		}
		if err != nil {
			return adapter.Record{}, errors.New("cannot rebuild its payload")
		}
		r.Payload = pl
	}
	return r, nil
}

// --- Search ---

// Search lists q.Account's objects in [q.From, q.To] (a zero bound is
// left out of the query; with window_filter updated_at the upper bound is
// never sent and items created outside the window are dropped, unless a
// correlation marker names an intent in them), page by
// page as search declares (a body cursor, the Link header's rel="next",
// a page number or an offset), for at most max_pages pages; items are
// deduplicated by external id. A listing ends only where its end is
// proven: an empty cursor, a response without a next link, an empty page
// or the declared total reached — never at a short page; a search
// without pagination reads one page, and one whose answer links a next
// page (Link rel="next") is incomplete. Needing more
// than max_pages pages is a *adapter.CallError (Unknown,
// listing_incomplete) marked adapter.ErrListingIncomplete, returned with
// the records read so far (they prove a write present, never absent); a page without its items, an item that cannot be
// mapped and a next link leaving base_url's origin are errors too, never
// a shorter list. A route without a search section returns nil, nil.
func (a *Adapter) Search(ctx context.Context, q adapter.SearchQuery) (scrubbed []adapter.Record, err error) {
	defer func() { scrubbed, err = a.scrub.Records(scrubbed), a.scrub.Error(err) }()
	if a.search == nil {
		return nil, nil
	}
	recs, _, err := a.searchPages(ctx, q, 0, nil)
	if err != nil && !errors.Is(err, adapter.ErrListingIncomplete) {
		return nil, err
	}
	return recs, err
}

// pageSeen is what one search page was (for Inspect).
type pageSeen struct {
	url    string
	status int
	items  int
}

// searchPages lists like Search. limit > 0 reads at most limit pages and
// reports whether more were left (more); limit 0 reads up to max_pages,
// and more would be an error. seen, if set, is told of every page.
func (a *Adapter) searchPages(ctx context.Context, q adapter.SearchQuery, limit int, seen func(pageSeen)) (recs []adapter.Record, more bool, err error) {
	ss := a.search
	if q.Account == "" {
		return nil, false, a.errorf("search: the account is required")
	}
	if !q.From.IsZero() && !q.To.IsZero() && q.To.Before(q.From) {
		return nil, false, a.errorf("search: the window ends before it starts")
	}
	base, err := a.readScope("search", ss.needs, map[string]string{varAccount: q.Account})
	if err != nil {
		return nil, false, err
	}
	to := q.To
	if ss.window == windowUpdated {
		to = time.Time{} // an object made in the window may have changed after it
	}
	var out []adapter.Record
	ids := map[string]bool{}
	read := 0                // items listed so far, for search.total
	var waited time.Duration // waited inside this listing (rate_limit.max_wait)
	cursor, next := "", ""
	for page := 1; ; page++ {
		if limit > 0 && page > limit {
			return out, true, nil
		}
		if page > ss.maxPages {
			// What was read is returned with the error: it can prove a
			// write present, never absent (adapter.ErrListingIncomplete).
			return out, false, errors.Mark(a.errorf("search: more than %d pages in one window (search.max_pages; narrow the window or raise it): %w", ss.maxPages, &adapter.CallError{Class: adapter.Unknown, Code: CodeListingIncomplete,
				Message: fmt.Sprintf("the listing needs more than %d pages (search.max_pages) in one window; it is incomplete, so it proves nothing absent", ss.maxPages)}), adapter.ErrListingIncomplete)
		}
		s := &scope{vars: maps.Clone(base.vars), payload: base.payload, hasPay: base.hasPay,
			times: map[string]time.Time{varFrom: q.From, varTo: to}}
		s.vars[varCursor] = cursor
		s.vars[varPageSize] = strconv.Itoa(ss.pageSize)
		s.vars[varPage] = strconv.Itoa(ss.firstPage + page - 1)
		// The next offset is what was received, not page_size: an API
		// that caps pages silently would otherwise skip items.
		s.vars[varOffset] = strconv.Itoa(read)
		r := readReq{method: http.MethodGet, url: next}
		if next == "" {
			var ok bool
			if r, ok, err = a.request(ss.url, s, false); err != nil || !ok {
				return nil, false, a.errorf("search page %d: the search URL cannot be built", page)
			}
		}
		u := r.url + r.tool
		resp, err := a.getWaiting(ctx, r, &waited)
		if err != nil {
			return nil, false, a.errorf("search page %d: %w", page, err)
		}
		doc, err := decodeJSON(resp.Body)
		if err != nil {
			return nil, false, a.errorf("search page %d: %w", page, adapter.Unparseable(resp.StatusCode, "a search"))
		}
		v, ok := ss.items.eval(doc)
		items, isList := v.([]any)
		if seen != nil {
			seen(pageSeen{url: u, status: resp.StatusCode, items: len(items)})
		}
		if !ok || !isList {
			return nil, false, a.errorf("search page %d: %w", page, &adapter.CallError{Class: adapter.Unknown, Code: "response_unparseable",
				StatusCode: resp.StatusCode, Message: "the search response has no " + ss.items.src + " list"})
		}
		for _, it := range items {
			rec, err := a.record(it, &ss.fields, base, true)
			if err != nil || rec.ExternalID == "" {
				return nil, false, a.errorf("search page %d: %w", page, adapter.Unparseable(resp.StatusCode, "a search"))
			}
			if ids[rec.ExternalID] {
				continue
			}
			ids[rec.ExternalID] = true
			// An item a marker names is kept whatever its creation time
			// says (the API's clock may be off): the reconciler tells
			// this intent's from another's by the marker.
			if ss.window == windowUpdated && rec.CorrelationID == "" && !rec.CreatedAt.IsZero() &&
				((!q.From.IsZero() && rec.CreatedAt.Before(q.From)) || (!q.To.IsZero() && rec.CreatedAt.After(q.To))) {
				continue
			}
			out = append(out, rec)
		}
		switch ss.mode {
		case pageCursor:
			v, ok := ss.nextCursor.eval(doc)
			n := ""
			if ok {
				n = text(v)
			}
			if n == "" {
				return out, false, nil
			}
			if n == cursor {
				return nil, false, a.errorf("search page %d: the cursor did not advance", page)
			}
			cursor = n
		case pageLink:
			n := nextLink(resp.Header)
			if n == "" {
				return out, false, nil
			}
			if ref, err := url.Parse(u); err == nil {
				if l, err := ref.Parse(n); err == nil {
					n = l.String()
				}
			}
			if !a.sameOrigin(n) {
				return nil, false, a.errorf("search page %d: %w", page, adapter.InvalidRequest("invalid_request", "the Link header's next page leaves base_url's origin"))
			}
			if n == u {
				return nil, false, a.errorf("search page %d: the next link did not advance", page)
			}
			next = n
		case pageNumber, pageOffset:
			// A short page proves nothing (the API may cap the page size
			// silently): only an empty page or the declared total ends
			// the listing.
			read += len(items)
			if len(items) == 0 {
				return out, false, nil
			}
			if ss.total != nil {
				if v, ok := ss.total.eval(doc); ok {
					if n, err := strconv.ParseInt(text(v), 10, 64); err == nil && n >= 0 && int64(read) >= n {
						return out, false, nil
					}
				}
			}
		default:
			// One page, unless the API says there is another (a Link
			// rel="next", as GitHub pages every listing): the page is
			// then not the whole listing, and proves nothing absent.
			if nextLink(resp.Header) != "" {
				return out, false, errors.Mark(a.errorf("search page %d: %w", page, &adapter.CallError{Class: adapter.Unknown, Code: CodeListingIncomplete,
					Message: "the API links a next page, and the route declares no pagination: the listing is incomplete, so it proves nothing absent"}), adapter.ErrListingIncomplete)
			}
			return out, false, nil
		}
	}
}

// getWaiting GETs u for a read (a listing's page, a readback, a status
// query) and classifies its status (readStatus). When the API refuses it
// for its rate limit and asks for a wait that, with what this read has
// waited already, stays within rate_limit.max_wait, it waits and asks
// again (a refused read did nothing); otherwise the failure carries the
// wait.
func (a *Adapter) getWaiting(ctx context.Context, r readReq, waited *time.Duration) (*adapter.Response, error) {
	for {
		resp, err := a.send(ctx, r)
		if err != nil {
			return nil, err
		}
		err = a.readStatus(resp)
		var ce *adapter.CallError
		if err == nil || a.rateLimit == nil || !errors.As(err, &ce) || ce.Code != CodeRateLimited ||
			ce.RetryAfter <= 0 || *waited+ce.RetryAfter > a.rateLimit.maxWait {
			return resp, err
		}
		if err := a.sleep(ctx, ce.RetryAfter); err != nil {
			return nil, &adapter.CallError{Class: adapter.NotSent, Code: "cancelled_before_send", Retryable: true, RetryAfter: ce.RetryAfter,
				Message: "the listing was cancelled while waiting out the API's rate limit"}
		}
		*waited += ce.RetryAfter
	}
}

// nextLink is the target of the Link header's rel="next" ("" when none),
// as RFC 8288 writes it: <URI>; rel="next", <URI>; rel="last".
func nextLink(h http.Header) string {
	for _, line := range h.Values("Link") {
		for _, link := range splitLinks(line) {
			target, params, ok := strings.Cut(link, ";")
			target = strings.TrimSpace(target)
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			for _, p := range strings.Split(params, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
				if !strings.EqualFold(strings.TrimSpace(k), "rel") {
					continue
				}
				for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(v), `"`)) {
					if strings.EqualFold(rel, "next") {
						return target[1 : len(target)-1]
					}
				}
			}
		}
	}
	return ""
}

// splitLinks splits a Link header at the commas between links (not those
// inside <...> or quotes).
func splitLinks(line string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '"':
			quoted = !quoted
		case c == '<' && !quoted:
			depth++
		case c == '>' && !quoted && depth > 0:
			depth--
		case c == ',' && !quoted && depth == 0:
			out = append(out, line[start:i])
			start = i + 1
		}
	}
	return append(out, line[start:])
}

// read GETs u and returns the item of the response: adapter.ErrNotFound
// on 404 or when item is absent. vars are the variables of the read's
// expectations.
func (a *Adapter) read(ctx context.Context, r readReq, item *jpath, expect []expectation, require []jpath, vars map[string]string, what string) (any, int, error) {
	return a.readReqIn(ctx, r, item, expect, require, &scope{vars: vars}, what)
}

func (a *Adapter) readIn(ctx context.Context, u string, item *jpath, expect []expectation, require []jpath, base *scope, what string) (any, int, error) {
	return a.readReqIn(ctx, readReq{method: http.MethodGet, url: u}, item, expect, require, base, what)
}

func (a *Adapter) readReqIn(ctx context.Context, r readReq, item *jpath, expect []expectation, require []jpath, base *scope, what string) (any, int, error) {
	var waited time.Duration
	resp, err := a.getWaiting(ctx, r, &waited)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return nil, resp.StatusCode, adapter.ErrNotFound
	}
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		return nil, code, a.errorf("%s: %w", what, err)
	}
	doc, err := decodeJSON(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, a.errorf("%s: %w", what, adapter.Unparseable(resp.StatusCode, "a "+what))
	}
	// expect and require hold of the whole response ({"ok": true} next to
	// the item), before the item is taken out of it.
	s := &scope{vars: base.vars, payload: base.payload, hasPay: base.hasPay, doc: doc, hasDoc: true}
	for _, p := range require {
		if v, ok := p.eval(doc); isEmpty(v, ok) {
			return nil, resp.StatusCode, a.errorf("%s: %w", what, adapter.Unparseable(resp.StatusCode, "a "+what))
		}
	}
	for _, e := range expect {
		if !e.holds(s) {
			return nil, resp.StatusCode, a.errorf("%s: %w", what, adapter.Unparseable(resp.StatusCode, "a "+what))
		}
	}
	if item != nil {
		v, ok := item.eval(doc)
		if !ok || v == nil {
			return nil, resp.StatusCode, adapter.ErrNotFound
		}
		doc = v
	}
	return doc, resp.StatusCode, nil
}

// Get reads one object back (readback.url with {{external_id}});
// adapter.ErrNotFound on 404 or an absent readback.item. With
// visibility: {probe: true} the live URL is probed without credentials:
// 200 is "public", anything else "not_public"; a failed probe, and one
// answering 5xx or 429, is an error (a failed read).
// A route without a readback section answers ErrNoReadback.
func (a *Adapter) Get(ctx context.Context, externalID string) (scrubbed adapter.Record, err error) {
	defer func() { scrubbed, err = a.scrub.Record(scrubbed), a.scrub.Error(err) }()
	rs := a.readback
	if rs == nil {
		return adapter.Record{}, ErrNoReadback
	}
	if externalID == "" {
		return adapter.Record{}, a.errorf("get: the external id is required")
	}
	base, err := a.readScope("get", rs.needs, map[string]string{varExternalID: externalID})
	if err != nil {
		return adapter.Record{}, err
	}
	r, ok, err := a.request(rs.url, base, false)
	if err != nil || !ok {
		return adapter.Record{}, a.errorf("get: the readback URL cannot be built")
	}
	doc, code, err := a.readReqIn(ctx, r, rs.item, rs.expect, rs.require, base, "get")
	if err != nil {
		return adapter.Record{}, err
	}
	rec, err := a.record(doc, &rs.fields, base, false)
	if err != nil || rec.ExternalID == "" {
		return adapter.Record{}, a.errorf("get: %w", adapter.Unparseable(code, "a get"))
	}
	if rs.fields.visProbe {
		rec.Visibility = "not_public"
		if rec.LiveURL != "" {
			code, err := a.Probe(ctx, rec.LiveURL)
			if err != nil {
				return adapter.Record{}, a.errorf("get: visibility: %w", err)
			}
			if code >= 500 || code == http.StatusTooManyRequests {
				// The page's server is in trouble: that proves nothing
				// about the object (the reconciler's url probe agrees).
				return adapter.Record{}, a.errorf("get: visibility: %w", &adapter.CallError{Class: adapter.Unknown, Code: "probe_unavailable", StatusCode: code,
					Message: "the live URL answered a server error or its rate limit, which proves nothing about the object's visibility"})
			}
			if code == http.StatusOK {
				rec.Visibility = "public"
			}
		}
	}
	return rec, nil
}

// Status looks the write up (status.url with {{request_id}},
// {{idempotency_key}} or {{intent_id}}); adapter.ErrNotFound on 404, an
// absent status.item, or an answer whose status.account is not
// q.Account. The state is mapped by status.map; code is kept for
// failed states only. A route without a status section answers
// ErrNoStatusQuery (and its Capabilities().StatusQuery is false).
func (a *Adapter) Status(ctx context.Context, q adapter.StatusQuery) (scrubbed adapter.StatusResult, err error) {
	defer func() { scrubbed, err = a.scrub.Status(scrubbed), a.scrub.Error(err) }()
	ss := a.status
	if ss == nil {
		return adapter.StatusResult{}, ErrNoStatusQuery
	}
	base, err := a.readScope("status", ss.needs, map[string]string{varRequestID: q.RequestID, varIdempotencyKey: q.IdempotencyKey, varAccount: q.Account})
	if err != nil {
		return adapter.StatusResult{}, err
	}
	r, ok, err := a.request(ss.url, base, true)
	if err != nil {
		return adapter.StatusResult{}, a.errorf("status: %s", err.Error())
	}
	if !ok {
		return adapter.StatusResult{}, a.errorf("status: the status URL cannot be built")
	}
	doc, code, err := a.readReqIn(ctx, r, ss.item, ss.expect, ss.require, base, "status")
	if err != nil {
		return adapter.StatusResult{}, err
	}
	var corrID string
	if a.corr != nil {
		corrID = a.corr.extract(doc) // and removed, before the payload is mapped
	}
	s := &scope{vars: base.vars, payload: base.payload, hasPay: base.hasPay, doc: doc, hasDoc: true}
	raw := renderText(ss.state, s)
	state := raw
	if len(ss.stateMap) > 0 {
		state = ss.stateMap[raw]
	}
	switch state {
	case adapter.StatusCompleted, adapter.StatusProcessing, adapter.StatusFailed:
	default:
		return adapter.StatusResult{}, a.errorf("status: %w", adapter.Unparseable(code, "a status query"))
	}
	if ss.account != nil {
		acct := renderText(ss.account, s)
		if q.Account != "" && acct != q.Account {
			return adapter.StatusResult{}, adapter.ErrNotFound // another account's write with the same id
		}
	}
	out := adapter.StatusResult{
		Account:        renderText(ss.account, s),
		State:          state,
		ExternalID:     renderText(ss.externalID, s),
		LiveURL:        ss.liveURL.render(s),
		Version:        renderText(ss.version, s),
		AppliedVersion: renderText(ss.appliedVersion, s),
		CorrelationID:  corrID,
	}
	if state == adapter.StatusFailed {
		out.Code = renderText(ss.code, s)
	}
	if v, ok := typedValue(ss.partialEffects, s); ok && v != nil {
		l, isList := v.([]any)
		if !isList {
			return adapter.StatusResult{}, a.errorf("status: %w", adapter.Unparseable(code, "a status query"))
		}
		out.PartialEffects = make([]string, 0, len(l))
		for _, x := range l {
			out.PartialEffects = append(out.PartialEffects, text(x))
		}
	}
	if ss.receivedAt != nil {
		t, ok := parseTime(typedValue(ss.receivedAt, s))
		if !ok {
			return adapter.StatusResult{}, a.errorf("status: %w", adapter.Unparseable(code, "a status query"))
		}
		out.ReceivedAt = t
	}
	// The payload is evidence: when a required field is absent it is left
	// out, so the hash check fails rather than guessing.
	if ss.payload != nil {
		if v, _, err := ss.payload.eval(s, false); err == nil {
			if m, isMap := v.(map[string]any); isMap {
				if pl, missing, err := a.schema.shape(m); err == nil && !missing {
					out.Payload = pl
				}
			}
		}
	}
	return out, nil
}

// Probe GETs a live URL with no header at all (no credentials: a live URL
// is public) and returns its status. Redirects are not followed: a
// redirect (to a login page, say) is reported as its 3xx.
func (a *Adapter) Probe(ctx context.Context, liveURL string) (int, error) {
	u, err := url.Parse(liveURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return 0, a.errorf("probe: the live URL is not an absolute http(s) URL")
	}
	u.User = nil // net/http would turn user info into an Authorization header
	hreq, err := adapter.NewRequest(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := adapter.Do(ctx, a.client, hreq)
	if err != nil {
		return 0, a.errorf("probe: %w", err)
	}
	return resp.StatusCode, nil
}

// Policy is the route policy Build puts in the adapter.Route.
func (a *Adapter) Policy() events.Policy { return a.routePolicy }
