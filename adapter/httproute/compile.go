package httproute

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// Defaults and bounds.
const (
	// DefaultTimeout bounds each HTTP call of a route without timeout.
	DefaultTimeout = 10 * time.Second
	// MaxTimeout is the largest timeout a route may set.
	MaxTimeout = 10 * time.Minute
	// DefaultMaxPages bounds how many pages one Search reads.
	DefaultMaxPages = 100
	maxMaxPages     = 1000
)

var writeMethods = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// compiler compiles one RouteConfig; problems are collected, each once.
type compiler struct {
	label    string
	failed   map[string]bool
	errs     []*RouteError
	warnings []*RouteError
	reported map[string]bool
	prefix   string // prepended to reasons (a reused section)
	quiet    bool   // no warnings (a reused section)
	declared map[string]bool
	origin   string // base_url's origin, once resolved
	baseURL  string // base_url, once resolved
	offline  bool   // ${env:NAME} resolves to placeholders (LintOffline)
	mcp      bool   // the route calls an upstream MCP server's tools
}

// Placeholders of an offline check: what ${env:NAME} stands for.
const (
	offlineBase  = "https://offline.invalid"
	offlineValue = "offline-placeholder"
)

// envFor is the environment s is resolved with: env, or offline a
// placeholder for every name — a URL for a reference that starts
// base_url, a word anywhere else.
func (c *compiler) envFor(s string, env func(string) (string, bool), base bool) func(string) (string, bool) {
	if !c.offline {
		return env
	}
	return func(name string) (string, bool) {
		if base && strings.HasPrefix(s, "${env:"+name+"}") {
			return offlineBase, true
		}
		return offlineValue, true
	}
}

// warn records a warning: the route works, but settle sees less than it
// could. A field gets at most one problem.
func (c *compiler) warn(field, reason string) {
	if c.quiet || c.skip(field) || c.reported[field] {
		return
	}
	if c.reported == nil {
		c.reported = map[string]bool{}
	}
	c.reported[field] = true
	c.warnings = append(c.warnings, &RouteError{Route: c.label, Field: field, Reason: reason})
}

// skip: field, or one of its ancestors, failed to decode (already
// reported), so a check on it would only repeat the problem.
func (c *compiler) skip(field string) bool {
	if len(c.failed) == 0 {
		return false
	}
	if c.failed[""] || c.failed[field] {
		return true
	}
	for i := 0; i < len(field); i++ {
		if (field[i] == '.' || field[i] == '[') && c.failed[field[:i]] {
			return true
		}
	}
	return false
}

// skipUnder: some field at or below prefix failed to decode.
func (c *compiler) skipUnder(prefix string) bool {
	if c.skip(prefix) {
		return true
	}
	for f := range c.failed {
		if strings.HasPrefix(f, prefix+".") || strings.HasPrefix(f, prefix+"[") {
			return true
		}
	}
	return false
}

// report records a problem; a field gets at most one.
func (c *compiler) report(field, reason string) {
	if c.skip(field) || c.reported[field] {
		return
	}
	if c.reported == nil {
		c.reported = map[string]bool{}
	}
	c.reported[field] = true
	c.errs = append(c.errs, &RouteError{Route: c.label, Field: field, Reason: c.prefix + reason})
}

// --- environment ---

// resolveEnv replaces every ${env:NAME} in s. The error names the variable,
// never a value.
func resolveEnv(s string, env func(string) (string, bool)) (string, int, error) {
	var b strings.Builder
	refs := 0
	rest := s
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			return b.String(), refs, nil
		}
		b.WriteString(rest[:i])
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return "", refs, errors.New(`"${" is not closed; an environment reference is ${env:NAME}`)
		}
		ref := rest[i+2 : i+end]
		name, ok := strings.CutPrefix(ref, "env:")
		if !ok || !validEnvName(name) {
			return "", refs, errors.New(`an environment reference is ${env:NAME} (NAME: letters, digits and _, not starting with a digit)`)
		}
		v, set := env(name)
		switch {
		case !set:
			return "", refs, errors.Errorf("environment variable %s is not set", name)
		case v == "":
			return "", refs, errors.Errorf("environment variable %s is empty", name)
		case !printable(v):
			return "", refs, errors.Errorf("environment variable %s contains control characters", name)
		}
		b.WriteString(v)
		refs++
		rest = rest[i+end+1:]
	}
}

// envValues are the values of the ${env:NAME} references in s (set ones).
func envValues(s string, env func(string) (string, bool)) []string {
	var out []string
	for rest := s; ; {
		i := strings.Index(rest, "${env:")
		if i < 0 {
			return out
		}
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return out
		}
		if v, ok := env(rest[i+6 : i+end]); ok && v != "" {
			out = append(out, v)
		}
		rest = rest[i+end+1:]
	}
}

