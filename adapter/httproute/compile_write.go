package httproute

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/settle-dev/settle/adapter"
)

// outcomeKeyReused is the outcome of an answer saying the idempotency key
// was already used with another request: class Unknown, code
// adapter.CodeKeyReused.
const outcomeKeyReused = "key_reused"

func isCode(s string) bool {
	return word(s, 64, func(i int, c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9') })
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
	c.writeHeaders(ws, w, ctx)
	c.writeBody(ws, w, ctx)
	c.writeResponse(ws, w.Response, respCtx, declared)
	for i, o := range w.Outcomes {
		ws.outcomes = append(ws.outcomes, c.compileOutcome("write.outcomes["+strconv.Itoa(i)+"]", o, respCtx))
	}
	ws.errorCode = c.path(w.ErrorCode, "write.error_code")
	a.policy = adapter.DefaultStatusPolicy()
	if w.Status != nil {
		a.policy = c.writeStatusPolicy(ws, w.Status, a.policy)
	}
	a.write = ws
}

// writeHeaders compiles the write's idempotency and attempt headers and
// its templated headers.
func (c *compiler) writeHeaders(ws *writeSpec, w *WriteConfig, ctx tctx) {
	for _, h := range []struct {
		field string
		name  string
		dst   *string
	}{{"write.idempotency_header", w.IdempotencyHeader, &ws.idemHeader}, {"write.attempt_header", w.AttemptHeader, &ws.attemptHeader}} {
		if h.name != "" && c.headerName(h.field, h.name) {
			*h.dst = h.name
		}
	}
	for _, name := range slices.Sorted(maps.Keys(w.Headers)) {
		field := fieldPath("write.headers", name)
		switch {
		case !c.headerName(field, name):
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
}

// writeBody compiles the write's encoding and body.
func (c *compiler) writeBody(ws *writeSpec, w *WriteConfig, ctx tctx) {
	switch w.Encoding {
	case "", "json":
	case "form":
		ws.form = true
	default:
		c.report("write.encoding", fmt.Sprintf("%q is not json or form", clip(w.Encoding)))
	}
	if w.Body == nil {
		return
	}
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

// writeResponse compiles what the write's successful response is read
// for.
func (c *compiler) writeResponse(ws *writeSpec, r ResponseConfig, respCtx tctx, declared map[string]bool) {
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
}

// compileOutcome compiles one of write.outcomes: which answer is a
// rejection, a retryable failure or unknown, and its code.
func (c *compiler) compileOutcome(field string, o OutcomeRule, respCtx tctx) outcomeRule {
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
	for _, k := range slices.Sorted(maps.Keys(o.Headers)) {
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
	return rule
}

// writeStatusPolicy compiles write.status: the statuses the route moves
// from one class to another, over def.
func (c *compiler) writeStatusPolicy(ws *writeSpec, s *StatusPolicyConfig, def adapter.StatusPolicy) adapter.StatusPolicy {
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
	ws.overrides = owner
	listed := func(list string, def func(int) bool) func(int) bool {
		return func(code int) bool {
			if l, ok := ws.overrides[code]; ok {
				return l == list
			}
			return def(code)
		}
	}
	return adapter.StatusPolicy{Definite4xx: listed("definite_4xx", def.Definite4xx), Retryable4xx: listed("retryable_4xx", def.Retryable4xx)}
}
