package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/service"
)

// PayloadSchemer is implemented by adapters that can describe their
// payload as a JSON Schema (adapter/httproute): it becomes the payload
// part of the route's submit tool. Without it the payload is any JSON
// value, checked by the route when submitted.
type PayloadSchemer interface {
	PayloadSchema() json.RawMessage
}

// WriteMethoder is implemented by adapters that say which HTTP method
// their write uses (adapter/httproute): POST creates, so its submit tool
// is not destructive.
type WriteMethoder interface {
	WriteMethod() string
}

// Server builds the MCP server of each caller: the tools the caller's
// scopes and limits allow, bound to that caller.
type Server struct {
	cfg    Config
	svc    Service
	log    *slog.Logger
	scrub  *adapter.Scrubber
	routes []routeTool

	gw *gateway

	mu      sync.Mutex
	servers map[string]*callerServer
}

// callerServer is the MCP server of one caller.
type callerServer struct {
	srv *sdk.Server
	h   *handlers
	gw  bool // the gateway's tools are added
}

// routeTool is a route's submit tool, prepared once.
type routeTool struct {
	route       adapter.Route
	payload     json.RawMessage // JSON Schema of the payload
	destructive bool
}

// New validates cfg and returns the server.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Routes = slices.Clone(cfg.Routes)
	s := &Server{cfg: cfg, svc: cfg.Service, log: cfg.Logger, scrub: adapter.NewScrubber(cfg.Secrets...), servers: map[string]*callerServer{}}
	for _, r := range cfg.Routes {
		rt := routeTool{route: r, payload: json.RawMessage(`{}`), destructive: true}
		if ps, ok := r.Adapter.(PayloadSchemer); ok {
			if p := ps.PayloadSchema(); json.Valid(p) {
				rt.payload = p
			}
		}
		if wm, ok := r.Adapter.(WriteMethoder); ok {
			rt.destructive = !strings.EqualFold(wm.WriteMethod(), "POST")
		}
		if d, ok := cfg.Destructive[r.Name]; ok {
			rt.destructive = d
		}
		s.routes = append(s.routes, rt)
	}
	s.gw = newGateway(s)
	return s, nil
}

// instructions tell the model how to use settle's tools.
const instructions = `settle makes side-effecting writes (posts, payments, bookings) for you, at most once each.
Never call the external API yourself: submit each write with the submit_<route> tool.
Give every write a task_id (your task, stable across restarts of the same task) and a step_id (the step within it).
The same task_id and step_id always mean the same write: submitting it again returns the stored result and never writes twice, so it is always safe.
A new task_id or step_id is a new write: only use one when you mean to write again.
Answers have an outcome: confirmed (done, with a receipt), rejected (not done), unknown (it may have happened; settle is settling it — do not retry, ask status), awaiting_approval or needs_human (a person decides).
Unknown is not failed: never retry an unknown write under new ids.`

// callerKey identifies a caller's tool set and the handlers bound to it:
// every field of the caller (its tenant included).
func callerKey(c service.Caller) string {
	return fmt.Sprintf("%q %q %v %q %q %q", c.Name, c.Tenant, c.Dev, c.Scopes, c.Routes, c.Accounts)
}

// For returns the MCP server of caller: its tools are those the caller's
// scopes and route limits allow, and every call acts as the caller (its
// tenant, scopes and limits, through the service). Servers are cached per
// caller. The tools of the routes' upstream MCP servers (the gateway) are
// added once they could be listed.
func (s *Server) For(c service.Caller) *sdk.Server {
	gw := s.gw.ready(context.Background())
	k := callerKey(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, ok := s.servers[k]
	if !ok {
		cs = &callerServer{srv: s.newServer(c), h: &handlers{s: s, c: c}}
		cs.h.addTools(cs.srv)
		s.servers[k] = cs
	}
	if gw && !cs.gw {
		s.gw.addTools(cs.srv, cs.h)
		cs.gw = true
	}
	return cs.srv
}

// newServer is an MCP server without tools: settle's instructions, the
// Tasks extension (its methods, and the middleware that answers a write
// still settling with a task) and tracing.
func (s *Server) newServer(c service.Caller) *sdk.Server {
	caps := &sdk.ServerCapabilities{}
	caps.AddExtension(TasksExtension, map[string]any{})
	srv := sdk.NewServer(&sdk.Implementation{Name: "settle", Title: "settle: at-most-once writes", Version: s.cfg.Version},
		&sdk.ServerOptions{Instructions: instructions, Logger: s.log, Capabilities: caps})
	srv.AddReceivingMiddleware(traceCalls, tasksMiddleware)
	if err := (&handlers{s: s, c: c}).addTaskMethods(srv); err != nil {
		s.log.Error("mcp: the Tasks extension's methods could not be added", "err", err.Error())
	}
	return srv
}

// addTools adds settle's own tools the caller may use.
func (h *handlers) addTools(srv *sdk.Server) {
	s, c := h.s, h.c
	if c.Has(service.ScopeSubmit) {
		for _, rt := range s.routes {
			if c.RouteAllowed(rt.route.Name) {
				srv.AddTool(s.submitTool(rt, c), h.submit(rt))
			}
		}
	}
	if c.Has(service.ScopeRead) {
		srv.AddTool(s.statusTool(c), h.status)
		srv.AddTool(s.pendingTool(c), h.pending)
	}
	if c.Has(service.ScopeOperate) {
		srv.AddTool(approveTool(), h.approve)
		srv.AddTool(resolveTool(), h.resolve)
	}
}

// RunStdio serves caller on one stdio session (newline-delimited JSON-RPC
// on in and out) until the client closes in or ctx ends. Nothing but
// protocol messages is written to out. A line that is not one JSON-RPC
// message is answered with a JSON-RPC error (-32700, -32600) and the
// session goes on.
func (s *Server) RunStdio(ctx context.Context, c service.Caller, in io.Reader, out io.Writer) error {
	if err := c.Validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	go filterLines(ctx, in, pw, w)
	if !s.gw.ready(ctx) {
		go s.awaitGateway(ctx, c)
	}
	err := s.For(c).Run(ctx, &sdk.IOTransport{Reader: pr, Writer: w})
	pr.Close()
	return err
}

// awaitGateway lists the upstreams' tools until they are listed or ctx
// ends, and adds them to the caller's server (its session is told the
// list changed).
func (s *Server) awaitGateway(ctx context.Context, c service.Caller) {
	for !s.gw.ready(ctx) {
		if !s.gw.pending {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(gatewayRetry):
		}
	}
	s.For(c)
}

// result builds a tool result: v as structured content, and the text
// (guidance) followed by v's JSON on one line as text content (for hosts
// that show the model text only). Every string of both, keys included,
// is scrubbed of the configured secrets.
func (s *Server) result(text string, v any, isErr bool) *sdk.CallToolResult {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("mcp: encoding a result failed", "err", err.Error())
		b = []byte(`{"error":{"code":"internal","message":"the answer could not be encoded"}}`)
		isErr = true
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		tree = map[string]any{}
	}
	tree = scrubValue(s.scrub, tree)
	clean, _ := json.Marshal(tree)
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: s.scrub.Scrub(text) + "\n" + string(clean)}},
		StructuredContent: tree,
		IsError:           isErr,
	}
}

// scrubValue scrubs every string (keys included) of a decoded JSON value.
func scrubValue(sc *adapter.Scrubber, v any) any {
	switch x := v.(type) {
	case string:
		return sc.Scrub(x)
	case []any:
		for i := range x {
			x[i] = scrubValue(sc, x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[sc.Scrub(k)] = scrubValue(sc, e)
		}
		return out
	}
	return v
}
