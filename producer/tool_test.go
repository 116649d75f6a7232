package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/producer"
)

func TestToolCallKeysComeFromTaskAndStep(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	call := producer.ToolCall{Task: "agent-run-17", Step: "post-summary", Route: "social_post", Account: "acct_1",
		Payload: json.RawMessage(`{"body":"summary"}`)}
	e.api.Next(fakeapi.CommitThenDrop())
	first, err := e.p.Call(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	// The agent re-runs the step after the timeout: same intent, no write.
	again, err := e.p.Call(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if again.IntentID != first.IntentID || !again.Replayed || e.api.Writes() != 1 {
		t.Fatalf("re-run: intent %s vs %s, writes %d", again.IntentID, first.IntentID, e.api.Writes())
	}
	// The key sent is the intent's, not an attempt or correlation id.
	log := e.api.WriteLog()
	if log[0].IdempotencyKey != first.Intent.Recorded.IdempotencyKey || log[0].IdempotencyKey == log[0].AttemptID {
		t.Fatalf("write log %+v", log[0])
	}
	// Another step is another intent.
	call.Step = "post-details"
	other, err := e.p.Call(ctx, call)
	if err != nil || other.IntentID == first.IntentID {
		t.Fatalf("other step: %v", err)
	}
	// No key: refused, nothing written.
	for _, bad := range []producer.ToolCall{{Step: "s", Route: "social_post"}, {Task: "t", Step: "  ", Route: "social_post"}} {
		bad.Account, bad.Payload = "acct_1", json.RawMessage(`{"body":"x"}`)
		if _, err := e.p.Call(ctx, bad); !errors.Is(err, producer.ErrNoKey) {
			t.Fatalf("call without key: %v", err)
		}
	}
	if e.api.Writes() != 2 {
		t.Fatalf("writes %d", e.api.Writes())
	}
}
