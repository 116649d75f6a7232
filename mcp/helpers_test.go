package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/consumers/reconcile"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/mcp"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/testharness"
)

var t0 = time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)

// Secrets: long and distinctive, so that a scan cannot match by accident.
const (
	routeSecret     = "route_secret_4c9e2a7f1b8d3e6c5a0f"
	secretAgent     = "tok_agent_6b1e9c4a7f2d8e3c5b0a"
	secretReader    = "tok_reader_2b7e9d4c1a8f3e6b5d0c"
	secretOperator  = "tok_operate_5a8c3e1f7b2d9e4c6a0f"
	secretSubmitter = "tok_submit_9c4e1b7a3f6d2e8c5a0b"
	secretAcctLtd   = "tok_acctltd_8d2f5b9e1c7a4e3b6d0c"
)

var allSecrets = []string{routeSecret, secretAgent, secretReader, secretOperator, secretSubmitter, secretAcctLtd}

func testTokens() []api.Token {
	return []api.Token{
		{Name: "agent", Secret: secretAgent, Scopes: []string{api.ScopeSubmit, api.ScopeRead}},
		{Name: "reader", Secret: secretReader, Scopes: []string{api.ScopeRead}},
		{Name: "ops", Secret: secretOperator, Scopes: []string{api.ScopeRead, api.ScopeOperate}},
		{Name: "submitter", Secret: secretSubmitter, Scopes: []string{api.ScopeSubmit}},
		{Name: "acct-limited", Secret: secretAcctLtd, Scopes: []string{api.ScopeSubmit, api.ScopeRead, api.ScopeOperate},
			Accounts: []string{"acct_other"}},
	}
}

// env is a real embedded nats-server, the fake social API over real HTTP
// (its bearer token is routeSecret), the example route file
// examples/routes/social.yaml loaded by httproute (plus the same route
// under first-write approval), a producer, a running projector, and the
// MCP endpoint mounted on a loopback httptest server behind the API's
// tokens, exactly as settle serve wires it.
type env struct {
	t      testing.TB
	ctx    context.Context
	clock  *testharness.ManualClock
	social *fakeapi.SocialAPI
	routes []adapter.Route
	store  *ledger.Store
	prod   *producer.Producer
	proj   *projector.Projector
	mcp    *mcp.Server
	http   *httptest.Server
	logs   *testharness.SyncBuffer
	logger *slog.Logger
	// wire collects every HTTP response body the clients received.
	wire *testharness.SyncBuffer
}

