package mcp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/mcp"
)

// echoRoute is a route whose API echoes its bearer token in every field
// the route records: the external id, the live URL and the error code.
const echoRoute = `version: 1
routes:
  - name: echo_write
    base_url: ${env:ECHO_BASE_URL}
    headers:
      Authorization: Bearer ${env:ECHO_TOKEN}
    payload:
      fields:
        text: {type: string, required: true, non_empty: true}
    write:
      method: POST
      url: "{{base}}/v1/things"
      body: "{{payload}}"
      error_code: $.error.code
      response:
        external_id: $.id
        live_url: $.url
    policy:
      trust_response: true
      retry: never
`

// TestToolResultsNeverContainSecrets: an external API that echoes the
// route's credential into every response field gets it recorded on the
// log (where it is scrubbed), but no tool result and no byte the MCP
// client receives holds it, or an 8-byte piece of it, or a token secret.
func TestToolResultsNeverContainSecrets(t *testing.T) {
	var writes atomic.Int64
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+routeSecret || r.URL.Path != "/v1/things" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		writes.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(b), "reject me") {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": routeSecret}})
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "thing_" + routeSecret[:20], "url": "https://things.example/" + routeSecret})
	}))
	t.Cleanup(fake.Close)
	cfgs, err := httproute.Parse([]byte(echoRoute), func(k string) (string, bool) {
		v, ok := map[string]string{"ECHO_BASE_URL": fake.URL, "ECHO_TOKEN": routeSecret}[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	route, err := httproute.Build(cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{routes: []adapter.Route{route}})
	var tr transcript
	for _, tok := range []string{secretAgent, secretOperator, secretReader} {
		cs := e.client(tok)
		for _, c := range []struct {
			tool string
			args any
		}{
			{"submit_echo_write", map[string]any{"task_id": "t1", "step_id": "s1", "account": "acct_1", "payload": map[string]any{"text": "hello"}}},
			{"submit_echo_write", map[string]any{"task_id": "t1", "step_id": "s2", "account": "acct_1", "payload": map[string]any{"text": "reject me"}, "wait_seconds": 1}},
			{"submit_echo_write", map[string]any{"task_id": "t1", "step_id": "s1", "account": "acct_1", "payload": map[string]any{"text": "other"}}},
			{"submit_echo_write", map[string]any{"task_id": routeSecret, "step_id": "s3", "account": "acct_1", "payload": map[string]any{"text": ""}}},
			{"status", map[string]any{"route": "echo_write", "task_id": "t1", "step_id": "s1"}},
			{"status", map[string]any{"route": "echo_write", "task_id": "t1", "step_id": "s2", "wait_seconds": 1}},
			{"pending", map[string]any{"route": "echo_write"}},
			{"approve", map[string]any{"intent_id": "in_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "reason": "x"}},
		} {
			res, err := cs.CallTool(e.Ctx, &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil {
				continue // not this token's tool
			}
			tr.add(res)
		}
	}
	// The planted secret is on the log: the scan below has something to find.
	var a mcp.Answer
	res := call(t, e.client(secretAgent), mcp.ToolStatus, map[string]any{"route": "echo_write", "task_id": "t1", "step_id": "s1"}, &a)
	tr.add(res)
	if a.Outcome != mcp.OutcomeConfirmed || a.Receipt == nil || a.Receipt.ExternalID != "thing_[redacted]" {
		t.Fatalf("confirmed answer: %s", text(res))
	}
	// The adapter scrubs the echo before it is recorded (adapter.Scrubber):
	// the log holds the redaction, not the secret.
	if ext := e.Intent("echo_write", a.IntentID).Receipt.ExternalID; ext != "thing_[redacted]" || strings.Contains(ext, routeSecret[:20]) {
		t.Fatalf("the log holds %q", ext)
	}
	res = call(t, e.client(secretAgent), mcp.ToolStatus, map[string]any{"route": "echo_write", "task_id": "t1", "step_id": "s2"}, &a)
	if a.Outcome != mcp.OutcomeRejected || a.Rejection == nil || !strings.Contains(a.Rejection.Code, "[redacted]") {
		t.Fatalf("rejected answer: %s", text(res))
	}
	if writes.Load() != 2 {
		t.Fatalf("%d writes", writes.Load())
	}
	everything := strings.Join(tr.all, "\n") + "\n" + e.wire.String()
	if len(tr.all) < 15 {
		t.Fatalf("only %d results scanned", len(tr.all))
	}
	for _, s := range allSecrets {
		for i := 0; i+8 <= len(s); i++ {
			if strings.Contains(everything, s[i:i+8]) {
				t.Fatalf("a result holds %q, a piece of a secret:\n%s", s[i:i+8], everything)
			}
		}
	}
}
