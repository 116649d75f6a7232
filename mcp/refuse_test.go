package mcp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/settle-dev/settle/mcp"
)

// TestPayloadNotMatchingTheRouteIsRefusedNamingTheField: a payload the
// route's schema refuses is refused by the tool with a message naming the
// field, and nothing is written: no event on the log, no request to the
// API. So are malformed arguments.
func TestPayloadNotMatchingTheRouteIsRefusedNamingTheField(t *testing.T) {
	e := newEnv(t, envOptions{})
	agent := e.client(secretAgent)
	base := func(payload any) map[string]any {
		return map[string]any{"task_id": "task-r", "step_id": "step-1", "account": "acct_1", "payload": payload}
	}
	with := func(k string, v any) map[string]any {
		m := base(map[string]any{"body": "fine"})
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name  string
		args  any
		field string
	}{
		{"empty body", base(map[string]any{"body": ""}), "payload.body"},
		{"blank body", base(map[string]any{"body": "   "}), "payload.body"},
		{"body not a string", base(map[string]any{"body": 42}), "payload.body"},
		{"body missing", base(map[string]any{"assets": []string{}}), "payload.body"},
		{"unknown payload field", base(map[string]any{"body": "x", "title": "y"}), "payload.title"},
		{"asset not a sha256", base(map[string]any{"body": "x", "assets": []string{"not-a-hash"}}), "payload.assets[0]"},
		{"payload not an object", base([]any{"x"}), "payload"},
		{"payload too large for the log", base(map[string]any{"body": strings.Repeat("x", 1<<20-30<<10)}), "payload"},
		{"payload missing", with("payload", nil), "payload"},
		{"task_id missing", with("task_id", nil), "task_id"},
		{"task_id empty", with("task_id", ""), "task_id"},
		{"task_id padded", with("task_id", " t "), "task_id"},
		{"task_id too long", with("task_id", strings.Repeat("t", 300)), "task_id"},
		{"step_id not a string", with("step_id", 7), "step_id"},
		{"account missing", with("account", nil), "account"},
		{"account with a control character", with("account", "a\x01b"), "account"},
		{"wait too long", with("wait_seconds", 3600), "wait_seconds"},
		{"wait negative", with("wait_seconds", -1), "wait_seconds"},
		{"unknown argument", with("idempotency_key", "my-own-key"), "idempotency_key"},
		{"duplicate argument", json.RawMessage(`{"task_id":"a","task_id":"b","step_id":"s","account":"acct_1","payload":{"body":"x"}}`), "task_id"},
		{"arguments not an object", json.RawMessage(`["task_id"]`), "arguments"},
		// Ids that are not valid Unicode are refused naming the argument,
		// never read as U+FFFD (so that two tasks would be one).
		{"task_id with a lone surrogate", json.RawMessage(`{"task_id":"t\ud800","step_id":"s","account":"acct_1","payload":{"body":"x"}}`), "task_id"},
		{"step_id with a lone low surrogate", json.RawMessage(`{"task_id":"t","step_id":"s\udc00","account":"acct_1","payload":{"body":"x"}}`), "step_id"},
		{"account not UTF-8", json.RawMessage("{\"task_id\":\"t\",\"step_id\":\"s\",\"account\":\"acct_\xff\",\"payload\":{\"body\":\"x\"}}"), "account"},
	}
	before := e.StreamLen()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var te mcp.ToolError
			res := call(t, agent, "submit_social_post", c.args, &te)
			if !res.IsError || te.Error.Code != mcp.CodeInvalidArgument || te.Error.Field != c.field {
				t.Fatalf("want a refusal naming %s: %s", c.field, text(res))
			}
			if !strings.Contains(text(res), c.field) || !strings.Contains(text(res), "nothing was written") {
				t.Fatalf("the text does not name %s or say nothing was written: %s", c.field, text(res))
			}
		})
	}
	if e.StreamLen() != before || e.Social.Writes() != 0 {
		t.Fatalf("refused submits wrote: %d events, %d POSTs", e.StreamLen()-before, e.Social.Writes())
	}
	// The same step with a valid payload is then accepted: a refusal
	// records nothing that would block it.
	var a mcp.Answer
	if res := call(t, agent, "submit_social_post", base(map[string]any{"body": "fine"}), &a); res.IsError || a.Replayed {
		t.Fatalf("valid submit after refusals: %s", text(res))
	}
}
