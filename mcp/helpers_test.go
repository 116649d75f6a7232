package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/mcp"
	"github.com/settle-dev/settle/service/servicetest"
	"github.com/settle-dev/settle/testharness"
)

// Secrets: long and distinctive, so that a scan cannot match by accident.
const (
	routeSecret     = servicetest.RouteSecret
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

// env is the MCP endpoint and the API mounted together on a loopback
// httptest server, exactly as settle serve mounts them (the API's tokens
// authenticate /mcp), over one service of a servicetest.Env: a real
// embedded nats-server, the fake social API over real HTTP (its bearer
// token is routeSecret), the example route file
// examples/routes/social.yaml loaded by httproute (plus the same route
// under first-write approval), a producer and a running projector.
type env struct {
	*servicetest.Env
	t    testing.TB
	mcp  *mcp.Server
	http *httptest.Server
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
	ko := servicetest.Options{Actor: "mcp-writer"}
	if o.routes != nil {
		ko.Routes = func(testing.TB, *fakeapi.SocialAPI) []adapter.Route { return o.routes }
	}
	k := servicetest.New(t, ko)
	acfg := api.DefaultConfig()
	acfg.Service, acfg.Log, acfg.Logger, acfg.Tokens = k.Svc, k.Store, k.Logger, testTokens()
	if o.tokens != nil {
		acfg.Tokens = o.tokens
	}
	apiSrv, err := api.New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	mcfg := mcp.DefaultConfig()
	mcfg.Service, mcfg.Routes, mcfg.Logger = k.Svc, k.Routes, k.Logger
	mcfg.MaxWait = time.Minute
	mcfg.KeyIncludesPayload = o.keyIncludesPayload
	mcfg.Secrets = append(append([]string{}, allSecrets...), o.secrets...)
	srv, err := mcp.New(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler(apiSrv.Authenticate))
	mux.Handle("/", apiSrv) // the API beside /mcp, as settle serve mounts them
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &env{Env: k, t: t, mcp: srv, http: hs, wire: &testharness.SyncBuffer{}}
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
	cs, err := c.Connect(e.Ctx, &sdk.StreamableClientTransport{Endpoint: e.http.URL + "/mcp",
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
