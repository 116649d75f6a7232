package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/mcp"
)

// A tool call's _meta traceparent is recorded on the intent it submits
// (IntentStarted), so that its reconciliation continues the agent's
// trace.
func TestToolCallRecordsTheCallersTraceparent(t *testing.T) {
	e := newEnv(t, envOptions{})
	agent := e.client(secretAgent)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	res, err := agent.CallTool(context.Background(), &sdk.CallToolParams{Name: "submit_social_post",
		Arguments: submitArgs("task-t", "step-1", "traced"), Meta: sdk.Meta{"traceparent": tp}})
	if err != nil || res.IsError {
		t.Fatalf("submit: %v %s", err, text(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	var a mcp.Answer
	if err := json.Unmarshal(b, &a); err != nil || a.IntentID == "" {
		t.Fatalf("answer %s: %v", b, err)
	}
	h := e.History("social_post", a.IntentID)
	started, ok := h[0].Data.(*events.IntentStartedData)
	if !ok {
		t.Fatalf("first event %s, want IntentStarted", h[0].Type)
	}
	if started.Traceparent != tp {
		t.Fatalf("traceparent %q, want %q", started.Traceparent, tp)
	}
}
