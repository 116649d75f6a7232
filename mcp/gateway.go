package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/service"
)

// Upstream is implemented by adapters whose route calls the tools of an
// upstream MCP server (adapter/httproute): the gateway offers the
// upstream's own tools.
type Upstream interface {
	// ListTools lists the upstream's tools.
	ListTools(ctx context.Context) ([]*sdk.Tool, error)
	// Tools are the route's write tool ("" when its write calls none) and
	// the tools its steps read with.
	Tools() (write string, reads []string)
	// GatewayTools are the tools the route file passes through; writable
	// is nil when WriteArguments can serve the write tool.
	GatewayTools() (reads, unprotected []string, writable error)
	// WriteArguments maps an agent's arguments of the write tool to the
	// payload, parent and account ("" when the arguments do not give it)
	// of the intent they describe; errors name the argument.
	WriteArguments(args json.RawMessage) (payload json.RawMessage, parent, account string, err error)
	// CallTool calls a tool of the upstream as it is.
	CallTool(ctx context.Context, name string, args json.RawMessage) (*sdk.CallToolResult, error)
}

// Kinds of gateway tools.
type gatewayKind int

const (
	gwWrite       gatewayKind = iota // a settled write
	gwRead                           // passed through
	gwUnprotected                    // passed through, and its answers say unprotected
)

// gatewayTool is one upstream tool the gateway offers.
type gatewayTool struct {
	kind  gatewayKind
	route adapter.Route
	up    Upstream
	tool  *sdk.Tool // as offered
}

// gatewayArgs are the arguments settle adds to an upstream's write tool.
var gatewayArgs = []string{"task_id", "step_id", "account", "wait_seconds"}

// metaUnprotected marks the answer of an unprotected tool.
const metaUnprotected = "settle.dev/unprotected"

// unprotectedNote leads every answer of an unprotected tool.
const unprotectedNote = "UNPROTECTED: settle passed this call to the upstream without recording it. It is not " +
	"protected against running twice, and a lost answer is not settled: if this call's answer was lost, check " +
	"before calling again."

// gatewayRetry is how long after a failed listing of the upstreams'
// tools the gateway lists them again.
const gatewayRetry = 5 * time.Second

// gateway lists the upstreams' tools once and offers them.
type gateway struct {
	s *Server

	mu      sync.Mutex
	loaded  bool
	listing bool
	tried   time.Time
	tools   []*gatewayTool
	pending bool // routes with an upstream exist
}

func newGateway(s *Server) *gateway {
	g := &gateway{s: s}
	for _, r := range s.cfg.Routes {
		if up, ok := r.Adapter.(Upstream); ok {
			if w, _ := up.Tools(); w != "" {
				g.pending = true
			}
		}
	}
	return g
}

