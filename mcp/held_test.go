package mcp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/mcp"
)

// A step whose intent the log lost whole, held after an accepted loss (its
// hold marker on its subject): submitting it again and asking its status
// are refused as held — permanent until a human acts — never as
// "unavailable" (which tells the agent that calling again is safe and
// useful), never a new intent, and nothing is written.
func TestHeldStepIsRefusedAsHeld(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := events.ScopedIntentID("default", "social_post", "acct_1", events.ToolKey("task-h", "step-1", ""))
	hold := events.NewHold(id, []uint64{1, 2}, []uint64{10, 11}, [][2]uint64{{9, 20}}, e.Clock.Now(), "test", "a block file was lost.")
	if ok, err := ledger.MarkHeld(context.Background(), e.Node.JS, "SETTLE_INTENTS", "social_post", hold); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	agent := e.client(secretAgent)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"submit_social_post", submitArgs("task-h", "step-1", "again")},
		{"status", map[string]any{"task_id": "task-h", "step_id": "step-1", "route": "social_post", "account": "acct_1"}},
	} {
		var te mcp.ToolError
		res := call(t, agent, c.tool, c.args, &te)
		if !res.IsError || te.Error.Code != mcp.CodeHeld || !strings.Contains(te.Error.Message, "held") {
			t.Fatalf("%s of a held step: %s", c.tool, text(res))
		}
	}
	if e.Social.Writes() != 0 {
		t.Fatalf("%d writes for a held step", e.Social.Writes())
	}
	if h := e.History("social_post", id); len(h) != 0 {
		t.Fatalf("the held subject got events: %v", h)
	}
}
