package httproute

import (
	"maps"
	"net/http"
	"os"
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
// could.
func (c *compiler) warn(field, reason string) {
	if !c.quiet && c.first(field) {
		c.warnings = append(c.warnings, &RouteError{Route: c.label, Field: field, Reason: reason})
	}
}

// first: field has no problem yet (nor a failed decode); it has one now.
func (c *compiler) first(field string) bool {
	if c.skip(field) || c.reported[field] {
		return false
	}
	if c.reported == nil {
		c.reported = map[string]bool{}
	}
	c.reported[field] = true
	return true
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
	if c.first(field) {
		c.errs = append(c.errs, &RouteError{Route: c.label, Field: field, Reason: c.prefix + reason})
	}
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
	return word(s, 128, func(i int, c byte) bool { return identByte(c) && (i > 0 || c < '0' || c > '9') })
}

// word: s has 1 to maxLen bytes, each one ok (at its index).
func word(s string, maxLen int, ok func(i int, c byte) bool) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !ok(i, s[i]) {
			return false
		}
	}
	return true
}

// identByte: c is a letter, a digit or '_'.
func identByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// controlFree: v holds no control character but those in allowed.
func controlFree(v, allowed string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && strings.IndexByte(allowed, c) < 0) || c == 0x7f {
			return false
		}
	}
	return true
}

// printable refuses control characters (CR, LF, NUL, ...), which would
// break a header.
func printable(v string) bool { return controlFree(v, "\t") }

// --- headers ---

func validHeaderName(s string) bool {
	return word(s, 128, func(_ int, c byte) bool { return identByte(c) || strings.IndexByte("!#$%&'*+-.^`|~", c) >= 0 })
}

var reservedHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer"}

// headerName reports a header name that is not valid, or that the HTTP
// client sets; ok when it is neither.
func (c *compiler) headerName(field, name string) bool {
	switch {
	case !validHeaderName(name):
		c.report(field, "is not a valid header name")
	case slices.Contains(reservedHeaders, strings.ToLower(name)):
		c.report(field, "is set by the HTTP client, not by a route")
	default:
		return true
	}
	return false
}

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
	a, c := compileWith(&compiler{label: label, failed: failed}, cfg)
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return a, nil
}

// compileWith compiles cfg with c and returns c with its errors and
// warnings.
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
	c.mcp = cfg.MCP != nil
	c.compileBaseURL(a, cfg, env)
	c.compileHeaders(a, cfg.Headers, env)
	timeout := c.compileTimeout(a, cfg)
	if c.mcp {
		c.compileMCP(a, cfg.MCP, env, timeout, cfg.MCPTransport)
	}
	c.compilePayload(a, cfg.Payload)
	c.compileSections(a, cfg)
	c.checkParentUse(a, cfg)
	c.compileCapabilities(a, cfg)
	policy, policyOK := c.compilePolicy(a, cfg)
	c.checkDedup(a, cfg, policy, policyOK)
	c.checkCompare(a, cfg)

	if cfg.Readback == nil && cfg.Status == nil && !policy.TrustResponse && !c.skip("readback") && !c.skip("status") && !c.skip("policy.trust_response") {
		c.report("readback", "is required: a route without a status section or policy.trust_response verifies its writes by reading them back")
	}
	return a, c
}

// compileBaseURL resolves base_url (an HTTP route's), or refuses it and
// headers on an MCP route.
func (c *compiler) compileBaseURL(a *Adapter, cfg RouteConfig, env func(string) (string, bool)) {
	if c.mcp {
		if cfg.BaseURL != "" {
			c.report("base_url", "applies to HTTP routes: a route with an mcp section calls its upstream's tools")
		}
		if len(cfg.Headers) > 0 {
			c.report("headers", "apply to HTTP routes: an MCP route's upstream takes its headers in mcp.headers, or its credentials in mcp.env")
		}
		return
	}
	if cfg.BaseURL == "" {
		c.report("base_url", "is required")
		return
	}
	if strings.Contains(cfg.BaseURL, "{{") {
		c.report("base_url", "takes no {{...}} template (only ${env:NAME})")
		return
	}
	base, _, err := resolveEnv(cfg.BaseURL, c.envFor(cfg.BaseURL, env, true))
	if err != nil {
		c.report("base_url", err.Error())
		return
	}
	u, err := adapter.CheckBaseURL(base, "send them in headers, from the environment")
	if err != nil {
		c.report("base_url", err.Error())
		return
	}
	a.base = strings.TrimRight(u.String(), "/")
	a.origin = u.Scheme + "://" + u.Host
	c.origin, c.baseURL = a.origin, a.base
}

// compileHeaders resolves the route's headers, sent on every call.
func (c *compiler) compileHeaders(a *Adapter, headers []Header, env func(string) (string, bool)) {
	seen := map[string]bool{}
	for _, h := range headers {
		field := fieldPath("headers", h.Name)
		lower := strings.ToLower(h.Name)
		switch {
		case !c.headerName(field, h.Name):
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
}

// compileTimeout checks the route's timeout and builds its HTTP client;
// it returns the timeout in force.
func (c *compiler) compileTimeout(a *Adapter, cfg RouteConfig) time.Duration {
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
	return timeout
}

// compilePayload compiles the payload schema and sets c.declared.
func (c *compiler) compilePayload(a *Adapter, p *PayloadConfig) {
	if p != nil {
		a.schema = &schema{}
		if len(p.Fields) > 0 {
			a.schema.fields = compileFields(p.Fields, "payload.fields", c.report)
		}
		broken := (len(p.Fields) > 0 && a.schema.fields == nil) || c.skip("payload.fields") // reported
		for i, f := range p.NearMatch {
			if d := a.schema.declared(); !broken && (d == nil || !d[f]) {
				c.report("payload.near_match["+strconv.Itoa(i)+"]", "is not a field of payload.fields")
			}
		}
		a.schema.nearMatch = p.NearMatch
		a.normalize = c.compileNormalize(p.Normalize)
	}
	c.declared = a.schema.declared()
}

// compileSections compiles the write and each read section the route has.
func (c *compiler) compileSections(a *Adapter, cfg RouteConfig) {
	if cfg.Correlation != nil {
		c.compileCorrelation(a, cfg.Correlation)
	}
	c.compileWrite(a, cfg.Write, c.declared, cfg.Correlation != nil)
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
}

// checkParentUse requires a parent section where a URL uses {{parent}}.
func (c *compiler) checkParentUse(a *Adapter, cfg RouteConfig) {
	urls := a.urlsUsingParent()
	if len(urls) == 0 || c.skipUnder("parent") {
		return
	}
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
	keys := slices.Sorted(maps.Keys(m))
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
