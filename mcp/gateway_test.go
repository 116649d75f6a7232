package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/mcp"
	"github.com/settle-dev/settle/service"
	"github.com/settle-dev/settle/service/servicetest"
	"github.com/settle-dev/settle/testharness"
)

const (
	ghSecret = "ghp_gateway_4c9e2a7b1d5f8e3a6c0b"
	ghRoute  = "github_mcp_comment"
)

// An MCP route's adapter is what the gateway offers the tools of.
var _ mcp.Upstream = (*httproute.Adapter)(nil)

// gwEnv is settle's MCP server with the gateway over examples/routes/
// github_mcp.yaml, its upstream the in-repo GitHub-shaped MCP server
// (fakeapi) served over streamable HTTP in front of the GitHub fake, with
// three more tools: search_issues (listed in mcp.reads), add_labels
// (listed in mcp.unprotected) and update_issue_comment (a write nobody
// lists). The service is a servicetest.Env (real embedded nats-server).
type gwEnv struct {
	*servicetest.Env
	t       *testing.T
	api     *fakeapi.GitHubAPI
	faults  string
	labels  *int // add_labels calls the upstream ran
	http    *httptest.Server
	srv     *mcp.Server
	account string
}

func newGatewayEnv(t *testing.T) *gwEnv {
	t.Helper()
	g := &gwEnv{t: t, faults: t.TempDir(), labels: new(int)}
	var clock *testharness.ManualClock
	g.api = fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(ghSecret), fakeapi.WithGitHubClock(func() time.Time {
		if clock == nil {
			return servicetest.T0
		}
		return clock.Now()
	}))
	up := fakeapi.NewGitHubMCPServer(fakeapi.GitHubMCPConfig{APIURL: g.api.URL(), Token: ghSecret, FaultDir: g.faults})
	type anyArgs map[string]any
	sdk.AddTool(up, &sdk.Tool{Name: "search_issues", Description: "Search issues."},
		func(context.Context, *sdk.CallToolRequest, anyArgs) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: `{"total_count":0,"items":[]}`}}}, nil, nil
		})
	sdk.AddTool(up, &sdk.Tool{Name: "add_labels", Description: "Add labels to an issue."},
		func(context.Context, *sdk.CallToolRequest, anyArgs) (*sdk.CallToolResult, any, error) {
			*g.labels++
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: `["bug"]`}}}, nil, nil
		})
	sdk.AddTool(up, &sdk.Tool{Name: "update_issue_comment", Description: "Edit a comment."},
		func(context.Context, *sdk.CallToolRequest, anyArgs) (*sdk.CallToolResult, any, error) {
			t.Error("update_issue_comment reached the upstream")
			return &sdk.CallToolResult{}, nil, nil
		})
	us := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up }, nil))
	t.Cleanup(us.Close)
	data := testharness.RouteFile(t, "github_mcp.yaml", "timeout: 10s", "timeout: 2s",
		"      command: ${env:GITHUB_MCP_SERVER}\n      args: [stdio]\n      env:\n        GITHUB_PERSONAL_ACCESS_TOKEN: ${env:GITHUB_TOKEN}\n        GITHUB_API_URL: ${env:GITHUB_API_URL}\n",
		"      url: ${env:GITHUB_MCP_URL}\n      reads: [search_issues]\n      unprotected: [add_labels]\n")
	route := testharness.CompileRoute(t, data, map[string]string{"GITHUB_MCP_URL": us.URL})
	t.Cleanup(func() { _ = route.Adapter.(*httproute.Adapter).Close() })
	g.Env = servicetest.New(t, servicetest.Options{Routes: func(testing.TB, *fakeapi.SocialAPI) []adapter.Route { return []adapter.Route{route} }})
	clock = g.Clock
	g.account = g.api.UserID()
	g.srv = g.newServer()
	g.http = g.serve(g.srv)
	return g
}

