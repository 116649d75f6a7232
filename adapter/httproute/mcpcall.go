package httproute

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// Routes over MCP: a route with an mcp section calls the tools of an
// upstream MCP server instead of URLs. Each step's tool and arguments are
// a urlTemplate whose tool is set (the arguments a value tree templated
// like write.body), so the compiler's rules, the scopes and the record
// mapping are those of HTTP routes; only the call and the reading of its
// answer differ. A result is read from structuredContent, or from a text
// content block that is JSON.

// DefaultMaxResult bounds one tool result of a route without
// mcp.max_result.
const DefaultMaxResult = adapter.MaxResponseBody

// methodToolCall is the Method of a SentRequest or readReq of an MCP
// route; Path (url) is the tool's name, Body its arguments.
const methodToolCall = "tools/call"

// Outcome codes of tool calls.
const (
	// CodeToolError: the tool answered isError and no outcome rule of the
	// route classifies the answer.
	CodeToolError = "tool_error"
	// CodeNoAnswer: the call was written to the upstream and no answer
	// came (timeout, session lost, the process died, the stream cut).
	CodeNoAnswer = "mcp_no_answer"
	// CodeUpstreamDown: the upstream could not be reached; nothing was
	// sent.
	CodeUpstreamDown = "mcp_upstream_down"
	// CodeResultTooLarge: the result is over mcp.max_result.
	CodeResultTooLarge = "result_too_large"
	// CodeBadAnswer: the upstream answered something that is not
	// JSON-RPC, or not a tool result.
	CodeBadAnswer = "mcp_bad_answer"
)

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.\-/]{1,128}$`)

// passedEnv are the variables of settle's environment a command gets
// besides its declared env.
var passedEnv = []string{"PATH", "HOME", "TMPDIR", "LANG"}

// mcpLimits are one route's bounds on its calls of a (shared) upstream.
type mcpLimits struct {
	timeout   time.Duration
	maxResult int
}

// call calls tool once with args (a JSON object). Its errors are
// *adapter.CallError: NotSent when nothing reached the upstream;
// Rejected for a JSON-RPC error the upstream answers before running a
// tool (parse error, invalid request, method not found, invalid params);
// Unknown for every other error after the request was written (no
// answer within the timeout, the session or the process lost, an answer
// that is not JSON-RPC or not a tool result, another JSON-RPC error) and
// for a result over max_result.
func (u *upstream) call(ctx context.Context, tool string, args []byte, lim mcpLimits) (*sdk.CallToolResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, &adapter.CallError{Class: adapter.NotSent, Code: "cancelled_before_send", Retryable: true, Message: "the call was cancelled before it was sent"}
	}
	cs, st, err := u.connected()
	if err != nil {
		return nil, err
	}
	cctx, cancel := detached(ctx, lim.timeout)
	defer cancel()
	res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		return nil, u.callError(cs, st, cctx, err, lim)
	}
	if res == nil {
		return nil, &adapter.CallError{Class: adapter.Unknown, Code: CodeBadAnswer, Message: "the upstream answered no result"}
	}
	st.answered.Store(true)
	if b, err := json.Marshal(res); err != nil || len(b) > lim.maxResult {
		return nil, tooLarge(lim)
	}
	return res, nil
}

// detached is ctx's cancellation and deadline, bounded by timeout,
// without ctx's values: a call of the upstream carries nothing of its
// caller's transport. The go-sdk's streamable server keeps the agent's
// MCP-Protocol-Version in a request's context, and its streamable client
// sends a version found in the context as the upstream session's; a
// gateway call made inside an agent's request would announce the
// agent's version, which the upstream may refuse before running the
// tool.
func detached(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	d, cancel := context.WithCancelCause(context.Background())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	dl, ok := ctx.Deadline()
	if at := time.Now().Add(timeout); !ok || at.Before(dl) {
		dl = at
	}
	dctx, dcancel := context.WithDeadline(d, dl)
	return dctx, func() {
		stop()
		dcancel()
		cancel(nil)
	}
}

func tooLarge(lim mcpLimits) error {
	return &adapter.CallError{Class: adapter.Unknown, Code: CodeResultTooLarge,
		Message: fmt.Sprintf("the tool result is over %d bytes (mcp.max_result)", lim.maxResult)}
}

// callError classifies a failed call (see call); a session that may be
// broken is dropped, and the upstream started again.
func (u *upstream) callError(cs *sdk.ClientSession, st *connState, cctx context.Context, err error, lim mcpLimits) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		switch we.Code {
		case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams,
			// Refused at the transport, before dispatch (the 2026-07-28
			// specification: headers that do not match the body, client
			// capabilities missing, a protocol version not served).
			sdk.CodeHeaderMismatch, sdk.CodeMissingRequiredClientCapabilities, sdk.CodeUnsupportedProtocolVersion:
			return &adapter.CallError{Class: adapter.Rejected, Code: "mcp_refused",
				Message: fmt.Sprintf("the upstream refused the call before running the tool (JSON-RPC error %d)", we.Code)}
		}
		return &adapter.CallError{Class: adapter.Unknown, Code: "mcp_error",
			Message: fmt.Sprintf("the upstream answered JSON-RPC error %d, which does not prove whether the tool ran", we.Code)}
	}
	switch {
	case st.tooLarge.Load():
		u.drop(cs)
		return tooLarge(lim)
	case st.garbage.Load():
		u.drop(cs)
		return &adapter.CallError{Class: adapter.Unknown, Code: CodeBadAnswer,
			Message: "the upstream answered something that is not JSON-RPC (its session is restarted)"}
	case cctx.Err() == nil && !errors.Is(err, sdk.ErrConnectionClosed) && !st.lost():
		// An answer came and is not a tool result.
		return &adapter.CallError{Class: adapter.Unknown, Code: CodeBadAnswer,
			Message: "the upstream's answer is not a tool result"}
	}
	u.drop(cs)
	msg := "the call was sent to the MCP upstream and no answer came within " + lim.timeout.String()
	if t := st.exitText(); t != "" {
		msg = "the call was sent to the MCP upstream and " + t + " before answering"
	} else if cctx.Err() == nil {
		msg = "the call was sent to the MCP upstream and its session was lost before an answer came"
	}
	return &adapter.CallError{Class: adapter.Unknown, Code: CodeNoAnswer, Message: msg}
}

// read calls a read tool and answers its document as a 200 response; a
// result with isError, or without a JSON document, is a failed read.
func (u *upstream) read(ctx context.Context, tool string, args []byte, lim mcpLimits) (*adapter.Response, error) {
	res, err := u.call(ctx, tool, args, lim)
	if err != nil {
		var ce *adapter.CallError
		if errors.As(err, &ce) && ce.Class == adapter.Rejected {
			ce.Class = adapter.Unknown // a read refused proves nothing about the write
		}
		return nil, err
	}
	if res.IsError {
		return nil, &adapter.CallError{Class: adapter.Unknown, Code: CodeToolError, Message: "the upstream's read tool answered an error"}
	}
	doc, _, ok := resultDoc(res)
	if !ok {
		return nil, adapter.Unparseable(http.StatusOK, "a tool result (neither structuredContent nor a text block holds a JSON document)")
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, adapter.Unparseable(http.StatusOK, "a tool result")
	}
	return &adapter.Response{StatusCode: http.StatusOK, Body: body}, nil
}

// resultDoc is a result's JSON document: its structuredContent, or else
// its text content when that is JSON. text is the text content, joined.
func resultDoc(res *sdk.CallToolResult) (doc any, text string, ok bool) {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, isText := c.(*sdk.TextContent); isText {
			b.WriteString(tc.Text)
		}
	}
	text = b.String()
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil {
			if d, err := decodeJSON(raw); err == nil {
				return d, text, true
			}
		}
	}
	if t := bytes.TrimSpace([]byte(text)); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		if d, err := decodeJSON(t); err == nil {
			return d, text, true
		}
	}
	return nil, text, false
}

// Ready reports whether the route's MCP upstream is usable (true for an
// HTTP route): false while it is down, from the end of its session (its
// process exited) until it runs again. It starts nothing.
func (a *Adapter) Ready() bool { return a.up == nil || a.up.up() }

// UpstreamReady is nil when the route's MCP upstream is running (it is
// started when it has not been yet), or says why it is not: down since
// its process exited, restarting after failed starts. nil for an HTTP
// route. It fits api.ReadyCheck's Check.
func (a *Adapter) UpstreamReady(ctx context.Context) error {
	if a.up == nil {
		return nil
	}
	if err := a.up.ready(); err != nil {
		return errors.New(a.scrub.Scrub(err.Error()))
	}
	return nil
}

// Close ends the route's use of its MCP upstream: the last route of the
// file that shares it stops its process. An HTTP route's idle connections
// are closed (a call after Close dials again).
func (a *Adapter) Close() error {
	if a.client != nil {
		a.client.CloseIdleConnections()
	}
	if a.up == nil {
		return nil
	}
	return a.up.release()
}

// ListTools lists the upstream's tools (every page), for a probe and the
// gateway. An HTTP route has none.
func (a *Adapter) ListTools(ctx context.Context) ([]*sdk.Tool, error) {
	if a.up == nil {
		return nil, nil
	}
	cs, _, err := a.up.connected()
	if err != nil {
		return nil, a.scrub.Error(err)
	}
	cctx, cancel := detached(ctx, a.mcpLim.timeout)
	defer cancel()
	var out []*sdk.Tool
	for t, err := range cs.Tools(cctx, nil) {
		if err != nil {
			return nil, a.errorf("tools/list: %w", &adapter.CallError{Class: adapter.Unknown, Code: CodeNoAnswer, Message: "the upstream did not list its tools"})
		}
		out = append(out, t)
		if len(out) > 10000 {
			return nil, a.errorf("tools/list: the upstream lists more than 10000 tools")
		}
	}
	return out, nil
}

// Tools are the tools the route calls: its write's first, then its
// reads', each once.
func (a *Adapter) Tools() (write string, reads []string) {
	if a.write != nil && a.write.url != nil {
		write = a.write.url.tool
	}
	add := func(u *urlTemplate) {
		if u != nil && u.tool != "" && !slices.Contains(reads, u.tool) {
			reads = append(reads, u.tool)
		}
	}
	if a.search != nil {
		add(a.search.url)
	}
	if a.readback != nil {
		add(a.readback.url)
	}
	if a.status != nil {
		add(a.status.url)
	}
	if a.identity != nil {
		add(a.identity.url)
	}
	return write, reads
}

// request renders a read's request: a GET of its URL, or a call of its
// tool with its arguments.
func (a *Adapter) request(u *urlTemplate, s *scope, strict bool) (readReq, bool, error) {
	if u.tool == "" {
		str, ok, err := u.render(s, strict)
		return readReq{method: http.MethodGet, url: str}, ok, err
	}
	body, err := toolArgs(u.args, s, strict)
	if err != nil {
		return readReq{}, false, err
	}
	return readReq{method: methodToolCall, tool: u.tool, body: body}, true, nil
}

// toolArgs renders a tool's arguments: a JSON object ({} when none).
func toolArgs(n *vnode, s *scope, strict bool) ([]byte, error) {
	if n == nil {
		return []byte("{}"), nil
	}
	v, _, err := n.eval(s, strict)
	if err != nil {
		return nil, err
	}
	if _, isObj := v.(map[string]any); !isObj {
		return nil, errors.New("the arguments are not an object")
	}
	return json.Marshal(v)
}

// renderToolWrite renders an MCP route's write: the tool's name as Path,
// its arguments as Body.
func (a *Adapter) renderToolWrite(s *scope) (events.SentRequest, error) {
	body, err := toolArgs(a.write.url.args, s, true)
	if err != nil {
		return events.SentRequest{}, adapter.InvalidRequest("invalid_request", err.Error())
	}
	return events.SentRequest{Method: methodToolCall, Path: a.write.url.tool, ContentType: "application/json", Body: string(body)}, nil
}

// sendToolWrite calls the write's tool once with the recorded arguments
// and classifies the result: isError by write.outcomes (first match;
// none: unknown, tool_error), a success by write.response.
func (a *Adapter) sendToolWrite(ctx context.Context, s *scope, canon json.RawMessage, sent events.SentRequest) (adapter.WriteResult, error) {
	if sent.Method != methodToolCall || sent.Path != a.write.url.tool || !json.Valid([]byte(sent.Body)) {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_request", "the recorded request is not a call of the route's write tool")
	}
	res, err := a.up.call(ctx, sent.Path, []byte(sent.Body), a.mcpLim)
	if err != nil {
		return adapter.WriteResult{}, err
	}
	doc, txt, ok := resultDoc(res)
	s.text = txt
	if ok {
		if m := s.vars[varMarker]; m != "" {
			doc = stripText(doc, m)
		}
		s.doc, s.hasDoc = doc, true
	}
	if res.IsError {
		for i := range a.write.outcomes {
			r := &a.write.outcomes[i]
			if r.matches(0, s) {
				return adapter.WriteResult{}, &adapter.CallError{Class: r.class, Code: r.code, Retryable: r.retryable, Message: r.message}
			}
		}
		return adapter.WriteResult{}, &adapter.CallError{Class: adapter.Unknown, Code: CodeToolError,
			Message: "the tool answered an error that no outcome rule of the route classifies: settle cannot tell whether it wrote"}
	}
	if !ok {
		return adapter.WriteResult{}, adapter.Unparseable(0, "the write")
	}
	return a.writeSuccess(0, s, canon)
}

// --- compiling ---

// target compiles a step's URL, or on an MCP route its tool and
// arguments.
func (c *compiler) target(step, u, tool string, args any, ctx tctx) *urlTemplate {
	if !c.mcp {
		if tool != "" {
			c.report(step+".tool", "applies to a route with an mcp section (an HTTP route's "+step+" has a url)")
		}
		if args != nil {
			c.report(step+".arguments", "applies to a route with an mcp section (an HTTP route's "+step+" has a url)")
		}
		return c.urlTmpl(u, step+".url", ctx, true)
	}
	if u != "" {
		c.report(step+".url", "applies to HTTP routes: a step of a route with an mcp section calls a tool (tool and arguments)")
	}
	// A tool that is absent or malformed is reported, and its arguments
	// still compiled, so that no rule on what they use reports again.
	switch {
	case tool == "":
		c.report(step+".tool", "is required: the name of the upstream's tool this step calls")
	case !toolNameRE.MatchString(tool):
		c.report(step+".tool", fmt.Sprintf("%q is not a tool name (letters, digits, _ . - /, up to 128)", clip(tool)))
	}
	t := &urlTemplate{src: tool, path: &template{}, tool: tool}
	if args != nil {
		if _, isMap := args.(map[string]any); !isMap {
			c.report(step+".arguments", "must be a mapping of argument names to values")
			return nil
		}
		if strings.Contains(fmt.Sprint(args), "${") {
			c.report(step+".arguments", "${env:NAME} is only allowed in the mcp section")
			return nil
		}
		actx := ctx
		actx.omitEmpty = true
		if t.args = compileTree(args, step+".arguments", actx, c.report); t.args == nil {
			return nil
		}
	}
	return t
}

// mcpWrite compiles the write of an MCP route: tool and arguments; the
// arguments are its body for every rule on what a write sends.
func (c *compiler) mcpWrite(ws *writeSpec, w *WriteConfig, ctx tctx) {
	for _, f := range []struct {
		field string
		set   bool
	}{{"write.method", w.Method != ""}, {"write.body", w.Body != nil}, {"write.encoding", w.Encoding != ""},
		{"write.idempotency_header", w.IdempotencyHeader != ""}, {"write.attempt_header", w.AttemptHeader != ""},
		{"write.headers", len(w.Headers) > 0}, {"write.status", w.Status != nil}, {"write.error_code", w.ErrorCode != ""},
		{"write.response.success", len(w.Response.Success) > 0}} {
		if f.set {
			c.report(f.field, "applies to HTTP routes: the write of a route with an mcp section is a tool and its arguments ({{idempotency_key}} in an argument sends the key)")
		}
	}
	ws.method = methodToolCall
	ws.url = c.target("write", w.URL, w.Tool, w.Arguments, ctx)
	if ws.url != nil {
		ws.body = ws.url.args
	}
}

// mcpRule checks an outcome rule of an MCP route: it classifies a result
// with isError, by its text or its document, never by HTTP status or
// headers.
func (c *compiler) mcpRule(field string, o OutcomeRule) {
	if !c.mcp {
		if o.Text != "" {
			c.report(field+".text", "applies to a route with an mcp section (an HTTP answer is matched by status, match and headers)")
		}
		return
	}
	if len(o.Status) > 0 || len(o.Headers) > 0 || len(o.HasHeaders) > 0 {
		c.report(field, "status, headers and has_headers apply to HTTP routes: a tool's error result is matched by text, match, unless or non_empty")
	}
}

// compileMCP checks the mcp section and builds the route's upstream; it
// starts nothing. dial (Go only) replaces the command or URL.
func (c *compiler) compileMCP(a *Adapter, m *MCPConfig, env func(string) (string, bool), timeout time.Duration, dial func() sdk.Transport) {
	a.mcpLim = mcpLimits{timeout: timeout, maxResult: m.MaxResult}
	switch {
	case m.MaxResult == 0:
		a.mcpLim.maxResult = DefaultMaxResult
	case m.MaxResult < 1024 || m.MaxResult > 64<<20:
		c.report("mcp.max_result", "must be between 1024 and 67108864 bytes")
	}
	up := &upstream{route: a.name, connectTimeout: timeout, frameLimit: a.mcpLim.maxResult + frameSlack, dial: dial}
	r := mcpResolver{c: c, env: env}
	var secrets []string
	switch {
	case m.Command != "" && m.URL != "":
		c.report("mcp", "declares both command (stdio) and url (streamable HTTP); use one")
	case m.Command == "" && m.URL == "":
		c.report("mcp", "needs command (an upstream settle starts, over stdio) or url (a streamable HTTP endpoint)")
	case m.Command != "":
		secrets = c.mcpCommand(up, m, r)
	default:
		secrets = c.mcpURL(up, m, r)
	}
	if dial == nil {
		up.key = upstreamKey(up)
	}
	a.scrub = a.scrub.Merge(adapter.NewScrubber(secrets...))
	a.up = up
}

// upstreamKey is what makes two declarations the same upstream: the
// command, its arguments and environment, or the URL and headers.
func upstreamKey(up *upstream) string {
	parts := append([]string{up.command, up.url}, up.args...)
	parts = append(parts, "\x00env")
	parts = append(parts, up.env...)
	for _, h := range up.headers {
		parts = append(parts, h.name+": "+string(h.value))
	}
	b, _ := json.Marshal(parts)
	return string(b)
}

// mcpResolver resolves the ${env:NAME} of the mcp section's values.
type mcpResolver struct {
	c   *compiler
	env func(string) (string, bool)
}

func (r mcpResolver) resolve(field, s string) string {
	if strings.Contains(s, "{{") {
		r.c.report(field, "takes no {{...}} template (only ${env:NAME})")
		return ""
	}
	v, _, err := resolveEnv(s, r.c.envFor(s, r.env, false))
	if err != nil {
		r.c.report(field, err.Error())
		return ""
	}
	if !printable(v) {
		r.c.report(field, "contains control characters")
		return ""
	}
	return v
}

// mcpCommand compiles a stdio upstream: command, args and env; it
// returns the credentials among env's values.
func (c *compiler) mcpCommand(up *upstream, m *MCPConfig, r mcpResolver) (secrets []string) {
	if len(m.Headers) > 0 {
		c.report("mcp.headers", "applies to url: a command gets its credentials in mcp.env")
	}
	up.command = r.resolve("mcp.command", m.Command)
	for i, x := range m.Args {
		up.args = append(up.args, r.resolve(fmt.Sprintf("mcp.args[%d]", i), x))
	}
	names := make([]string, 0, len(m.Env))
	for k := range m.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if !validEnvName(k) {
			c.report(fieldPath("mcp.env", k), "is not an environment variable name")
			continue
		}
		up.env = append(up.env, k+"="+r.resolve(fieldPath("mcp.env", k), m.Env[k]))
		if sensitiveEnv(k) {
			secrets = append(secrets, envValues(m.Env[k], r.env)...)
		}
	}
	return secrets
}

// mcpURL compiles a streamable HTTP upstream: url and headers; it
// returns the credentials among the headers' values.
func (c *compiler) mcpURL(up *upstream, m *MCPConfig, r mcpResolver) (secrets []string) {
	if len(m.Args) > 0 || len(m.Env) > 0 {
		c.report("mcp.url", "takes no args or env: they are a command's")
	}
	if raw := r.resolve("mcp.url", m.URL); raw != "" {
		u, err := adapter.CheckBaseURL(raw, "send them in mcp.headers, from the environment")
		if err != nil {
			c.report("mcp.url", err.Error())
		} else {
			up.url = u.String()
		}
	}
	for _, h := range m.Headers {
		field := fieldPath("mcp.headers", h.Name)
		v := r.resolve(field, h.Value)
		switch {
		case !validHeaderName(h.Name):
			c.report(field, "is not a valid header name")
		case sensitiveHeader(h.Name) && !strings.Contains(h.Value, "${env:"):
			c.report(field, "carries credentials, which must come from the environment (${env:NAME}); a route file holds no secret")
		default:
			up.headers = append(up.headers, resolvedHeader{name: h.Name, value: secret(v)})
			if sensitiveHeader(h.Name) {
				secrets = append(secrets, envValues(h.Value, r.env)...)
			}
		}
	}
	return secrets
}

// sensitiveEnv: an environment variable whose name says it holds a
// credential (its value is scrubbed from what the adapter returns).
func sensitiveEnv(name string) bool {
	n := strings.ToUpper(name)
	for _, w := range []string{"TOKEN", "SECRET", "KEY", "PASSWORD", "PASS", "CREDENTIAL", "AUTH"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
