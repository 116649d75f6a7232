package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/mcp"
	"github.com/settle-dev/settle/testharness"
)

type readCloser struct {
	io.Reader
	io.Closer
}

func toolSet(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	slices.Sort(out)
	return out
}

func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (*sdk.CallToolResult, mcp.Answer) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var a mcp.Answer
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &a)
	return res, a
}

// TestMCPStdioBinary runs the built binary as a desktop agent host would
// (settle mcp --tenant acme, stdio pipes) with an SDK client: the intent
// is the tenant's (its id scoped by tenant, route, account and key), the
// dropped response is
// settled to one effect, the restarted step gets the stored result, the
// default scopes offer no approve/resolve, and stdout carries nothing but
// JSON-RPC messages — every log line is on stderr.
func TestMCPStdioBinary(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	api.Next(fakeapi.CommitThenDrop())
	cmd := exec.Command(settleBinary(t), "mcp", "--routes", "../../examples/routes/social.yaml",
		"--data", filepath.Join(t.TempDir(), "data"), "--accounts", "acct_1", "--tenant", "acme")
	cmd.Env = append(os.Environ(), "SOCIAL_BASE_URL="+api.URL(), "SOCIAL_TOKEN="+api.Token())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testharness.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	raw := &testharness.SyncBuffer{}
	client := sdk.NewClient(&sdk.Implementation{Name: "desktop-host", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: readCloser{io.TeeReader(stdout, raw), stdout}, Writer: stdin}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	if got := toolSet(t, cs); !slices.Equal(got, []string{"pending", "status", "submit_social_post"}) {
		t.Fatalf("tools %v", got)
	}
	args := map[string]any{"task_id": "desk-1", "step_id": "post", "payload": map[string]any{"body": "hello from a desktop agent"}}
	res, a := callTool(t, cs, "submit_social_post", args)
	if res.IsError || a.Outcome != mcp.OutcomeUnknown || a.Account != "acct_1" {
		t.Fatalf("submit: %+v", res)
	}
	if want := events.ScopedIntentID("acme", "social_post", "acct_1", events.ToolKey("desk-1", "post", "")); a.IntentID != want {
		t.Fatalf("intent %s, want %s (tenant acme's)", a.IntentID, want)
	}
	res, a = callTool(t, cs, "status", map[string]any{"intent_id": a.IntentID, "wait_seconds": 30})
	for k := 0; k < 4 && a.Outcome == mcp.OutcomeUnknown; k++ {
		res, a = callTool(t, cs, "status", map[string]any{"intent_id": a.IntentID, "wait_seconds": 30})
	}
	if res.IsError || a.Outcome != mcp.OutcomeConfirmed || a.Receipt == nil {
		t.Fatalf("status: %+v\n%s", res, stderr.String())
	}
	res, b := callTool(t, cs, "submit_social_post", args)
	if res.IsError || !b.Replayed || b.IntentID != a.IntentID || b.Outcome != mcp.OutcomeConfirmed {
		t.Fatalf("re-submit: %+v", res)
	}
	if r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "approve", Arguments: map[string]any{"intent_id": a.IntentID, "reason": "x"}}); err == nil && !r.IsError {
		t.Fatal("approve without the operate scope")
	}
	if api.Effects() != 1 || api.Writes() != 1 {
		t.Fatalf("effects %d, writes %d", api.Effects(), api.Writes())
	}
	cs.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("settle mcp exited with %v\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("settle mcp did not exit after stdin closed\n%s", stderr.String())
	}

	// Stdout: protocol messages only, one JSON-RPC 2.0 object per line.
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(raw.String()))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var msg map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || string(msg["jsonrpc"]) != `"2.0"` {
			t.Fatalf("stdout line %d is not a JSON-RPC message: %q", lines+1, sc.Text())
		}
		_, isResult := msg["result"]
		_, isError := msg["error"]
		_, isCall := msg["method"]
		if !isResult && !isError && !isCall {
			t.Fatalf("stdout line %d: %q", lines+1, sc.Text())
		}
		lines++
	}
	if lines < 6 { // initialize, tools/list, submit, status, re-submit, approve
		t.Fatalf("only %d protocol lines on stdout", lines)
	}
	logs := stderr.String()
	if !strings.Contains(logs, "settle mcp: serving on stdio") || !strings.Contains(logs, "session ended") {
		t.Fatalf("stderr lacks the log lines:\n%s", logs)
	}
	for _, out := range []string{raw.String(), logs} {
		if strings.Contains(out, api.Token()) {
			t.Fatal("the route's token appears in settle mcp's output")
		}
	}
}