// ready lists the upstreams' tools when they are not yet listed (at most
// once per gatewayRetry, one listing at a time, never waiting for
// another's) and reports whether they are.
func (g *gateway) ready(ctx context.Context) bool {
	g.mu.Lock()
	if !g.pending || g.loaded || g.listing || time.Since(g.tried) < gatewayRetry {
		defer g.mu.Unlock()
		return g.loaded
	}
	g.listing, g.tried = true, time.Now()
	g.mu.Unlock()
	tools, err := g.list(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.listing = false
	if err != nil {
		g.s.log.Warn("mcp gateway: the upstream's tools could not be listed; offering them later", "err", g.s.scrub.Scrub(err.Error()))
		return false
	}
	g.tools, g.loaded = tools, true
	return true
}

// list classifies every route's upstream tools: its write tool first
// (a settled write), then reads (annotated readOnlyHint, listed in
// mcp.reads, or read by the route's steps) and unprotected ones. A name
// is offered once (the first route's), never over one of settle's own
// tools; any other tool is not offered.
func (g *gateway) list(ctx context.Context) ([]*gatewayTool, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	type listed struct {
		route adapter.Route
		up    Upstream
		tools []*sdk.Tool
	}
	var all []listed
	for _, r := range g.s.cfg.Routes {
		up, ok := r.Adapter.(Upstream)
		if !ok {
			continue
		}
		if w, _ := up.Tools(); w == "" {
			continue
		}
		ts, err := up.ListTools(cctx)
		if err != nil {
			return nil, errors.Wrapf(err, "route %s", r.Name)
		}
		all = append(all, listed{route: r, up: up, tools: ts})
	}
	taken := map[string]bool{ToolStatus: true, ToolPending: true, ToolApprove: true, ToolResolve: true}
	for _, r := range g.s.cfg.Routes {
		taken[SubmitToolName(r.Name)] = true
	}
	var out []*gatewayTool
	for _, writes := range []bool{true, false} {
		for _, l := range all {
			for _, t := range l.tools {
				gt := g.classify(l.route, l.up, t, writes)
				if gt == nil {
					continue
				}
				if taken[t.Name] {
					g.s.log.Warn("mcp gateway: an upstream tool is not offered: its name is taken", "route", l.route.Name, "tool", t.Name)
					continue
				}
				taken[t.Name] = true
				out = append(out, gt)
			}
		}
	}
	return out, nil
}

// classify makes t a gateway tool of route (its write when writes, else a
// read or an unprotected tool); nil when it is none of these.
func (g *gateway) classify(route adapter.Route, up Upstream, t *sdk.Tool, writes bool) *gatewayTool {
	write, ownReads := up.Tools()
	reads, unprotected, writable := up.GatewayTools()
	gt := &gatewayTool{route: route, up: up}
	switch {
	case writes && t.Name == write:
		if writable != nil {
			g.s.log.Warn("mcp gateway: the write tool is not offered", "route", route.Name, "tool", t.Name, "why", g.s.scrub.Scrub(writable.Error()))
			return nil
		}
		tool, err := writeTool(t, g.s.cfg.MaxWait)
		if err != nil {
			g.s.log.Warn("mcp gateway: the write tool is not offered", "route", route.Name, "tool", t.Name, "why", err.Error())
			return nil
		}
		gt.kind, gt.tool = gwWrite, tool
	case writes || t.Name == write:
		return nil
	case slices.Contains(unprotected, t.Name):
		gt.kind, gt.tool = gwUnprotected, unprotectedTool(t)
	case slices.Contains(reads, t.Name) || slices.Contains(ownReads, t.Name) || (t.Annotations != nil && t.Annotations.ReadOnlyHint):
		gt.kind, gt.tool = gwRead, t
	default:
		g.s.log.Debug("mcp gateway: an upstream tool is not offered (neither read-only, a read nor unprotected)", "route", route.Name, "tool", t.Name)
		return nil
	}
	return gt
}

// writeTool is an upstream's write tool as settle offers it: its name and
// input schema, plus task_id, step_id, account and wait_seconds.
func writeTool(t *sdk.Tool, maxWait time.Duration) (*sdk.Tool, error) {
	var schema map[string]any
	b, err := json.Marshal(t.InputSchema)
	if err == nil {
		err = json.Unmarshal(b, &schema)
	}
	if err != nil || schema == nil {
		schema = map[string]any{"type": "object"}
	}
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	for _, name := range gatewayArgs {
		if _, clash := props[name]; clash {
			return nil, fmt.Errorf("its argument %s is one settle adds", name)
		}
	}
	props["task_id"] = idSchema(taskIDDesc)
	props["step_id"] = idSchema(stepIDDesc)
	props["account"] = idSchema("the account to write as (default: this caller's only account, or the one the arguments give)")
	props["wait_seconds"] = waitSchema(maxWait, "the outcome to be settled")
	schema["properties"] = props
	req, _ := schema["required"].([]any)
	schema["required"] = append(req, "task_id", "step_id")
	out := *t
	out.InputSchema = schema
	out.OutputSchema = nil
	out.Description = strings.TrimSpace(t.Description + "\n\nThrough settle: made at most once per task_id and step_id, " +
		"and answered confirmed, rejected or unknown (settling: do not retry; ask status).")
	ann := sdk.ToolAnnotations{}
	if t.Annotations != nil {
		ann = *t.Annotations
	}
	ann.ReadOnlyHint, ann.IdempotentHint = false, true
	out.Annotations = &ann
	return &out, nil
}

// unprotectedTool is an unprotected tool as settle offers it: its
// description says so.
func unprotectedTool(t *sdk.Tool) *sdk.Tool {
	out := *t
	out.Description = strings.TrimSpace("UNPROTECTED (settle does not record or settle this tool's calls). " + t.Description)
	return &out
}

// addTools adds the caller's gateway tools to srv: writes and unprotected
// tools with the submit scope, reads with the read scope, each of a
// route the caller may use.
func (g *gateway) addTools(srv *sdk.Server, h *handlers) {
	for _, gt := range g.tools {
		if !h.c.RouteAllowed(gt.route.Name) {
			continue
		}
		switch {
		case gt.kind == gwWrite && h.c.Has(service.ScopeSubmit):
			srv.AddTool(gt.tool, h.gatewayWrite(gt))
		case gt.kind == gwRead && h.c.Has(service.ScopeRead), gt.kind == gwUnprotected && h.c.Has(service.ScopeSubmit):
			srv.AddTool(gt.tool, h.passThrough(gt))
		}
	}
}

// gatewayWrite is the handler of an upstream's write tool: its arguments
// map back to the route's payload, parent and account, and the write is
// made as submit_<route> makes it.
func (h *handlers) gatewayWrite(gt *gatewayTool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		a, rest := splitArgs(req.Params.Arguments, gatewayArgs...)
		w := h.writeIDs(a, req, gt.route)
		if a.err != nil {
			return h.refuseArg(a.err), nil
		}
		upArgs, _ := json.Marshal(rest)
		payload, parent, account, err := gt.up.WriteArguments(upArgs)
		if err != nil {
			return h.refuseArg(err), nil
		}
		if account != "" && w.account != "" && account != w.account {
			return h.refuseArg(argErr("account", "differs from the account the tool's arguments give (%q)", account)), nil
		}
		if account != "" {
			w.account = account
		}
		w.payload, w.parent = payload, parent
		return h.write(ctx, w), nil
	}
}