type envOptions struct {
	keyIncludesPayload bool
	tokens             []api.Token     // instead of testTokens()
	routes             []adapter.Route // instead of social.yaml
	secrets            []string
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logs := &testharness.SyncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n := testharness.StartNode(t)
	clock := testharness.NewManualClock(t0)
	social := fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(clock.Now), fakeapi.WithSocialToken(routeSecret))
	routes := o.routes
	if routes == nil {
		loaded, err := httproute.Load(filepath.Join("..", "examples", "routes", "social.yaml"), func(k string) (string, bool) {
			v, ok := map[string]string{"SOCIAL_BASE_URL": social.URL(), "SOCIAL_TOKEN": routeSecret}[k]
			return v, ok
		})
		if err != nil {
			t.Fatal(err)
		}
		approval := loaded[0]
		approval.Name = "social_approval"
		approval.Policy.FirstWrite = events.PolicyApproval
		routes = append(loaded, approval)
	}
	for i := range routes {
		routes[i].Policy.ClockSkew = events.Duration(time.Second)
	}
	store, err := ledger.OpenStore(ctx, n.JS, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	pc := producer.DefaultConfig()
	pc.Now = clock.Now
	pc.Actor = "mcp-writer"
	prod, err := producer.New(store, pc, routes...)
	if err != nil {
		t.Fatal(err)
	}
	proj, err := projector.Open(ctx, n.JS, projector.Config{DBPath: filepath.Join(t.TempDir(), "views.db"), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	projDone := make(chan struct{})
	go func() { defer close(projDone); _ = proj.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-projDone; proj.Close() })

	// The API's tokens authenticate the MCP endpoint.
	acfg := api.DefaultConfig()
	acfg.Intents, acfg.Views, acfg.Log, acfg.Logger, acfg.Tokens = prod, proj, store, logger, testTokens()
	if o.tokens != nil {
		acfg.Tokens = o.tokens
	}
	apiSrv, err := api.New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	mcfg := mcp.DefaultConfig()
	mcfg.Producer, mcfg.Projector, mcfg.Routes, mcfg.Logger = prod, proj, routes, logger
	mcfg.MaxWait = time.Minute
	mcfg.KeyIncludesPayload = o.keyIncludesPayload
	mcfg.Secrets = append(append([]string{}, allSecrets...), o.secrets...)
	srv, err := mcp.New(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler(func(r *http.Request) (*mcp.Caller, error) {
		c, err := apiSrv.Authenticate(r)
		if errors.Is(err, api.ErrNoCredentials) || errors.Is(err, api.ErrBadCredentials) {
			return nil, errors.Join(mcp.ErrUnauthenticated, err)
		}
		if err != nil {
			return nil, err
		}
		return &mcp.Caller{Name: c.Name, Tenant: c.Tenant, Scopes: c.Scopes, Routes: c.Routes, Accounts: c.Accounts, All: c.Dev}, nil
	}))
	mux.Handle("/", apiSrv) // the API beside /mcp, as settle serve mounts them
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &env{t: t, ctx: ctx, clock: clock, social: social, routes: routes, store: store, prod: prod, proj: proj,
		mcp: srv, http: hs, logs: logs, logger: logger, wire: &testharness.SyncBuffer{}}
}

// reconciler returns a reconciler over every route on the env's clock.
func (e *env) reconciler(name string) *reconcile.Reconciler {
	e.t.Helper()
	cfg := reconcile.DefaultConfig()
	cfg.Worker = name
	cfg.Now = e.clock.Now
	cfg.Recheck = time.Minute
	cfg.MaxRecheck = 8 * time.Minute
	cfg.MaxWait = 20 * time.Millisecond
	cfg.AckWait = 2 * time.Second
	cfg.Lease = 30 * time.Second
	cfg.Rand = rand.New(rand.NewPCG(7, 7))
	cfg.Logger = e.logger
	r, err := reconcile.NewReconciler(e.store, cfg, e.routes...)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// runReconciler runs a reconciler until the test ends.
func (e *env) runReconciler(name string) {
	e.t.Helper()
	r := e.reconciler(name)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
}

// settle steps an intent with a reconciler, moving the manual clock over
// every wait, until no reconciler has anything to do.
func (e *env) settle(route, intentID string) *fsm.Intent {
	e.t.Helper()
	r := e.reconciler("stepper")
	for k := 0; k < 200; k++ {
		res, err := r.Step(context.Background(), route, intentID)
		if err != nil {
			e.t.Fatal(err)
		}
		if res.Done {
			return e.intent(route, intentID)
		}
		if res.Wait > 0 {
			e.clock.Advance(res.Wait)
		}
	}
	e.t.Fatalf("intent %s did not settle", intentID)
	return nil
}

func (e *env) intent(route, intentID string) *fsm.Intent {
	e.t.Helper()
	h, err := e.store.Load(context.Background(), route, intentID)
	if err != nil {
		e.t.Fatal(err)
	}
	i, err := h.Fold()
	if err != nil {
		e.t.Fatal(err)
	}
	return i
}

// streamLen is the number of events on the log.
func (e *env) streamLen() uint64 {
	e.t.Helper()
	info, err := e.store.Stream().Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.Msgs
}

func (e *env) catchUp() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.proj.CatchUp(ctx); err != nil {
		e.t.Fatal(err)
	}
}

// bearer adds a token to every request and copies every response body
// into wire.
type bearer struct {
	token string
	wire  io.Writer
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || b.wire == nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	_, _ = b.wire.Write(body)
	_, _ = b.wire.Write([]byte("\n"))
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// client connects an MCP client of the official SDK to the endpoint with
// token.
func (e *env) client(token string) *sdk.ClientSession {
	e.t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, nil)
	cs, err := c.Connect(e.ctx, &sdk.StreamableClientTransport{Endpoint: e.http.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: token, wire: e.wire}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and decodes its structured content into out (when
// not nil). It fails the test on a protocol error.
func call(t testing.TB, cs *sdk.ClientSession, tool string, args any, out any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if out != nil {
		// A fresh value each time: a field absent from this answer must
		// not keep the previous answer's value.
		rv := reflect.ValueOf(out).Elem()
		rv.Set(reflect.Zero(rv.Type()))
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", tool, b, err)
		}
	}
	return res
}

func text(res *sdk.CallToolResult) string {
	var b bytes.Buffer
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// submitArgs are the arguments of a submit.
func submitArgs(task, step, body string) map[string]any {
	return map[string]any{"task_id": task, "step_id": step, "account": "acct_1", "payload": map[string]any{"body": body}}
}

// transcript records every answer the agent saw, for the secret scan.
type transcript struct {
	mu  sync.Mutex
	all []string
}

func (tr *transcript) add(res *sdk.CallToolResult) {
	b, _ := json.Marshal(res)
	tr.mu.Lock()
	tr.all = append(tr.all, string(b))
	tr.mu.Unlock()
}
