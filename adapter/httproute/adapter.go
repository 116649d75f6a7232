package httproute

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	_ adapter.PayloadComparer   = (*Adapter)(nil)
	_ adapter.Preparer          = (*Adapter)(nil)
	_ adapter.IntentScoped      = (*Adapter)(nil)
	_ adapter.IdentityChecker   = (*Adapter)(nil)
	_ adapter.CheckDeclarer     = (*Adapter)(nil)
	_ adapter.ParentChecker     = (*Adapter)(nil)
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
	parentFrom string // the item's fields parentID reads ($.issue_url)
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

// Adapter is the generic adapter of one declared route (see the package
// doc for the interfaces it implements and the port's rules it keeps).
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
	mcpLim  mcpLimits
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
	// normalize: the route's declared normalisations (payload.normalize),
	// in the order they apply.
	normalize []string
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
		return a.up.read(ctx, r.tool, r.body, a.mcpLim)
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
		if err != nil || !a.samePayload(got, sent) {
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
		ParentFrom:    spec.parentFrom,
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

// Policy is the route policy Build puts in the adapter.Route.
func (a *Adapter) Policy() events.Policy { return a.routePolicy }