// TestServeMountsMCPBehindTheAPITokens: settle serve answers /mcp with the
// API's bearer tokens, scopes and tenants: an intent submitted over /mcp
// is its tenant's over the API too, and another tenant's token finds
// nothing.
func TestServeMountsMCPBehindTheAPITokens(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	const agentSecret, opsSecret, acmeSecret = "tok_agent_6b1e9c4a7f2d8e3c5b0a", "tok_operate_5a8c3e1f7b2d9e4c6a0f", "tok_acme_4b8e2c6a1f9d3e7b5c0a"
	if err := os.WriteFile(tokens, []byte(`{"tokens":[
		{"name":"agent","secret_env":"AGENT_TOKEN","scopes":["submit","read"]},
		{"name":"ops","secret_env":"OPS_TOKEN","scopes":["read","operate"]},
		{"name":"acme","secret_env":"ACME_TOKEN","tenant":"acme","scopes":["submit","read"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, filepath.Join(dir, "data"), api, "--tokens", tokens, "ENV:AGENT_TOKEN="+agentSecret, "ENV:OPS_TOKEN="+opsSecret,
		"ENV:ACME_TOKEN="+acmeSecret)
	connect := func(token string) (*sdk.ClientSession, error) {
		c := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil)
		return c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: s.url + "/mcp", MaxRetries: -1,
			DisableStandaloneSSE: true, HTTPClient: &http.Client{Transport: tokenRT(token)}}, nil)
	}
	if _, err := connect(""); err == nil {
		t.Fatal("connected without a token")
	}
	if _, err := connect("tok_wrong_0000000000000000000"); err == nil {
		t.Fatal("connected with a wrong token")
	}
	agent, err := connect(agentSecret)
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	if got := toolSet(t, agent); !slices.Equal(got, []string{"pending", "status", "submit_social_post"}) {
		t.Fatalf("agent tools %v", got)
	}
	ops, err := connect(opsSecret)
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	if got := toolSet(t, ops); !slices.Equal(got, []string{"approve", "pending", "resolve", "status"}) {
		t.Fatalf("ops tools %v", got)
	}
	res, a := callTool(t, agent, "submit_social_post", map[string]any{"task_id": "srv-1", "step_id": "s", "account": "acct_1",
		"payload": map[string]any{"body": "through serve"}, "wait_seconds": 30})
	if res.IsError || a.IntentID == "" {
		t.Fatalf("submit: %+v", res)
	}
	get := func(id, token string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", s.url+"/v1/intents/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// The same intent through the API.
	if code := get(a.IntentID, agentSecret); code != 200 {
		t.Fatalf("GET the MCP-submitted intent: %d", code)
	}
	// Another tenant's agent, the same task and step: its own intent, seen
	// by its own token over the API and by no other.
	acme, err := connect(acmeSecret)
	if err != nil {
		t.Fatal(err)
	}
	defer acme.Close()
	res, b := callTool(t, acme, "submit_social_post", map[string]any{"task_id": "srv-1", "step_id": "s", "account": "acct_1",
		"payload": map[string]any{"body": "through serve"}, "wait_seconds": 30})
	if want := events.ScopedIntentID("acme", "social_post", "acct_1", events.ToolKey("srv-1", "s", "")); res.IsError || b.Replayed || b.IntentID != want {
		t.Fatalf("acme's submit: intent %s (replayed %v), want %s: %+v", b.IntentID, b.Replayed, want, res)
	}
	if get(b.IntentID, acmeSecret) != 200 || get(b.IntentID, agentSecret) != 404 || get(a.IntentID, acmeSecret) != 404 {
		t.Fatalf("GET across tenants: acme's own %d, acme's by agent %d, agent's by acme %d",
			get(b.IntentID, acmeSecret), get(b.IntentID, agentSecret), get(a.IntentID, acmeSecret))
	}
	if api.Effects() != 2 {
		t.Fatalf("effects %d, want 2 (one per tenant)", api.Effects())
	}
	s.stop()
}

type tokenRT string

func (t tokenRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if t != "" {
		r.Header.Set("Authorization", "Bearer "+string(t))
	}
	return http.DefaultTransport.RoundTrip(r)
}
