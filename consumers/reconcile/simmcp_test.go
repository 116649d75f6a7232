package reconcile

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// A route over MCP inside the seeded simulation: examples/routes/
// github_mcp.yaml as written (its timeout shortened), calling the tools
// of the in-repo GitHub-shaped MCP server (fakeapi), which runs in this
// process in front of the world's GitHub fake (the one the HTTP route
// github_issue_comment writes to). Each start of the upstream is a new
// server session over a pipe, as a new process would be; the server's
// faults are taken from a queue per tool:
//
//	route               file             faults of the upstream
//	github_mcp_comment  github_mcp.yaml  reply lost, crash mid-call, restart between calls,
//	                                     slow listing, garbage, a result of the wrong shape,
//	                                     a call refused before dispatch (-32022)
//
// Its intents are counted as their own path (mcp-route) on the world's
// line.

const mcpRouteName = "github_mcp_comment"

// mcpRouteTimeout bounds each tool call of the route: a lost reply costs
// this much real time.
const mcpRouteTimeout = "250ms"

// mcpRouteWorld is the upstream of the MCP route and its pending faults.
type mcpRouteWorld struct {
	srv  *sdk.Server
	wire *fakeapi.MCPWire
	y    *yamlWorld
	ad   *httproute.Adapter

	mu     sync.Mutex
	faults map[string][]string // tool → faults, the next first
	// byBody: faults of the write of one intent, by its body (the
	// upstream sees it with the marker behind it).
	byBody map[string]string
}

// nextFor queues fault for the write of the intent whose body is body,
// whichever call comes first (another intent's retry does not take it).
func (m *mcpRouteWorld) nextFor(body, fault string) {
	m.mu.Lock()
	if m.byBody == nil {
		m.byBody = map[string]string{}
	}
	m.byBody[body] = fault
	m.mu.Unlock()
}

// next queues a fault for the next call of tool.
func (m *mcpRouteWorld) next(tool, fault string) {
	m.mu.Lock()
	m.faults[tool] = append(m.faults[tool], fault)
	m.mu.Unlock()
}

// take is the fault of a call of tool ("" for none).
func (m *mcpRouteWorld) take(tool, body string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for b, f := range m.byBody {
		if body != "" && strings.HasPrefix(body, b) {
			delete(m.byBody, b)
			m.y.count("mcp_route:"+f, 1)
			return f
		}
	}
	q := m.faults[tool]
	if len(q) == 0 {
		return ""
	}
	m.faults[tool] = q[1:]
	m.y.count("mcp_route:"+q[0], 1)
	return q[0]
}

// DropFaults drops the write's faults the submit did not take.
func (m *mcpRouteWorld) DropFaults() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.faults["add_issue_comment"])
	delete(m.faults, "add_issue_comment")
	return n
}

// stop ends every session of the upstream, as its process dying would.
func (m *mcpRouteWorld) stop() {
	for ss := range m.srv.Sessions() {
		_ = ss.Close()
	}
}

// restart ends the upstream's session between two calls and waits until
// settle started it again (a restart takes no simulated time).
func (m *mcpRouteWorld) restart() {
	m.stop()
	m.waitFor(func() bool {
		n := 0
		for range m.srv.Sessions() {
			n++
		}
		return n > 0 && m.ad.Ready()
	})
}

// waitUp waits until the upstream runs: the simulated clock stands still
// while settle restarts it (in real time, which the clock does not
// follow).
func (m *mcpRouteWorld) waitUp() { m.waitFor(m.ad.Ready) }

func (m *mcpRouteWorld) waitFor(cond func() bool) {
	for end := time.Now().Add(5 * time.Second); !cond() && time.Now().Before(end); {
		time.Sleep(2 * time.Millisecond)
	}
}

// Connect starts the upstream: a new server session over a pipe.
func (m *mcpRouteWorld) Connect(ctx context.Context) (sdk.Connection, error) {
	client, server := net.Pipe()
	if _, err := m.srv.Connect(ctx, &sdk.IOTransport{Reader: server, Writer: m.wire.Wrap(server)}, nil); err != nil {
		_, _ = client.Close(), server.Close()
		return nil, err
	}
	return (&sdk.IOTransport{Reader: client, Writer: client}).Connect(ctx)
}

