package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/mcp"
	"github.com/settle-dev/settle/service"
	"github.com/settle-dev/settle/service/servicetest"
	"github.com/settle-dev/settle/testharness"
)

// gatewayWorld is a write through settle's MCP gateway beside the same
// tool call made straight to the upstream: the in-repo GitHub-shaped MCP
// server (fakeapi) over streamable HTTP on loopback in front of the
// GitHub fake, and settle's MCP server (stateless streamable HTTP, JSON
// answers) over a service on a real embedded nats-server (fsync always)
// with the route of examples/routes/github_mcp.yaml.
type gatewayWorld struct {
	api              *fakeapi.GitHubAPI
	direct, gateway  *sdk.ClientSession
	account          string
	seq              atomic.Int64
	directN, settleN atomic.Int64
	js               jetstream.JetStream // the gateway's node
	store            *ledger.Store       // the gateway's log
}

// gatewayRoute is the route of examples/routes/github_mcp.yaml.
const gatewayRoute = "github_mcp_comment"

func newGatewayWorld(b *testing.B) *gatewayWorld {
	const token = "ghp_bench_gateway_5e1a9c3b7d2f"
	w := &gatewayWorld{api: fakeapi.NewGitHubAPI(b, fakeapi.WithGitHubToken(token))}
	up := fakeapi.NewGitHubMCPServer(fakeapi.GitHubMCPConfig{APIURL: w.api.URL(), Token: token})
	us := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up }, nil))
	b.Cleanup(us.Close)
	data := testharness.RouteFile(b, "github_mcp.yaml",
		"      command: ${env:GITHUB_MCP_SERVER}\n      args: [stdio]\n      env:\n        GITHUB_PERSONAL_ACCESS_TOKEN: ${env:GITHUB_TOKEN}\n        GITHUB_API_URL: ${env:GITHUB_API_URL}\n",
		"      url: ${env:GITHUB_MCP_URL}\n")
	route := testharness.CompileRoute(b, data, map[string]string{"GITHUB_MCP_URL": us.URL})
	b.Cleanup(func() { _ = route.Adapter.(*httproute.Adapter).Close() })
	env := servicetest.New(b, servicetest.Options{Routes: func(testing.TB, *fakeapi.SocialAPI) []adapter.Route { return []adapter.Route{route} }})
	cfg := mcp.DefaultConfig()
	cfg.Service, cfg.Routes, cfg.Logger = env.Svc, env.Routes, env.Logger
	srv, err := mcp.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	w.js, w.store = env.Node.JS, env.Store
	w.account = w.api.UserID()
	caller := &service.Caller{Name: "bench", Tenant: service.DefaultTenant, Scopes: []string{service.ScopeSubmit, service.ScopeRead}, Accounts: []string{w.account}}
	gs := httptest.NewServer(srv.Handler(func(*http.Request) (*service.Caller, error) { return caller, nil }))
	b.Cleanup(gs.Close)
	connect := func(url string) *sdk.ClientSession {
		c := sdk.NewClient(&sdk.Implementation{Name: "bench-agent", Version: "1"}, nil)
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
		cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	w.direct, w.gateway = connect(us.URL), connect(gs.URL+"/mcp")
	return w
}

// write makes one comment straight to the upstream, or through settle
// (a new task each time: every call is a new write).
func (w *gatewayWorld) write(b *testing.B, viaSettle bool) time.Duration {
	d, _ := w.writeID(b, viaSettle)
	return d
}

// writeID is write, also answering the comment's id (direct) or the
// intent's id (through settle).
func (w *gatewayWorld) writeID(b *testing.B, viaSettle bool) (time.Duration, string) {
	k := w.seq.Add(1)
	args := map[string]any{"owner": "octo-org", "repo": "hello-world", "issue_number": 7, "body": fmt.Sprintf("comment %d", k)}
	cs := w.direct
	if viaSettle {
		cs = w.gateway
		args["task_id"], args["step_id"] = fmt.Sprintf("bench-%d", k), "comment"
	}
	t0 := time.Now()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "add_issue_comment", Arguments: args})
	d := time.Since(t0)
	if err != nil || res.IsError {
		b.Fatalf("add_issue_comment (through settle: %v): %v %+v", viaSettle, err, res)
	}
	if viaSettle {
		w.settleN.Add(1)
	} else {
		w.directN.Add(1)
	}
	if viaSettle {
		m, _ := res.StructuredContent.(map[string]any)
		id, _ := m["intent_id"].(string)
		return d, id
	}
	var v struct {
		ID string `json:"id"`
	}
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*sdk.TextContent); ok {
			_ = json.Unmarshal([]byte(tc.Text), &v)
		}
	}
	return d, v.ID
}

