package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/fakeapi"
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
	js               jetstream.JetStream // the gateway's node, for raw appends
}

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
	w.js = env.Node.JS
	testharness.CreateStream(b, w.js, jetstream.StreamConfig{Name: "BENCH_GW_RAW", Subjects: []string{"bench.gwraw"}, Storage: jetstream.FileStorage})
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
	return d
}

// rawAppend is one synced JetStream publish of an event-sized message on
// the gateway's node: the unit the gateway's cost is stated in.
func (w *gatewayWorld) rawAppend(b *testing.B, payload []byte) time.Duration {
	t0 := time.Now()
	if _, err := w.js.Publish(context.Background(), "bench.gwraw", payload); err != nil {
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
// (raw_append_p50_ms; added_over_two_appends: the gateway's p50 less the
// direct call's, in units of two raw appends). callers64: 64 callers, b.N calls each way
// (direct_calls/s, gateway_calls/s, direct_over_gateway_rate).
func BenchmarkGatewayWrite(b *testing.B) {
	w := newGatewayWorld(b)
	b.Run("lone", func(b *testing.B) {
		var direct, gateway, raw []time.Duration
		payload := make([]byte, 1024)
		for k := 0; k < b.N; k++ {
			direct = append(direct, w.write(b, false))
			gateway = append(gateway, w.write(b, true))
			raw = append(raw, w.rawAppend(b, payload))
		}
		b.StopTimer()
		dp, gp, rp := medianMs(direct), medianMs(gateway), medianMs(raw)
		report(b, dp, "direct_p50_ms")
		report(b, gp, "gateway_p50_ms")
		report(b, gp/dp, "gateway_over_direct_p50")
		report(b, rp, "raw_append_p50_ms")
		report(b, (gp-dp)/(2*rp), "added_over_two_appends")
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