// newServer is settle's MCP server over the env's service: a second one
// is settle restarted.
func (g *gwEnv) newServer() *mcp.Server {
	cfg := mcp.DefaultConfig()
	cfg.Service, cfg.Routes, cfg.Logger, cfg.MaxWait = g.Svc, g.Routes, g.Logger, time.Minute
	cfg.Secrets = []string{ghSecret}
	srv, err := mcp.New(cfg)
	if err != nil {
		g.t.Fatal(err)
	}
	return srv
}

// serve mounts srv at /mcp, every request the agent's (submit and read,
// the GitHub account).
func (g *gwEnv) serve(srv *mcp.Server) *httptest.Server {
	hs := httptest.NewServer(srv.Handler(func(*http.Request) (*service.Caller, error) {
		return &service.Caller{Name: "agent", Tenant: service.DefaultTenant, Scopes: []string{service.ScopeSubmit, service.ScopeRead},
			Accounts: []string{g.account}}, nil
	}))
	g.t.Cleanup(hs.Close)
	return hs
}

func (g *gwEnv) client(hs *httptest.Server) *sdk.ClientSession {
	g.t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "gateway-agent", Version: "1"}, nil)
	cs, err := c.Connect(g.Ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		g.t.Fatalf("connect: %v", err)
	}
	g.t.Cleanup(func() { cs.Close() })
	return cs
}

// rpc posts one JSON-RPC request to hs and returns its answer.
func (g *gwEnv) rpc(hs *httptest.Server, body string) map[string]any {
	g.t.Helper()
	req, _ := http.NewRequest("POST", hs.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		g.t.Fatalf("%s: %d %s", body, resp.StatusCode, b)
	}
	return out
}

func comment(task, step, body string) map[string]any {
	return map[string]any{"owner": "octo-org", "repo": "hello-world", "issue_number": 7, "body": body, "task_id": task, "step_id": step}
}