// read gets one comment (get_issue_comment, read-only: the gateway passes
// it through) straight from the upstream or through settle: the cost of
// the gateway's MCP hop alone.
func (w *gatewayWorld) read(b *testing.B, viaSettle bool, id string) time.Duration {
	cs := w.direct
	if viaSettle {
		cs = w.gateway
	}
	n, _ := strconv.ParseInt(id, 10, 64)
	args := map[string]any{"owner": "octo-org", "repo": "hello-world", "comment_id": n}
	t0 := time.Now()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "get_issue_comment", Arguments: args})
	d := time.Since(t0)
	if err != nil || res.IsError {
		b.Fatalf("get_issue_comment (through settle: %v): %v %+v", viaSettle, err, res)
	}
	return d
}

// byHand is the gateway's work without settle: the bytes of intent's
// two events (its record with the write started, and its outcome, read
// back from the log) published on a new subject of the same stream, synced,
// with the same write made straight to the upstream between them.
func (w *gatewayWorld) byHand(b *testing.B, k int, intent string) time.Duration {
	ctx := context.Background()
	last, err := w.store.Stream().GetLastMsgForSubject(ctx, events.Subject(gatewayRoute, intent))
	if err != nil {
		b.Fatal(err)
	}
	first, err := w.store.Stream().GetMsg(ctx, last.Sequence-1)
	if err != nil || first.Subject != last.Subject {
		b.Fatalf("the intent's first event is not just before its outcome: %v", err)
	}
	subject := events.SubjectPrefix + "." + gatewayRoute + ".hand" + strconv.Itoa(k)
	t0 := time.Now()
	ack, err := w.js.PublishMsg(ctx, handMsg(subject, first, fmt.Sprintf("gwhand%d:1", k), 0))
	if err != nil {
		b.Fatal(err)
	}
	w.write(b, false)
	if _, err := w.js.PublishMsg(ctx, handMsg(subject, last, fmt.Sprintf("gwhand%d:2", k), ack.Sequence)); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

// BenchmarkGatewayWrite: a write through settle's MCP gateway (an intent
// recorded and its write started in one synced append, the upstream's
// tool called, its outcome appended) against the same add_issue_comment
// made straight to the upstream MCP server. lone: one caller, the two
// interleaved, each op one of each (direct_p50_ms, gateway_p50_ms,
// gateway_over_direct_p50), beside a raw synced append on the same node
// (hand_p50_ms: the same write straight to the upstream between
// publishes of the intent's two events, byHand; hop_p50_ms: a read tool
// through the gateway less the same read made straight, the agent's MCP
// hop to settle; settle_over_hand_ms: the gateway's p50 less the hop and
// the hand's, settle's own bookkeeping). callers64: 64 callers, b.N calls each way
// (direct_calls/s, gateway_calls/s, direct_over_gateway_rate).
func BenchmarkGatewayWrite(b *testing.B) {
	w := newGatewayWorld(b)
	b.Run("lone", func(b *testing.B) {
		var direct, gateway, hand, readD, readG []time.Duration
		_, comment := w.writeID(b, false)
		if comment == "" {
			b.Fatal("add_issue_comment answered no id")
		}
		for k := 0; k < b.N; k++ {
			direct = append(direct, w.write(b, false))
			d, intent := w.writeID(b, true)
			gateway = append(gateway, d)
			hand = append(hand, w.byHand(b, int(w.seq.Add(1)), intent))
			readD = append(readD, w.read(b, false, comment))
			readG = append(readG, w.read(b, true, comment))
		}
		b.StopTimer()
		dp, gp, hp := medianMs(direct), medianMs(gateway), medianMs(hand)
		hop := medianMs(readG) - medianMs(readD)
		report(b, dp, "direct_p50_ms")
		report(b, gp, "gateway_p50_ms")
		report(b, gp/dp, "gateway_over_direct_p50")
		report(b, hp, "hand_p50_ms")
		report(b, hop, "hop_p50_ms")
		report(b, gp-hop-hp, "settle_over_hand_ms")
	})
	b.Run("callers64", func(b *testing.B) {
		rate := func(viaSettle bool) float64 {
			var next atomic.Int64
			var wg sync.WaitGroup
			t0 := time.Now()
			for range 64 {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						w.write(b, viaSettle)
					}
				})
			}
			wg.Wait()
			return float64(b.N) / time.Since(t0).Seconds()
		}
		d, g := rate(false), rate(true)
		b.StopTimer()
		report(b, d, "direct_calls/s")
		report(b, g, "gateway_calls/s")
		report(b, d/g, "direct_over_gateway_rate")
	})
	if want := w.directN.Load() + w.settleN.Load(); int64(w.api.Effects()) != want {
		b.Fatalf("effects %d, want %d", w.api.Effects(), want)
	}
}