// passThrough is the handler of a read or an unprotected tool: the call
// goes to the upstream as it is, and its answer comes back scrubbed of
// the configured secrets (an unprotected one says so).
func (h *handlers) passThrough(gt *gatewayTool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		args := req.Params.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		res, err := gt.up.CallTool(ctx, gt.tool.Name, args)
		if err != nil {
			return h.upstreamFailed(gt, err), nil
		}
		res = h.s.scrubResult(res)
		if gt.kind == gwUnprotected {
			res.Content = append([]sdk.Content{&sdk.TextContent{Text: unprotectedNote}}, res.Content...)
			if res.Meta == nil {
				res.Meta = sdk.Meta{}
			}
			res.Meta[metaUnprotected] = true
		}
		return res, nil
	}
}

// upstreamFailed answers a pass-through call that got no answer: what is
// known of whether it ran.
func (h *handlers) upstreamFailed(gt *gatewayTool, err error) *sdk.CallToolResult {
	var ce *adapter.CallError
	class := adapter.Unknown
	if errors.As(err, &ce) {
		class = ce.Class
	}
	h.s.log.Warn("mcp gateway: an upstream call failed", "route", gt.route.Name, "tool", gt.tool.Name, "err", h.s.scrub.Scrub(err.Error()))
	msg := "the upstream MCP server did not answer this read; calling again is safe."
	switch {
	case class == adapter.NotSent:
		msg = "the upstream MCP server could not be reached; nothing was sent. Calling again later is safe."
	case class == adapter.Rejected:
		msg = "the upstream MCP server refused the call before running the tool."
	case gt.kind == gwUnprotected:
		msg = unprotectedNote + " No answer came from the upstream MCP server: the call may have taken effect."
	}
	res := h.refuse(CodeUnavailable, "", msg, nil)
	if gt.kind == gwUnprotected {
		res.Meta = sdk.Meta{metaUnprotected: true}
	}
	return res
}

// scrubResult is a copy of an upstream's result with every string of its
// text content and structured content scrubbed of the configured secrets.
func (s *Server) scrubResult(res *sdk.CallToolResult) *sdk.CallToolResult {
	out := *res
	out.Content = make([]sdk.Content, 0, len(res.Content))
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			c = &sdk.TextContent{Text: s.scrub.Scrub(tc.Text), Annotations: tc.Annotations, Meta: tc.Meta}
		}
		out.Content = append(out.Content, c)
	}
	if res.StructuredContent != nil {
		var tree any
		if b, err := json.Marshal(res.StructuredContent); err == nil && json.Unmarshal(b, &tree) == nil {
			out.StructuredContent = scrubValue(s.scrub, tree)
		}
	}
	return &out
}