func typesOf(evs []events.Event) []events.Type {
	var out []events.Type
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func countType(evs []events.Event, t events.Type) int {
	n := 0
	for _, e := range evs {
		if e.Type == t {
			n++
		}
	}
	return n
}

// TestGatewayLostReplySettlesThroughTheReadTool: an agent calls the
// upstream's own write tool through settle; the upstream runs it (the
// comment is made) and its reply is lost. The answer is unknown
// (settling, do not retry), the reconciler finds the comment through the
// upstream's read tool and confirms it with a receipt — no retry, the
// GitHub fake holds exactly one comment — and the same task and step,
// after the agent reconnects and after settle restarts, are the same
// intent, answered from the log.
func TestGatewayLostReplySettlesThroughTheReadTool(t *testing.T) {
	g := newGatewayEnv(t)
	cs := g.client(g.http)
	if err := fakeapi.InjectMCPFault(g.faults, "add_issue_comment", fakeapi.MCPDropReply); err != nil {
		t.Fatal(err)
	}
	var a mcp.Answer
	res := call(t, cs, "add_issue_comment", comment("deploy-1", "comment", "Build #42 passed"), &a)
	if res.IsError || a.Outcome != mcp.OutcomeUnknown || a.Settled || !strings.Contains(a.Guidance, "Do not retry") {
		t.Fatalf("first answer: %s", text(res))
	}
	// The upstream ran the tool (the fault was taken by this call) and
	// the fake made the comment before the reply was dropped.
	if _, err := os.Stat(filepath.Join(g.faults, "add_issue_comment")); !errors.Is(err, fs.ErrNotExist) || g.api.Effects() != 1 {
		t.Fatalf("the first call did not run the tool: fault pending %v, %d effects", err == nil, g.api.Effects())
	}
	want := events.ScopedIntentID(service.DefaultTenant, ghRoute, g.account, events.ToolKey("deploy-1", "comment", ""))
	if a.IntentID != want {
		t.Fatalf("intent %s, want %s", a.IntentID, want)
	}
	i := g.Settle(ghRoute, a.IntentID)
	evs := g.History(ghRoute, a.IntentID)
	var unknown *events.OutcomeUnknownData
	for _, e := range evs {
		if d, ok := e.Data.(*events.OutcomeUnknownData); ok {
			unknown = d
		}
	}
	if countType(evs, events.IntentStarted) != 1 || countType(evs, events.OutcomeUnknown) != 1 || unknown.Code != httproute.CodeNoAnswer ||
		countType(evs, events.RetryClaimed) != 0 || countType(evs, events.WriteStarted) != 0 ||
		countType(evs, events.CandidateFound) != 1 || evs[len(evs)-1].Type != events.ReadbackPassed {
		t.Fatalf("history %v (unknown: %+v)", typesOf(evs), unknown)
	}
	comments := g.api.Comments()
	if g.api.Effects() != 1 || g.api.EffectsContaining("Build #42 passed") != 1 || len(comments) != 1 {
		t.Fatalf("%d effects", g.api.Effects())
	}
	if string(i.State) != "confirmed" || i.Receipt == nil || i.Receipt.ExternalID != strconv.FormatInt(comments[0].ID, 10) ||
		i.Receipt.AttemptID != a.IntentID+".a1" {
		t.Fatalf("state %s, receipt %+v", i.State, i.Receipt)
	}
	// The agent restarts and makes the same step again; then settle
	// restarts: the same intent, confirmed, nothing written.
	for _, hs := range []*httptest.Server{g.http, g.serve(g.newServer())} {
		res = call(t, g.client(hs), "add_issue_comment", comment("deploy-1", "comment", "Build #42 passed"), &a)
		if res.IsError || a.IntentID != want || !a.Replayed || a.Outcome != mcp.OutcomeConfirmed || a.Receipt == nil ||
			a.Receipt.ExternalID != i.Receipt.ExternalID {
			t.Fatalf("again: %s", text(res))
		}
	}
	if g.api.Effects() != 1 || g.api.Writes() != 1 {
		t.Fatalf("%d effects, %d writes", g.api.Effects(), g.api.Writes())
	}
}

// TestGatewayTools: the gateway offers the write tool (the upstream's
// schema plus task_id and step_id), the tools annotated read-only or
// listed in mcp.reads unchanged, the tool listed in mcp.unprotected
// marked so; the write nobody lists is not offered and cannot be called.
// Reads and unprotected calls reach the upstream as they are; an
// unprotected answer says so; a write whose arguments differ from what
// the route sends is refused naming the argument, nothing written.
func TestGatewayTools(t *testing.T) {
	g := newGatewayEnv(t)
	cs := g.client(g.http)
	lr, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*sdk.Tool{}
	for _, tl := range lr.Tools {
		tools[tl.Name] = tl
	}
	for _, n := range []string{"add_issue_comment", "issue_read", "get_issue_comment", "search_issues", "add_labels", "status", "submit_" + ghRoute} {
		if tools[n] == nil {
			t.Fatalf("%s is not offered (%d tools)", n, len(tools))
		}
	}
	if tools["update_issue_comment"] != nil {
		t.Fatal("a write nobody lists is offered")
	}
	schema, _ := json.Marshal(tools["add_issue_comment"].InputSchema)
	if !strings.Contains(string(schema), `"task_id"`) || !strings.Contains(string(schema), `"issue_number"`) ||
		!strings.Contains(tools["add_labels"].Description, "UNPROTECTED") {
		t.Fatalf("schema %s; add_labels %q", schema, tools["add_labels"].Description)
	}
	if r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "update_issue_comment", Arguments: map[string]any{}}); err == nil && !r.IsError {
		t.Fatal("update_issue_comment answered")
	}
	g.api.Inject(fakeapi.GitHubComment{Issue: 7, Body: "by hand"})
	res := call(t, cs, "issue_read", map[string]any{"method": "get_comments", "owner": "octo-org", "repo": "hello-world", "issue_number": 7}, nil)
	if res.IsError || !strings.Contains(text(res), "by hand") || strings.Contains(text(res), "UNPROTECTED") {
		t.Fatalf("read: %s", text(res))
	}
	res = call(t, cs, "add_labels", map[string]any{"labels": []string{"bug"}}, nil)
	if res.IsError || !strings.HasPrefix(text(res), "UNPROTECTED") || res.Meta["settle.dev/unprotected"] != true || *g.labels != 1 {
		t.Fatalf("unprotected: %s %v (%d calls)", text(res), res.Meta, *g.labels)
	}
	bad := comment("deploy-2", "comment", "x")
	bad["owner"] = "someone-else"
	var e mcp.ToolError
	res = call(t, cs, "add_issue_comment", bad, &e)
	if !res.IsError || e.Error.Code != mcp.CodeInvalidArgument || e.Error.Field != "owner" {
		t.Fatalf("another owner: %s", text(res))
	}
	bad = comment("deploy-2", "comment", "x")
	bad["labels"] = []string{"bug"}
	res = call(t, cs, "add_issue_comment", bad, &e)
	if !res.IsError || e.Error.Field != "labels" {
		t.Fatalf("an argument the route does not send: %s", text(res))
	}
	if g.api.Writes() != 0 {
		t.Fatalf("%d writes", g.api.Writes())
	}
}