// newMCPRoute starts the in-process upstream in front of the world's
// GitHub fake and compiles github_mcp.yaml against it.
func (s *sim) newMCPRoute(client *http.Client) adapter.Route {
	y := s.y
	m := &mcpRouteWorld{wire: &fakeapi.MCPWire{}, y: y, faults: map[string][]string{}}
	m.srv = fakeapi.NewGitHubMCPServer(fakeapi.GitHubMCPConfig{APIURL: y.github.URL(), Token: y.github.Token(), Faults: m.take, Wire: m.wire,
		// A crash: the process dies before it answers.
		Exit: func() { go m.stop() },
		// A slow listing: it takes a simulated minute.
		Slow: func(ctx context.Context) error { s.clock.Advance(time.Minute); return ctx.Err() }})
	y.mcpr = m
	env := map[string]string{"GITHUB_MCP_SERVER": "in-process", "GITHUB_API_URL": y.github.URL(), "GITHUB_TOKEN": y.github.Token()}
	r := testharness.CompileRoute(s.t, s.exampleFile("github_mcp.yaml", "timeout: 10s", "timeout: "+mcpRouteTimeout), env, func(c *httproute.RouteConfig) {
		c.Name, c.Now, c.Client = mcpRouteName, s.clock.Now, client
		c.MCPTransport = func() sdk.Transport { return m }
	})
	m.ad = r.Adapter.(*httproute.Adapter)
	s.t.Cleanup(func() { _ = m.ad.Close() })
	return r
}

// mcpRouteBehaviours are the faults of the MCP route's upstream. Every
// one but a refusal ends confirmed: the comment was written once, and
// the reconciler finds it through the upstream's read tool, or writes it
// once after proving it absent; a call refused before dispatch is
// rejected, nothing written.
func mcpRouteBehaviours() []behaviour {
	const add, list = "add_issue_comment", "issue_read"
	arm := func(faults ...string) func(s *sim, in *simIntent) {
		return func(s *sim, in *simIntent) {
			for k := 0; k+1 < len(faults); k += 2 {
				s.y.mcpr.next(faults[k], faults[k+1])
			}
		}
	}
	b := func(name string, weight int, a func(s *sim, in *simIntent)) behaviour {
		return behaviour{name: "m_" + name, route: mcpRouteName, weight: weight, want: confirmedOnly(), arm: a,
			after: func(s *sim, _ *simIntent, _ *producer.Result) { s.y.mcpr.waitUp() }}
	}
	refused := b("refused_before_dispatch", 1, func(s *sim, in *simIntent) { s.y.mcpr.nextFor(in.body, fakeapi.MCPRefused) })
	refused.want = []outcome{{fsm.Rejected, ""}}
	return []behaviour{
		b("ok", 2, nil),
		b("reply_lost", 2, arm(add, fakeapi.MCPDropReply)),
		b("upstream_crash_mid_call", 2, arm(add, fakeapi.MCPCrash)),
		// The upstream restarts between two calls: its session ends, and
		// settle starts it again before the write.
		b("upstream_restarted", 2, func(s *sim, in *simIntent) { s.y.mcpr.restart(); s.y.count("mcp_route:restart", 1) }),
		b("slow_listing_reply_lost", 2, arm(add, fakeapi.MCPDropReply, list, fakeapi.MCPSlow)),
		b("garbage_reply", 1, arm(add, fakeapi.MCPGarbage)),
		b("wrong_shape_reply", 1, arm(add, fakeapi.MCPWrongShape)),
		b("listing_lost_reply_lost", 1, arm(add, fakeapi.MCPDropReply, list, fakeapi.MCPDropReply)),
		// Refused before dispatch (a protocol version the upstream does
		// not serve): nothing was written, a definite rejection.
		refused,
		b("lookalike_by_hand_reply_lost", 1, func(s *sim, in *simIntent) {
			s.y.github.Inject(fakeapi.GitHubComment{Issue: 1 + in.k%20, Body: in.body, CreatedAt: s.clock.Now().Add(-20 * time.Second)})
			s.y.mcpr.next(add, fakeapi.MCPDropReply)
		}),
	}
}