func validEnvName(s string) bool {
	if s == "" || len(s) > 128 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// printable refuses control characters (CR, LF, NUL, ...), which would
// break a header.
func printable(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// --- headers ---

func validHeaderName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

var reservedHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer"}

// sensitiveHeader: a header that carries credentials by its name.
func sensitiveHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "proxy-authorization", "cookie":
		return true
	}
	for _, w := range []string{"token", "secret", "auth", "password", "passwd", "session", "signature", "credential", "api-key", "apikey", "api_key"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// --- compile ---

// compile checks cfg and builds its Adapter. failed holds the fields that
// failed to decode (nil for a RouteConfig built in Go).
func compile(cfg RouteConfig, label string, failed map[string]bool) (*Adapter, []*RouteError) {
	a, c := compileAll(cfg, label, failed)
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return a, nil
}

// compileAll compiles cfg and returns the compiler with its errors and
// warnings.
func compileAll(cfg RouteConfig, label string, failed map[string]bool) (*Adapter, *compiler) {
	return compileWith(&compiler{label: label, failed: failed}, cfg)
}

func compileWith(c *compiler, cfg RouteConfig) (*Adapter, *compiler) {
	a := &Adapter{name: cfg.Name, now: cfg.Now, sleeper: cfg.Sleep, propagate: cfg.PropagateTrace}
	if a.now == nil {
		a.now = time.Now
	}
	env := cfg.Env
	if env == nil {
		env = os.LookupEnv
	}

	if err := events.ValidateToken("name", cfg.Name); err != nil {
		var fe *events.FieldError
		if errors.As(err, &fe) {
			c.report("name", fe.Reason)
		}
	}

	// base_url
	c.mcp = cfg.MCP != nil
	if c.mcp {
		if cfg.BaseURL != "" {
			c.report("base_url", "applies to HTTP routes: a route with an mcp section calls its upstream's tools")
		}
		if len(cfg.Headers) > 0 {
			c.report("headers", "apply to HTTP routes: an MCP route's upstream takes its headers in mcp.headers, or its credentials in mcp.env")
		}
	} else if cfg.BaseURL == "" {
		c.report("base_url", "is required")
	} else if strings.Contains(cfg.BaseURL, "{{") {
		c.report("base_url", "takes no {{...}} template (only ${env:NAME})")
	} else if base, _, err := resolveEnv(cfg.BaseURL, c.envFor(cfg.BaseURL, env, true)); err != nil {
		c.report("base_url", err.Error())
	} else {
		u, err := adapter.CheckBaseURL(base, "send them in headers, from the environment")
		if err != nil {
			c.report("base_url", err.Error())
		} else {
			a.base = strings.TrimRight(u.String(), "/")
			a.origin = u.Scheme + "://" + u.Host
			c.origin, c.baseURL = a.origin, a.base
		}
	}

	// headers
	seen := map[string]bool{}
	for _, h := range cfg.Headers {
		field := fieldPath("headers", h.Name)
		lower := strings.ToLower(h.Name)
		switch {
		case !validHeaderName(h.Name):
			c.report(field, "is not a valid header name")
			continue
		case slices.Contains(reservedHeaders, lower):
			c.report(field, "is set by the HTTP client, not by a route")
			continue
		case seen[lower]:
			c.report(field, "is declared twice")
			continue
		case strings.Contains(h.Value, "{{"):
			c.report(field, "takes no {{...}} template (only ${env:NAME}); per-request headers go in write.headers")
			continue
		}
		seen[lower] = true
		v, refs, err := resolveEnv(h.Value, c.envFor(h.Value, env, false))
		switch {
		case err != nil:
			c.report(field, err.Error())
		case sensitiveHeader(h.Name) && refs == 0:
			c.report(field, "carries credentials, which must come from the environment (${env:NAME}); a route file holds no secret")
		case !printable(v):
			c.report(field, "contains control characters")
		default:
			a.headers = append(a.headers, resolvedHeader{name: h.Name, value: secret(v)})
			if sensitiveHeader(h.Name) {
				// What the API echoes of a credential is scrubbed from
				// everything the adapter returns.
				a.scrub = a.scrub.Merge(adapter.NewScrubber(envValues(h.Value, env)...))
			}
		}
	}

	// timeout and client
	timeout := cfg.Timeout
	switch {
	case timeout == 0:
		timeout = DefaultTimeout
	case timeout < 0 || timeout > MaxTimeout:
		c.report("timeout", "must be between 1ms and "+MaxTimeout.String())
	}
	a.client = cfg.Client
	if a.client == nil {
		a.client = adapter.NewHTTPClient(timeout)
	}
	if c.mcp {
		c.compileMCP(a, cfg.MCP, env, timeout)
	}

	// payload
	if cfg.Payload != nil {
		a.schema = &schema{}
		if len(cfg.Payload.Fields) > 0 {
			a.schema.fields = compileFields(cfg.Payload.Fields, "payload.fields", c.report)
		}
		broken := (len(cfg.Payload.Fields) > 0 && a.schema.fields == nil) || c.skip("payload.fields") // reported
		for i, f := range cfg.Payload.NearMatch {
			if d := a.schema.declared(); !broken && (d == nil || !d[f]) {
				c.report("payload.near_match["+strconv.Itoa(i)+"]", "is not a field of payload.fields")
			}
		}
		a.schema.nearMatch = cfg.Payload.NearMatch
	}
	declared := a.schema.declared()
	c.declared = declared

	if cfg.Correlation != nil {
		c.compileCorrelation(a, cfg.Correlation)
	}
	c.compileWrite(a, cfg.Write, declared, cfg.Correlation != nil)
	if c.mcp {
		c.compileGateway(a, cfg.MCP)
	}
	if a.corr != nil && a.write != nil {
		a.corr.first = markerLeads(a.write.body, cfg.Correlation.Read)
	}
	if cfg.Search != nil {
		c.compileSearch(a, cfg.Search)
	}
	if cfg.Readback != nil {
		c.compileReadback(a, cfg.Readback, cfg.Search)
	}
	if cfg.Status != nil {
		c.compileStatus(a, cfg.Status)
	}
	if cfg.Identity != nil {
		c.compileIdentity(a, cfg.Identity)
	}
	if cfg.Parent != nil {
		c.compileParent(a, cfg.Parent)
	}
	if cfg.RateLimit != nil {
		c.compileRateLimit(a, cfg.RateLimit)
	}
	if urls := a.urlsUsingParent(); len(urls) > 0 && !c.skipUnder("parent") {
		switch {
		case cfg.Parent == nil:
			verb := " uses"
			if len(urls) > 1 {
				verb = " use"
			}
			c.report("parent", "is required: "+strings.Join(urls, " and ")+verb+" {{parent}}, and a malformed parent (empty, or not an issue number) would be sent to the API; "+
				"declare its shape: parent: {type: integer} (a number such as an issue number) or parent: {type: string, pattern: '^...$'}")
		case a.parent != nil && !a.parent.required && a.write != nil && a.write.url != nil && a.write.url.path.uses(varParent):
			c.report("parent.required", "cannot be false: write.url's path uses {{parent}}")
		}
	}

	// capabilities
	caps := cfg.Capabilities
	a.caps = adapter.Capabilities{
		IdempotencyKey:  caps.IdempotencyKey,
		KeyRetention:    caps.KeyRetention,
		StatusQuery:     cfg.Status != nil,
		ReflectionDelay: caps.ReflectionDelay,
		Search:          cfg.Search != nil,
	}
	if cfg.Search != nil {
		a.caps.SearchOmitsBody = cfg.Search.OmitsBody
		// SearchAuthoritative is set by checkDedup, from the mapping.
	}
	a.caps.Correlation = cfg.Correlation != nil
	switch {
	case caps.IdempotencyKey && caps.KeyRetention <= 0:
		c.report("capabilities.key_retention", "is required when idempotency_key is true (the API's documented key retention, e.g. 24h)")
	case !caps.IdempotencyKey && caps.KeyRetention > 0:
		c.report("capabilities.key_retention", "only applies when idempotency_key is true")
	}
	if caps.IdempotencyKey && c.mcp && a.write != nil && a.write.url != nil && !a.write.url.uses(varIdempotencyKey) && !c.skip("capabilities.idempotency_key") {
		c.report("write.arguments", "must send {{idempotency_key}} in an argument when capabilities.idempotency_key is true (the key must reach the upstream)")
	}
	if caps.IdempotencyKey && !c.mcp && cfg.Write != nil && cfg.Write.IdempotencyHeader == "" && !c.skip("capabilities.idempotency_key") {
		c.report("write.idempotency_header", "is required when capabilities.idempotency_key is true (the key must reach the API)")
	}
	if caps.StatusQuery != nil && *caps.StatusQuery != (cfg.Status != nil) && !c.skip("status") {
		if *caps.StatusQuery {
			c.report("capabilities.status_query", "is true, but the route has no status section")
		} else {
			c.report("capabilities.status_query", "is false, but the route has a status section")
		}
	}
	if caps.Search != nil && *caps.Search != (cfg.Search != nil) && !c.skip("search") {
		if *caps.Search {
			c.report("capabilities.search", "is true, but the route has no search section")
		} else {
			c.report("capabilities.search", "is false, but the route has a search section")
		}
	}
	if caps.ReflectionDelay > 0 && cfg.Status == nil && !c.skip("status") {
		c.report("capabilities.reflection_delay", "only applies to a route with a status section")
	}

	// policy
	policy := cfg.Policy
	if policy == (events.Policy{}) {
		policy = defaultPolicy()
	}
	if policy.KeyRetention == 0 && caps.IdempotencyKey {
		policy.KeyRetention = events.Duration(caps.KeyRetention)
	}
	policyOK := !c.skipUnder("policy")
	if policyOK {
		if err := policy.Validate("policy."); err != nil {
			policyOK = false
			var fe *events.FieldError
			if errors.As(err, &fe) {
				c.report(fe.Field, fe.Reason)
			}
		} else if !c.skipUnder("capabilities") {
			if policy.KeyRetention > 0 && !caps.IdempotencyKey {
				c.report("policy.key_retention", "applies to a route with capabilities.idempotency_key only")
			} else if caps.IdempotencyKey && policy.KeyRetention.D() > caps.KeyRetention {
				c.report("policy.key_retention", "must not exceed capabilities.key_retention: a retry past the API's retention could execute twice")
			}
		}
	}
	a.routePolicy = policy
	c.checkDedup(a, cfg, policy, policyOK)
	c.checkCompare(a, cfg)

	if cfg.Readback == nil && cfg.Status == nil && !policy.TrustResponse && !c.skip("readback") && !c.skip("status") && !c.skip("policy.trust_response") {
		c.report("readback", "is required: a route without a status section or policy.trust_response verifies its writes by reading them back")
	}
	return a, c
}

// outcomeKeyReused is the outcome of an answer saying the idempotency key
// was already used with another request: class Unknown, code
// adapter.CodeKeyReused.
const outcomeKeyReused = "key_reused"

// contexts of templates.
func writeCtx(declared map[string]bool, marker bool) tctx {
	vars := []string{varBase, varAccount, varRequestID, varIntentID, varAttemptID, varIdempotencyKey, varParent}
	if marker {
		vars = append(vars, varMarker)
	}
	return tctx{vars: vars, payload: true, payloadFields: declared}
}

// intentVars are the intent's values every read URL and expectation may
// use (an adapter.ReadScope gives them to an intent-scoped read).
var intentVars = []string{varAccount, varRequestID, varIntentID, varIdempotencyKey, varParent}

// readCtx is the context of a read URL or expectation: base, extra, the
// intent's values and payload fields; used collects what it uses.
func readCtx(declared, used map[string]bool, doc string, extra ...string) tctx {
	vars := append([]string{varBase}, extra...)
	for _, v := range intentVars {
		if !slices.Contains(vars, v) {
			vars = append(vars, v)
		}
	}
	return tctx{vars: vars, payload: true, payloadFields: declared, doc: doc, used: used}
}

// fieldCtx is the context of a record mapping: the item ($), base,
// account, parent (for a parent-scoped read only, checked) and extra.
// Fields compared with the intent must read the item, so the intent's
// other values are not available here.
func fieldCtx(used map[string]bool, doc string, extra ...string) tctx {
	return tctx{vars: append([]string{varBase, varAccount, varParent}, extra...), doc: doc, used: used}
}

// needsScope: the variables of used that only an intent-scoped read has
// (given: those the call itself supplies).
func needsScope(used map[string]bool, given ...string) []string {
	var out []string
	for _, v := range append(slices.Clone(intentVars), varPayload) {
		if used[v] && !slices.Contains(given, v) {
			out = append(out, v)
		}
	}
	return out
}

func withDoc(c tctx, doc string) tctx { c.doc = doc; return c }

func (c *compiler) tmpl(s, field string, ctx tctx) *template {
	if strings.Contains(s, "${") {
		c.report(field, "${env:NAME} is only allowed in headers and base_url")
		return nil
	}
	t, err := parseTemplate(s, ctx)
	if err != nil {
		c.report(field, err.Error())
		return nil
	}
	return t
}

func (c *compiler) urlTmpl(s, field string, ctx tctx, needBase bool) *urlTemplate {
	if s == "" {
		c.report(field, "is required")
		return nil
	}
	if strings.Contains(s, "${") {
		c.report(field, "${env:NAME} is only allowed in headers and base_url")
		return nil
	}
	u, err := parseURLTemplate(s, ctx, needBase)
	if err != nil {
		c.report(field, err.Error())
		return nil
	}
	if needBase && c.origin != "" {
		// A filter may cut base_url ({{base | before:/repos/}}/user) but
		// never leave its origin: credentials go there only.
		e := u.path.parts[0].e
		if len(e.filters) > 0 {
			v, ok := (&scope{vars: map[string]string{varBase: c.baseURL}}).value(e)
			if str := text(v); !ok || !strings.HasPrefix(str+"/", c.origin+"/") {
				c.report(field, "{{"+e.src+"}} leaves base_url's origin (credentials are sent to base_url's origin only)")
				return nil
			}
		}
	}
	return u
}

// valueExpr compiles a value expression: a JSON path, a template or a
// constant. Empty is absent (nil).
func (c *compiler) valueExpr(s, field string, ctx tctx) *template {
	if s == "" {
		return nil
	}
	return c.tmpl(s, field, ctx)
}

func (c *compiler) path(s, field string) *jpath {
	if s == "" {
		return nil
	}
	p, err := parsePath(s)
	if err != nil {
		c.report(field, err.Error())
		return nil
	}
	return &p
}

func (c *compiler) liveURL(s, field string, ctx tctx) *liveURL {
	if s == "" {
		return nil
	}
	t := c.tmpl(s, field, ctx)
	if t == nil {
		return nil
	}
	if t.whole() != nil || t.constant() {
		return &liveURL{raw: t}
	}
	if u := c.urlTmpl(s, field, ctx, false); u != nil {
		return &liveURL{u: u}
	}
	return nil
}

func (c *compiler) expectations(m map[string]string, field string, ctx tctx) []expectation {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []expectation
	for _, k := range keys {
		sub := fieldPath(field, k)
		p, err := parsePath(k)
		if err != nil {
			c.report(sub, err.Error())
			continue
		}
		t := c.tmpl(m[k], sub, ctx)
		if t == nil {
			continue
		}
		out = append(out, expectation{path: p, want: t})
	}
	return out
}

func (c *compiler) paths(l []string, field string) []jpath {
	var out []jpath
	for i, s := range l {
		if p := c.path(s, field+"["+strconv.Itoa(i)+"]"); p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// payloadTree compiles a payload mapping; with declared set, its keys
// must be payload fields.
func (c *compiler) payloadTree(v any, field string, ctx tctx, declared map[string]bool) *vnode {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		c.report(field, "must be a mapping of payload fields to values")
		return nil
	}
	if declared != nil {
		for k := range m {
			if !declared[k] {
				c.report(fieldPath(field, k), "is not a field of payload.fields")
				return nil
			}
		}
	}
	return compileTree(m, field, ctx, c.report)
}

func isCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '_' && (c < 'a' || c > 'z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func (c *compiler) compileWrite(a *Adapter, w *WriteConfig, declared map[string]bool, marker bool) {
	if w == nil {
		c.report("write", "is required")
		return
	}
	ws := &writeSpec{}
	ctx := writeCtx(declared, marker)
	used := map[string]bool{}
	ctx.used = used
	defer func() {
		if marker && !used[varMarker] && !c.skipUnder("write") && !c.skipUnder("correlation") {
			c.report("correlation.marker", "is never sent: use {{marker}} in the write (a body field, a metadata entry, the end of a Markdown text)")
		}
	}()
	respCtx := withDoc(ctx, "the write's response")

	switch {
	case c.mcp:
		c.mcpWrite(ws, w, ctx)
	case w.Method == "":
		c.report("write.method", "is required (POST, PUT, PATCH or DELETE)")
	case !slices.Contains(writeMethods, w.Method):
		c.report("write.method", fmt.Sprintf("%q is not POST, PUT, PATCH or DELETE", clip(w.Method)))
	default:
		ws.method = w.Method
	}
	if !c.mcp {
		ws.url = c.target("write", w.URL, w.Tool, w.Arguments, ctx)
	}

	for _, h := range []struct {
		field string
		name  string
		dst   *string
	}{{"write.idempotency_header", w.IdempotencyHeader, &ws.idemHeader}, {"write.attempt_header", w.AttemptHeader, &ws.attemptHeader}} {
		switch {
		case h.name == "":
		case !validHeaderName(h.name):
			c.report(h.field, "is not a valid header name")
		case slices.Contains(reservedHeaders, strings.ToLower(h.name)):
			c.report(h.field, "is set by the HTTP client, not by a route")
		default:
			*h.dst = h.name
		}
	}
	names := make([]string, 0, len(w.Headers))
	for k := range w.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		field := fieldPath("write.headers", name)
		switch {
		case !validHeaderName(name):
			c.report(field, "is not a valid header name")
		case slices.Contains(reservedHeaders, strings.ToLower(name)):
			c.report(field, "is set by the HTTP client, not by a route")
		case sensitiveHeader(name):
			c.report(field, "carries credentials: declare it in the route's headers, from the environment (${env:NAME})")
		case strings.EqualFold(name, w.IdempotencyHeader) || strings.EqualFold(name, w.AttemptHeader):
			c.report(field, "is already set by idempotency_header or attempt_header")
		default:
			if t := c.tmpl(w.Headers[name], field, ctx); t != nil {
				ws.headers = append(ws.headers, tmplHeader{name: name, t: t})
			}
		}
	}

	switch w.Encoding {
	case "", "json":
	case "form":
		ws.form = true
	default:
		c.report("write.encoding", fmt.Sprintf("%q is not json or form", clip(w.Encoding)))
	}
	if w.Body != nil {
		bodyCtx := ctx
		bodyCtx.omitEmpty = true
		if ws.form {
			m, ok := w.Body.(map[string]any)
			if !ok {
				c.report("write.body", "a form body is a mapping of names to values")
			}
			for k, v := range m {
				switch v.(type) {
				case map[string]any, []any:
					c.report(fieldPath("write.body", k), "a form body holds only scalar values")
				}
			}
		}
		ws.body = compileTree(w.Body, "write.body", bodyCtx, c.report)
	}

	// response
	r := w.Response
	for i, code := range r.Success {
		if code < 200 || code > 299 {
			c.report("write.response.success["+strconv.Itoa(i)+"]", "must be a 2xx status")
		}
	}
	ws.success = r.Success
	if r.ExternalID == "" {
		c.report("write.response.external_id", "is required: a JSON path ($.id) or a template")
	} else if t := c.tmpl(r.ExternalID, "write.response.external_id", respCtx); t != nil {
		if t.constant() {
			c.report("write.response.external_id", "is a constant; it must read the response ($.id) or the request ({{payload.id}})")
		}
		ws.externalID = t
	}
	ws.liveURL = c.liveURL(r.LiveURL, "write.response.live_url", respCtx)
	ws.expect = c.expectations(r.Expect, "write.response.expect", respCtx)
	ws.require = c.paths(r.Require, "write.response.require")
	ws.payload = c.payloadTree(r.Payload, "write.response.payload", respCtx, declared)

	for i, o := range w.Outcomes {
		field := "write.outcomes[" + strconv.Itoa(i) + "]"
		var rule outcomeRule
		switch o.Outcome {
		case "rejected":
			rule.class = adapter.Rejected
		case "retryable":
			rule.class, rule.retryable = adapter.Rejected, true
		case "unknown":
			rule.class = adapter.Unknown
		case outcomeKeyReused:
			rule.class = adapter.Unknown
		case "":
			c.report(field+".outcome", "is required (rejected, retryable, unknown or key_reused)")
		default:
			c.report(field+".outcome", fmt.Sprintf("%q is not rejected, retryable, unknown or key_reused", clip(o.Outcome)))
		}
		switch {
		case o.Outcome == outcomeKeyReused && o.Code != "" && o.Code != adapter.CodeKeyReused:
			c.report(field+".code", "is "+adapter.CodeKeyReused+" for outcome key_reused (leave it out)")
		case o.Outcome == outcomeKeyReused:
			o.Code = adapter.CodeKeyReused
		case !isCode(o.Code):
			c.report(field+".code", "is required: a snake_case code of up to 64 characters")
		case o.Code == adapter.CodeKeyReused && o.Outcome != "unknown":
			c.report(field+".outcome", "must be key_reused: an answer that the idempotency key was already used (with other parameters) "+
				"is evidence that an earlier request reached the API, never a rejection")
		}
		if len(o.Message) > 200 || !printable(o.Message) || strings.Contains(o.Message, "{{") {
			c.report(field+".message", "must be a fixed text of up to 200 printable characters")
		}
		for j, code := range o.Status {
			if code < 100 || code > 599 {
				c.report(field+".status["+strconv.Itoa(j)+"]", "is not an HTTP status")
			}
		}
		c.mcpRule(field, o)
		if len(o.Status) == 0 && len(o.Match) == 0 && len(o.Unless) == 0 && len(o.NonEmpty) == 0 && len(o.Headers) == 0 && len(o.HasHeaders) == 0 && o.Text == "" {
			c.report(field, "needs a condition (status, match, unless, non_empty, headers or has_headers; text on an MCP route)")
		}
		hnames := make([]string, 0, len(o.Headers))
		for k := range o.Headers {
			hnames = append(hnames, k)
		}
		slices.Sort(hnames)
		for _, k := range hnames {
			sub := fieldPath(field+".headers", k)
			if !validHeaderName(k) {
				c.report(sub, "is not a valid header name")
				continue
			}
			if t := c.tmpl(o.Headers[k], sub, respCtx); t != nil {
				rule.headers = append(rule.headers, headerMatch{name: k, want: t})
			}
		}
		for j, k := range o.HasHeaders {
			if !validHeaderName(k) {
				c.report(field+".has_headers["+strconv.Itoa(j)+"]", "is not a valid header name")
			}
		}
		rule.has = o.HasHeaders
		rule.status = o.Status
		rule.match = c.expectations(o.Match, field+".match", respCtx)
		rule.unless = c.expectations(o.Unless, field+".unless", respCtx)
		rule.nonEmpty = c.paths(o.NonEmpty, field+".non_empty")
		rule.code, rule.message, rule.text = o.Code, o.Message, o.Text
		if rule.message == "" {
			rule.message = "the API answered " + strings.ReplaceAll(o.Code, "_", " ")
		}
		ws.outcomes = append(ws.outcomes, rule)
	}
	ws.errorCode = c.path(w.ErrorCode, "write.error_code")

	a.policy = adapter.DefaultStatusPolicy()
	if s := w.Status; s != nil {
		lists := []struct {
			field string
			codes []int
			lo    int
			hi    int
		}{{"write.status.definite_4xx", s.Definite4xx, 400, 499}, {"write.status.retryable_4xx", s.Retryable4xx, 400, 499}, {"write.status.unknown", s.Unknown, 400, 599}}
		owner := map[int]string{}
		for _, l := range lists {
			for j, code := range l.codes {
				f := l.field + "[" + strconv.Itoa(j) + "]"
				switch {
				case code < l.lo || code > l.hi:
					c.report(f, fmt.Sprintf("%d is outside %d..%d", code, l.lo, l.hi))
				case owner[code] != "":
					c.report(f, fmt.Sprintf("%d is also listed in %s", code, owner[code]))
				default:
					owner[code] = strings.TrimPrefix(l.field, "write.status.")
				}
			}
		}
		ws.overrides = map[int]string{}
		for code, list := range owner {
			ws.overrides[code] = list
		}
		def := a.policy
		a.policy = adapter.StatusPolicy{
			Definite4xx: func(code int) bool {
				if l, ok := ws.overrides[code]; ok {
					return l == "definite_4xx"
				}
				return def.Definite4xx(code)
			},
			Retryable4xx: func(code int) bool {
				if l, ok := ws.overrides[code]; ok {
					return l == "retryable_4xx"
				}
				return def.Retryable4xx(code)
			},
		}
	}
	a.write = ws
}

func (c *compiler) recordSpec(r *RecordFields, field string, ctx tctx, urlUsesParent bool, declared map[string]bool) recordSpec {
	var rs recordSpec
	if r.ExternalID == "" {
		c.report(field+".external_id", "is required: a JSON path ($.id) or a template")
	} else if t := c.tmpl(r.ExternalID, field+".external_id", ctx); t != nil {
		if t.constant() {
			c.report(field+".external_id", "is a constant; it must read the item ($.id)")
		}
		rs.externalID = t
	}
	rs.liveURL = c.liveURL(r.LiveURL, field+".live_url", ctx)
	rs.authorID = c.valueExpr(r.AuthorID, field+".author_id", ctx)
	if rs.authorID != nil && !readsItem(rs.authorID) {
		c.report(field+".author_id", "must read the item (a $ path such as $.user.id): a constant or {{account}} would make every item look like ours")
	}
	rs.parentID = c.valueExpr(r.ParentID, field+".parent_id", ctx)
	if t := rs.parentID; t != nil && !readsItem(t) && !(urlUsesParent && t.whole() != nil && t.whole().name == varParent && len(t.whole().filters) == 0) {
		c.report(field+".parent_id", "must read the item (a $ path such as $.parent_id), or be exactly {{parent}} when the URL lists one parent's items ({{parent}} in the URL)")
	}
	for _, f := range []struct {
		t    *template
		name string
	}{{rs.externalID, "external_id"}, {rs.liveURL.template(), "live_url"}, {rs.authorID, "author_id"}} {
		if f.t.uses(varParent) {
			c.report(field+"."+f.name, "{{parent}} is only for parent_id (of a parent-scoped read)")
		}
	}
	rs.visibility = c.valueExpr(r.Visibility, field+".visibility", ctx)
	switch {
	case r.VisibilityProbe && (r.Visibility != "" || len(r.VisibilityMap) > 0):
		c.report(field+".visibility.probe", "is instead of from and map: the live URL's answer decides")
	case len(r.VisibilityMap) > 0 && r.Visibility == "":
		c.report(field+".visibility.from", "is required with map: the item field whose value is mapped")
	case rs.visibility != nil && rs.visibility.constant() && len(r.VisibilityMap) == 0:
		c.warn(field+".visibility", "is the constant "+strconvQuote(rs.visibility.src)+": settle cannot see a post that is hidden, moderated or private; map an item field (visibility: {from: $.state, map: {...}}) or probe the live URL (visibility: {probe: true})")
	}
	rs.visMap = r.VisibilityMap
	rs.visProbe = r.VisibilityProbe
	rs.createdAt = c.valueExpr(r.CreatedAt, field+".created_at", ctx)
	if r.Payload != nil {
		rs.payload = c.payloadTree(r.Payload, field+".payload", tctx{vars: []string{varBase}, doc: ctx.doc}, declared)
	}
	return rs
}

func strconvQuote(s string) string { return strconv.Quote(clip(s)) }

func (c *compiler) compileSearch(a *Adapter, s *SearchConfig) {
	ss := &searchSpec{omitsBody: s.OmitsBody, maxPages: s.MaxPages, urlUsed: map[string]bool{}, fieldsUsed: map[string]bool{}}
	urlCtx := readCtx(c.declared, ss.urlUsed, "", varFrom, varTo, varCursor, varPage, varPageSize, varOffset)
	ss.url = c.target("search", s.URL, s.Tool, s.Arguments, urlCtx)
	if c.mcp && s.NextLink {
		c.report("search.next_link", "applies to HTTP routes (a Link header): a tool's listing pages by next_cursor with {{cursor}}, or {{page}}/{{offset}}")
	}
	if s.Items == "" {
		c.report("search.items", "is required: the JSON path of the page's array ($.items, or $ for a top-level array)")
	} else if p := c.path(s.Items, "search.items"); p != nil {
		ss.items = *p
	}
	ss.nextCursor = c.path(s.NextCursor, "search.next_cursor")

	// pagination
	if ss.url != nil {
		uses := func(v string) bool { return ss.url.uses(v) }
		var modes []string
		if s.NextCursor != "" || uses(varCursor) {
			modes = append(modes, "next_cursor")
		}
		if s.NextLink {
			modes = append(modes, "next_link")
		}
		if uses(varPage) || uses(varOffset) {
			modes = append(modes, "{{page}}/{{offset}}")
		}
		switch {
		case len(modes) > 1:
			c.report("search.url", "declares more than one pagination ("+strings.Join(modes, ", ")+"); use one")
		case uses(varCursor) && s.NextCursor == "":
			c.report("search.next_cursor", "is required: search.url uses {{cursor}}")
		case !uses(varCursor) && s.NextCursor != "":
			c.report("search.url", "must use {{cursor}}: search.next_cursor is set")
		case uses(varPage) && uses(varOffset):
			c.report("search.url", "uses both {{page}} and {{offset}}; use one")
		case (uses(varPage) || uses(varOffset)) && s.PageSize <= 0:
			c.report("search.page_size", "is required: search.url counts pages ({{page}} or {{offset}}); give the page size it asks for ({{page_size}})")
		case s.PageSize != 0 && !uses(varPage) && !uses(varOffset) && !uses(varPageSize):
			c.report("search.page_size", "applies only when search.url uses {{page}}, {{offset}} or {{page_size}}")
		case uses(varPageSize) && s.PageSize <= 0:
			c.report("search.page_size", "is required: search.url uses {{page_size}}")
		case uses(varPageSize) && len(modes) == 0:
			c.report("search.url", "asks for pages of {{page_size}} items but declares no way to read the next page, so its first page would be taken "+
				"for the whole listing and a write on a later page for absent; declare the API's pagination (next_cursor with {{cursor}}, next_link: true, "+
				"or {{page}}/{{offset}} with end or total)")
		case s.FirstPage != nil && !uses(varPage):
			c.report("search.first_page", "applies only when search.url uses {{page}}")
		case (uses(varPage) || uses(varOffset)) && s.Total == "" && s.End == "":
			c.report("search.end", "is required: search.url counts pages ({{page}} or {{offset}}), and a page shorter than page_size does not prove the end of a listing "+
				"(APIs cap the page size silently: GitHub at 100, others at an admin setting); declare end: empty_page (read until a page has no items) "+
				"or total: $.<path> (the listing's total count in each page)")
		case (s.Total != "" || s.End != "") && !uses(varPage) && !uses(varOffset):
			f := "search.total"
			if s.End != "" {
				f = "search.end"
			}
			c.report(f, "applies only when search.url counts pages ({{page}} or {{offset}}): a cursor ends a listing by its absence, a Link header by having no rel=\"next\"")
		}
		switch {
		case s.NextCursor != "":
			ss.mode = pageCursor
		case s.NextLink:
			ss.mode = pageLink
		case uses(varPage):
			ss.mode = pageNumber
		case uses(varOffset):
			ss.mode = pageOffset
		}
	}
	switch s.End {
	case "", endEmptyPage: // an empty page ends every page or offset listing
	default:
		c.report("search.end", fmt.Sprintf("%q is not empty_page", clip(s.End)))
	}
	ss.total = c.path(s.Total, "search.total")
	switch {
	case s.PageSize < 0 || s.PageSize > 10000:
		c.report("search.page_size", "must be between 1 and 10000")
	default:
		ss.pageSize = s.PageSize
	}
	ss.firstPage = 1
	if s.FirstPage != nil {
		if *s.FirstPage < 0 {
			c.report("search.first_page", "must not be negative")
		}
		ss.firstPage = *s.FirstPage
	}
	switch {
	case s.MaxPages == 0:
		ss.maxPages = DefaultMaxPages
	case s.MaxPages < 0 || s.MaxPages > maxMaxPages:
		c.report("search.max_pages", fmt.Sprintf("must be between 1 and %d", maxMaxPages))
	}
	switch s.WindowFilter {
	case "", windowCreated:
		ss.window = windowCreated
	case windowUpdated, windowNone:
		ss.window = s.WindowFilter
		if s.Fields.CreatedAt == "" {
			c.report("search.fields.created_at", "is required with window_filter: "+s.WindowFilter+": settle keeps the items created in the window by it")
		}
	default:
		c.report("search.window_filter", fmt.Sprintf("%q is not created_at, updated_at or none", clip(s.WindowFilter)))
	}
	itemCtx := fieldCtx(ss.fieldsUsed, "a listed item")
	ss.fields = c.recordSpec(&s.Fields, "search.fields", itemCtx, ss.url != nil && ss.url.uses(varParent), c.declared)
	if s.Fields.Payload == nil && !s.OmitsBody {
		c.report("search.fields.payload", "is required: candidates are matched by their payload (or set omits_body: true)")
	}
	used := map[string]bool{}
	for k := range ss.urlUsed {
		used[k] = true
	}
	for k := range ss.fieldsUsed {
		used[k] = true
	}
	ss.needs = needsScope(used, varAccount)
	a.search = ss
}

func (c *compiler) compileReadback(a *Adapter, r *ReadbackConfig, search *SearchConfig) {
	rs := &readSpec{used: map[string]bool{}}
	urlCtx := readCtx(c.declared, rs.used, "", varExternalID)
	rs.url = c.target("readback", r.URL, r.Tool, r.Arguments, urlCtx)
	if rs.url != nil && !rs.url.uses(varExternalID) {
		c.report("readback.url", "must use {{external_id}}")
	}
	rs.item = c.path(r.Item, "readback.item")
	ctx := fieldCtx(rs.used, "the readback response", varExternalID)
	scoped := rs.url != nil && rs.url.uses(varParent)
	switch {
	case r.Fields != nil:
		rs.fields = c.recordSpec(r.Fields, "readback.fields", ctx, scoped, nil)
		if r.Fields.Payload == nil {
			c.report("readback.fields.payload", "is required: a readback is checked against the intent's payload")
		}
	case search != nil:
		// Reused: a problem already found in search.fields is not repeated.
		c.prefix = "(as readback.fields, which default to search.fields) "
		c.quiet = true
		rs.fields = c.recordSpec(&search.Fields, "search.fields", ctx, scoped || (a.search != nil && a.search.url != nil && a.search.url.uses(varParent)), nil)
		c.quiet = false
		c.prefix = ""
	default:
		c.report("readback.fields", "is required (without a search section there are no fields to reuse)")
	}
	rs.expect = c.expectations(r.Expect, "readback.expect", readCtx(c.declared, rs.used, "the readback response", varExternalID))
	rs.require = c.paths(r.Require, "readback.require")
	seen := map[string]bool{}
	for i, k := range r.Checks {
		f := "readback.checks[" + strconv.Itoa(i) + "]"
		switch {
		case !slices.Contains(allChecks, k):
			c.report(f, fmt.Sprintf("%q is not a check (%s)", clip(k), strings.Join(allChecks, ", ")))
		case seen[k]:
			c.report(f, "is listed twice")
		}
		seen[k] = true
	}
	if r.Checks != nil {
		for _, must := range []string{adapter.CheckAuthor, adapter.CheckPayload} {
			if !seen[must] {
				c.report("readback.checks", "must include "+must+": a readback that does not check it proves nothing about the write")
				break
			}
		}
		rs.checks = r.Checks
	}
	rs.needs = needsScope(rs.used)
	a.readback = rs
}

var allChecks = []string{adapter.CheckURL, adapter.CheckAuthor, adapter.CheckPayload, adapter.CheckParent, adapter.CheckVisibility}

func (c *compiler) compileStatus(a *Adapter, s *StatusConfig) {
	ss := &statusSpec{used: map[string]bool{}}
	ss.url = c.target("status", s.URL, s.Tool, s.Arguments, readCtx(c.declared, ss.used, ""))
	if ss.url != nil && !ss.url.uses(varRequestID) && !ss.url.uses(varIdempotencyKey) && !ss.url.uses(varIntentID) {
		c.report("status.url", "must use {{request_id}}, {{idempotency_key}} or {{intent_id}} to name the write")
	}
	ctx := readCtx(c.declared, ss.used, "the status response")
	ss.item = c.path(s.Item, "status.item")
	if s.State == "" {
		c.report("status.state", "is required: a JSON path ($.state)")
	} else {
		ss.state = c.tmpl(s.State, "status.state", ctx)
	}
	keys := make([]string, 0, len(s.Map))
	for k := range s.Map {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch s.Map[k] {
		case adapter.StatusCompleted, adapter.StatusProcessing, adapter.StatusFailed:
		default:
			c.report(fieldPath("status.map", k), fmt.Sprintf("%q is not completed, processing or failed", clip(s.Map[k])))
		}
	}
	ss.stateMap = s.Map
	ss.externalID = c.valueExpr(s.ExternalID, "status.external_id", ctx)
	ss.liveURL = c.liveURL(s.LiveURL, "status.live_url", ctx)
	ss.version = c.valueExpr(s.Version, "status.version", ctx)
	ss.appliedVersion = c.valueExpr(s.AppliedVersion, "status.applied_version", ctx)
	ss.code = c.valueExpr(s.Code, "status.code", ctx)
	ss.partialEffects = c.valueExpr(s.PartialEffects, "status.partial_effects", ctx)
	ss.receivedAt = c.valueExpr(s.ReceivedAt, "status.received_at", ctx)
	if s.Payload != nil {
		ss.payload = c.payloadTree(s.Payload, "status.payload", tctx{vars: []string{varBase}, doc: "the status response"}, c.declared)
	}
	ss.expect = c.expectations(s.Expect, "status.expect", ctx)
	ss.require = c.paths(s.Require, "status.require")
	if s.Account != "" {
		if t := c.tmpl(s.Account, "status.account", withDoc(tctx{vars: []string{varBase}}, "the status response")); t != nil {
			if !readsItem(t) {
				c.report("status.account", "must read the status response (a $ path such as $.account)")
			} else {
				ss.account = t
			}
		}
	}
	// A request id is the caller's: two accounts may use one. A lookup by
	// it alone could find another account's write and confirm it.
	scopedByKey := ss.url != nil && (ss.url.uses(varIdempotencyKey) || ss.url.uses(varIntentID)) // both name the account's intent
	usesAccount := ss.url != nil && ss.url.uses(varAccount)
	for _, e := range ss.expect {
		usesAccount = usesAccount || e.want.uses(varAccount)
	}
	if ss.url != nil && !scopedByKey && !usesAccount && s.Account == "" && !s.CredentialScoped && !c.skipUnder("status") {
		c.report("status.url", "looks the write up by {{request_id}} alone, which two accounts may share: a lookup could confirm another account's write; "+
			"scope it by the account ({{account}} in status.url or status.expect, or status.account: $.<path> read from the answer), "+
			"or declare credential_scoped: true if the API keeps request ids per credential")
	}
	ss.needs = needsScope(ss.used, varRequestID, varIdempotencyKey, varAccount)
	a.status = ss
}

func (c *compiler) compileIdentity(a *Adapter, id *IdentityConfig) {
	is := &identitySpec{refresh: id.Refresh}
	is.url = c.target("identity", id.URL, id.Tool, id.Arguments, tctx{vars: []string{varBase}})
	switch id.Method {
	case "":
	case http.MethodGet, http.MethodPost:
		if c.mcp {
			c.report("identity.method", "applies to HTTP routes: an MCP route's identity is a tool call")
		}
	}
	switch id.Method {
	case "", http.MethodGet:
		if id.Body != nil {
			c.report("identity.body", "applies to method POST only")
		}
	case http.MethodPost:
		is.method = http.MethodPost
		if id.Body == nil {
			c.report("identity.body", "is required with method POST: the JSON the read sends (a GraphQL query: {query: \"{ viewer { databaseId } }\"})")
		} else if n := compileTree(id.Body, "identity.body", tctx{}, c.report); n != nil {
			if v, _, err := n.eval(&scope{}, false); err == nil {
				if b, err := json.Marshal(v); err == nil {
					is.body = b
				}
			}
		}
	default:
		c.report("identity.method", fmt.Sprintf("%q is not GET or POST", clip(id.Method)))
	}
	ctx := tctx{vars: []string{varBase}, doc: "the identity response"}
	if id.ID == "" {
		c.report("identity.id", "is required: the JSON path of the credential's identity ($.id)")
	} else if t := c.tmpl(id.ID, "identity.id", ctx); t != nil {
		if !readsItem(t) {
			c.report("identity.id", "must read the identity response (a $ path such as $.id)")
		}
		is.id = t
	}
	is.expect = c.expectations(id.Expect, "identity.expect", ctx)
	is.require = c.paths(id.Require, "identity.require")
	switch {
	case id.Refresh == 0:
		is.refresh = DefaultIdentityRefresh
	case id.Refresh < time.Second || id.Refresh > 24*time.Hour:
		c.report("identity.refresh", "must be between 1s and 24h")
	}
	a.identity = is
	a.ident = &identityCache{}
}

// intentIDPattern matches an intent id (events.IntentID).
const intentIDPattern = `in_[a-z2-7]{32}`

func (c *compiler) compileCorrelation(a *Adapter, cc *CorrelationConfig) {
	cs := &corrSpec{}
	switch {
	case cc.Marker == "":
		c.report("correlation.marker", "is required: a template naming the intent, e.g. \"\\n\\n<!-- settle:{{intent_id}} -->\"")
	case len(cc.Marker) > 256 || !printableText(cc.Marker):
		c.report("correlation.marker", "must be up to 256 printable characters (new lines allowed)")
	default:
		t := c.tmpl(cc.Marker, "correlation.marker", tctx{vars: []string{varIntentID}})
		if t == nil {
			break
		}
		n := 0
		var re strings.Builder
		for _, p := range t.parts {
			switch {
			case p.e == nil:
				re.WriteString(regexp.QuoteMeta(p.lit))
			case len(p.e.filters) > 0:
				c.report("correlation.marker", "takes {{intent_id}} without filters")
				return
			default:
				n++
				re.WriteString("(" + intentIDPattern + ")")
			}
		}
		if n != 1 {
			c.report("correlation.marker", "must use {{intent_id}} exactly once: the marker names the intent")
			return
		}
		cs.marker = t
		cs.re = regexp.MustCompile(re.String())
		cs.whole = len(t.parts) == 1
	}
	if cc.Read == "" {
		c.report("correlation.read", "is required: the JSON path of the item field that carries the marker ($.body, $.metadata.settle_intent)")
	} else if p := c.path(cc.Read, "correlation.read"); p != nil {
		cs.read = *p
	}
	a.corr = cs
}

// printableText allows new lines and tabs but no other control character.
func printableText(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f {
			return false
		}
	}
	return true
}

// --- dedup proof ---

// writesTakeParent: the write sends {{parent}} (URL, headers or body).
func (w *writeSpec) writesTakeParent() bool {
	if w == nil {
		return false
	}
	if w.url != nil && w.url.uses(varParent) {
		return true
	}
	for _, h := range w.headers {
		if h.t.uses(varParent) {
			return true
		}
	}
	return w.body.uses(varParent)
}

// readsItem: the expression reads the listed item (a $ path), so its
// value is the API's, not settle's own.
func readsItem(t *template) bool { return t != nil && t.uses(varDoc) }

// checkDedup enforces the rules that let the reconciler trust a search or
// a retry, and sets Capabilities.SearchAuthoritative:
//   - a search must map author_id from the listed item (candidates are
//     matched by author);
//   - the search is authoritative when author_id, and parent_id where the
//     writes take a parent, read the listed item: only then does a window
//     that closes without a match prove that no write landed in it;
//   - a route whose policy.retry is not never needs a dedup proof: an
//     idempotency key with a retention, or an authoritative search. On a
//     route with a status section the reconciler asks the status query, and
//     its "not found" alone proves nothing, so only a key will do.
func (c *compiler) checkDedup(a *Adapter, cfg RouteConfig, policy events.Policy, policyOK bool) {
	if cfg.Search != nil && a.search != nil && !c.skip("search.fields") {
		f := a.search.fields
		if cfg.Search.Fields.AuthorID == "" {
			c.report("search.fields.author_id", "is required: candidates are matched by author; map the listed item's author id (e.g. $.author_id or $.user.id)")
		}
		// recordSpec refused a parent_id that neither reads the item nor
		// is the {{parent}} of a parent-scoped listing.
		parentOK := !a.write.writesTakeParent() || (f.parentID != nil && !c.reported["search.fields.parent_id"])
		a.caps.SearchAuthoritative = readsItem(f.authorID) && parentOK
	}
	if cfg.Search != nil && a.search != nil && cfg.Search.Fields.CreatedAt == "" && !c.skip("search.fields") && !c.reported["search.fields.created_at"] {
		switch {
		case cfg.Correlation == nil:
			// Whatever the retry policy: a look-alike confirmed is an
			// effect settle did not make named as the intent's (and,
			// when the route may retry, the write never made).
			alt := "or declare a correlation marker"
			if policyOK && policy.Retry != events.PolicyNever {
				alt = "or declare a correlation marker and set policy.retry: never"
			}
			c.report("search.fields.created_at", "is required: without the creation time (or a correlation marker) settle cannot tell a look-alike "+
				"made by hand before the intent, inside the search window, from its own write, and would confirm it; "+
				"map the listed item's creation time (created_at: $.created_at), "+alt)
		case policyOK && policy.Retry != events.PolicyNever:
			c.report("search.fields.created_at", "is required because policy.retry is "+policy.Retry+": without the creation time settle cannot tell a look-alike "+
				"made (by hand, before the intent) from its own write and would confirm it, so the write would never happen; "+
				"map the listed item's creation time (created_at: $.created_at), or set policy.retry: never")
		case cfg.Search.WindowFilter == "":
			c.warn("search.fields.created_at", "is not mapped: settle cannot tell a look-alike created before the write from ours, nor keep the search to the window; map the item's creation time ($.created_at)")
		}
	}
	if !policyOK || policy.Retry == events.PolicyNever || c.skipUnder("capabilities") {
		return
	}
	if cfg.Capabilities.IdempotencyKey && cfg.Capabilities.KeyRetention > 0 {
		// The API deduplicates a retry by the key inside its retention:
		// where the key is the only proof, a retry must fit in it
		// (adapter.ValidateRoute, which serve applies too).
		if !(a.caps.Search && a.caps.SearchAuthoritative) {
			if field, reason := adapter.RetentionShortfall(policy, a.caps); field != "" {
				c.report(field, reason+"; declare the API's real key retention, or shorten policy.attempt_deadline or policy.retention_margin, or set policy.retry: never")
			}
		}
		return
	}
	const never = "; or set policy.retry: never (a lost write is then handed to a human)"
	switch {
	case cfg.Status != nil:
		c.report("policy.retry", "is "+policy.Retry+", but a status query's \"not found\" alone never proves that a write did not land: "+
			"add capabilities.idempotency_key with key_retention (and write.idempotency_header)"+never)
	case cfg.Search != nil:
		if a.search == nil || c.skipUnder("search") || c.reported["search.fields.author_id"] || c.reported["search.fields.parent_id"] {
			return // the search is broken; that problem is already reported
		}
		if !a.caps.SearchAuthoritative {
			c.report("search.fields.parent_id", "is required because policy.retry is "+policy.Retry+" and the route's writes take a parent ({{parent}}): "+
				"without it a search that finds nothing cannot prove that no write landed; map the listed item's parent ($.parent_id), "+
				"or add capabilities.idempotency_key with key_retention"+never)
		}
	default:
		c.report("policy.retry", "is "+policy.Retry+", but the route has no dedup proof: add a search section (author_id and parent_id mapped from the listed item) "+
			"or capabilities.idempotency_key with key_retention (and write.idempotency_header)"+never)
	}
}