// TestGatewayIdempotencyKeyAndTasks: an idempotencyKey beside a call's
// arguments is the write's key (the intent is the one the API's
// Idempotency-Key names); a client that declares the Tasks extension gets
// a task for a write still settling, tasks/get answers working and then,
// once settled, completed with the answer — also from settle restarted —
// and a client that does not declare it is refused -32021.
func TestGatewayIdempotencyKeyAndTasks(t *testing.T) {
	g := newGatewayEnv(t)
	if err := fakeapi.InjectMCPFault(g.faults, "add_issue_comment", fakeapi.MCPDropReply); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]any{"owner": "octo-org", "repo": "hello-world", "issue_number": 7, "body": "Release notes"})
	const caps = `"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	out := g.rpc(g.http, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add_issue_comment","arguments":`+
		string(args)+`,"idempotencyKey":"release-2026-05",`+caps+`}}`)
	task, _ := out["result"].(map[string]any)
	want := events.ScopedIntentID(service.DefaultTenant, ghRoute, g.account, "release-2026-05")
	if task["resultType"] != "task" || task["taskId"] != want || task["status"] != "working" {
		t.Fatalf("tools/call: %v", out)
	}
	get := `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"` + want + `",` + caps + `}}`
	if r, _ := g.rpc(g.http, get)["result"].(map[string]any); r["status"] != "working" || r["resultType"] != "complete" {
		t.Fatalf("tasks/get while settling: %v", r)
	}
	noCaps := g.rpc(g.http, `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"`+want+`"}}`)
	if e, _ := noCaps["error"].(map[string]any); e == nil || e["code"] != float64(-32021) {
		t.Fatalf("tasks/get without the capability: %v", noCaps)
	}
	g.Settle(ghRoute, want)
	for _, hs := range []*httptest.Server{g.http, g.serve(g.newServer())} {
		r, _ := g.rpc(hs, get)["result"].(map[string]any)
		res, _ := r["result"].(map[string]any)
		sc, _ := res["structuredContent"].(map[string]any)
		if r["status"] != "completed" || sc["outcome"] != mcp.OutcomeConfirmed || sc["intent_id"] != want {
			t.Fatalf("tasks/get once settled: %v", r)
		}
	}
	unknown := g.rpc(g.http, strings.Replace(get, want, "in_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 1))
	if e, _ := unknown["error"].(map[string]any); e == nil || e["code"] != float64(-32602) {
		t.Fatalf("tasks/get of no task: %v", unknown)
	}
	// The same key again, without the capability: the stored answer.
	again := g.rpc(g.http, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"add_issue_comment","arguments":`+
		string(args)+`,"idempotencyKey":"release-2026-05"}}`)
	r, _ := again["result"].(map[string]any)
	sc, _ := r["structuredContent"].(map[string]any)
	if sc["intent_id"] != want || sc["replayed"] != true || sc["outcome"] != mcp.OutcomeConfirmed {
		t.Fatalf("the same key again: %v", again)
	}
	if g.api.Effects() != 1 || !slices.ContainsFunc(g.api.Comments(), func(c fakeapi.GitHubComment) bool { return strings.HasPrefix(c.Body, "Release notes") }) {
		t.Fatalf("%d effects", g.api.Effects())
	}
}
