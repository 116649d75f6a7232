package mcp_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/mcp"
)

// TestAggressiveAgentOneEffectPerTask: an MCP client of the official SDK
// plays an aggressive agent against the fake social API, whose first post
// commits and then drops its response. It re-submits the same step 4
// times at once, asks for status, restarts the task with the same task id
// (a new session), then restarts it with a new task id. The API counts 1
// effect for the first task and 1 for the new one; every answer about the
// first task is unknown or confirmed — never rejected, never failed, never
// an error.
func TestAggressiveAgentOneEffectPerTask(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.Social.Next(fakeapi.CommitThenDrop())
	const tool = "submit_social_post"
	args := submitArgs("task-1", "step-1", "hello from an impatient agent")

	var mu sync.Mutex
	var first []mcp.Answer // every answer about the first task
	record := func(what string, a mcp.Answer, isErr bool, txt string) {
		t.Helper()
		if isErr {
			t.Fatalf("%s: an error about the first task: %s", what, txt)
		}
		mu.Lock()
		first = append(first, a)
		mu.Unlock()
	}

	// 1. Four rapid re-submits of the same step, at once.
	agent := e.client(secretAgent)
	var wg sync.WaitGroup
	for k := 0; k < 4; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a mcp.Answer
			res := call(t, agent, tool, args, &a)
			record("concurrent submit", a, res.IsError, text(res))
		}()
	}
	wg.Wait()
	id := first[0].IntentID
	replays := 0
	for _, a := range first {
		if a.IntentID != id {
			t.Fatalf("the same step answered two intents: %s and %s", id, a.IntentID)
		}
		if a.Replayed {
			replays++
		}
	}
	if replays != 3 {
		t.Fatalf("%d of 4 concurrent submits were replays, want 3: %+v", replays, first)
	}
	if e.Social.Writes() != 1 || e.Social.Effects() != 1 {
		t.Fatalf("after 4 submits: %d POSTs, %d effects", e.Social.Writes(), e.Social.Effects())
	}
	if st := e.Intent("social_post", id).State; st != fsm.Unknown {
		t.Fatalf("after the dropped response the intent is %s", st)
	}

	// 2. It asks for status at once (unknown), then waits while settle
	// reconciles (search, readback) — no second write.
	var a mcp.Answer
	res := call(t, agent, mcp.ToolStatus, map[string]any{"intent_id": id}, &a)
	record("status", a, res.IsError, text(res))
	if a.Outcome != mcp.OutcomeUnknown || !strings.Contains(a.Guidance, "do not retry") && !strings.Contains(a.Guidance, "Do not retry") {
		t.Fatalf("status of the dropped write: %s", text(res))
	}
	e.RunReconciler("w1")
	res = call(t, agent, mcp.ToolStatus, map[string]any{"route": "social_post", "task_id": "task-1", "step_id": "step-1", "wait_seconds": 45}, &a)
	record("status by task and step", a, res.IsError, text(res))
	if a.IntentID != id || a.Outcome != mcp.OutcomeConfirmed || a.Receipt == nil {
		t.Fatalf("status with wait: %s", text(res))
	}
	posts := e.Social.Posts()
	if len(posts) != 1 || a.Receipt.ExternalID != posts[0].ID || a.Receipt.LiveURL != posts[0].URL {
		t.Fatalf("receipt %+v, posts %+v", a.Receipt, posts)
	}

	// 3. The agent restarts its task with the same task id: a new session,
	// the same step — the stored result, nothing written.
	restarted := e.client(secretAgent)
	res = call(t, restarted, tool, args, &a)
	record("restart, same task id", a, res.IsError, text(res))
	if a.IntentID != id || !a.Replayed || a.Outcome != mcp.OutcomeConfirmed || a.Receipt.ExternalID != posts[0].ID {
		t.Fatalf("restart with the same task id: %s", text(res))
	}

	// 4. It restarts with a new task id: a new intent and one new write.
	var b mcp.Answer
	res = call(t, restarted, tool, map[string]any{"task_id": "task-2", "step_id": "step-1", "account": "acct_1",
		"payload": map[string]any{"body": "hello from an impatient agent"}, "wait_seconds": 45}, &b)
	if res.IsError || b.IntentID == id || b.Replayed || b.Outcome != mcp.OutcomeConfirmed {
		t.Fatalf("restart with a new task id: %s", text(res))
	}

	// The effects, counted by the fake API per idempotency key, and the log.
	i1, i2 := e.Intent("social_post", id), e.Intent("social_post", b.IntentID)
	if n := e.Social.EffectsForKey(i1.Recorded.IdempotencyKey); n != 1 {
		t.Fatalf("first task: %d effects", n)
	}
	if n := e.Social.EffectsForKey(i2.Recorded.IdempotencyKey); n != 1 {
		t.Fatalf("new task: %d effects", n)
	}
	if e.Social.Effects() != 2 || e.Social.Writes() != 2 {
		t.Fatalf("%d effects, %d POSTs in all", e.Social.Effects(), e.Social.Writes())
	}
	if len(i1.Attempts) != 1 || i1.State != fsm.Confirmed || i1.Recorded.RequestID != events.ToolKey("task-1", "step-1", "") {
		t.Fatalf("first intent: state %s, %d attempts, request id %s", i1.State, len(i1.Attempts), i1.Recorded.RequestID)
	}
	for _, a := range first {
		if a.Outcome != mcp.OutcomeUnknown && a.Outcome != mcp.OutcomeConfirmed {
			t.Fatalf("an answer about the first task says %s (%s)", a.Outcome, a.State)
		}
		if a.Outcome == mcp.OutcomeUnknown && !strings.Contains(strings.ToLower(a.Guidance), "do not retry") {
			t.Fatalf("an unknown answer without 'do not retry': %q", a.Guidance)
		}
	}
	t.Logf("%d answers about the first task, all unknown or confirmed; effects: task-1 1, task-2 1", len(first))
}

// TestSamePayloadChangedIsRefusedAndShowsTheStoredResult: a restarted agent
// that regenerates a different text for the same step is refused (nothing
// written) and learns the stored result; a new step id is a new write.
func TestSameStepOtherPayloadIsRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	agent := e.client(secretAgent)
	var a mcp.Answer
	res := call(t, agent, "submit_social_post", submitArgs("task-9", "step-1", "first text"), &a)
	if res.IsError {
		t.Fatal(text(res))
	}
	before := e.StreamLen()
	var te mcp.ToolError
	res = call(t, agent, "submit_social_post", submitArgs("task-9", "step-1", "regenerated text"), &te)
	if !res.IsError || te.Error.Code != mcp.CodePayloadMismatch || te.Error.Field != "payload" || te.Intent == nil || te.Intent.IntentID != a.IntentID {
		t.Fatalf("other payload under the same step: %s", text(res))
	}
	other := submitArgs("task-9", "step-1", "first text")
	other["parent_external_id"] = "p_99"
	res = call(t, agent, "submit_social_post", other, &te)
	if !res.IsError || te.Error.Code != mcp.CodePayloadMismatch || te.Error.Field != "parent_external_id" {
		t.Fatalf("other parent under the same step: %s", text(res))
	}
	// A token without the read scope learns which argument differs, not
	// the stored intent.
	var blind mcp.ToolError
	res = call(t, e.client(secretSubmitter), "submit_social_post", submitArgs("task-9", "step-1", "regenerated text"), &blind)
	if !res.IsError || blind.Error.Code != mcp.CodePayloadMismatch || blind.Intent != nil {
		t.Fatalf("mismatch for a submit-only token: %s", text(res))
	}
	if e.StreamLen() != before || e.Social.Writes() != 1 {
		t.Fatalf("a refused submit wrote: %d events (was %d), %d POSTs", e.StreamLen(), before, e.Social.Writes())
	}
}

// TestKeyIncludesPayload: with KeyIncludesPayload, another payload under
// the same step is another intent, and status by step needs the payload.
// The key hashes the payload as the route records it (its normaliser,
// canon/v1): a retry whose payload differs only in form — keys in
// another order, the route's default "assets": [] spelled out — is the
// same intent, and the API counts one post.
func TestKeyIncludesPayload(t *testing.T) {
	e := newEnv(t, envOptions{keyIncludesPayload: true})
	agent := e.client(secretAgent)
	var a, b mcp.Answer
	call(t, agent, "submit_social_post", submitArgs("task-p", "step-1", "one"), &a)
	call(t, agent, "submit_social_post", submitArgs("task-p", "step-1", "two"), &b)
	if a.IntentID == b.IntentID || e.Social.Effects() != 2 {
		t.Fatalf("intents %s %s, effects %d", a.IntentID, b.IntentID, e.Social.Effects())
	}
	ib := e.Intent("social_post", b.IntentID)
	if want := events.ToolKey("task-p", "step-1", ib.Recorded.PayloadSHA256); ib.Recorded.RequestID != want {
		t.Fatalf("request id %s, want %s (the recorded payload's hash)", ib.Recorded.RequestID, want)
	}
	if ib.Recorded.PayloadSHA256 == mustSHA(t, `{"body":"two"}`) {
		t.Fatalf("the route recorded the payload as given; this test needs a normaliser that adds a default")
	}
	// The same step retried with an equivalent payload: one intent.
	for _, payload := range []any{map[string]any{"body": "two", "assets": []string{}}, json.RawMessage(`{ "assets" : [ ], "body":"two" }`)} {
		args := submitArgs("task-p", "step-1", "")
		args["payload"] = payload
		var r mcp.Answer
		res := call(t, agent, "submit_social_post", args, &r)
		if res.IsError || r.IntentID != b.IntentID || !r.Replayed {
			t.Fatalf("equivalent payload %v: %s", payload, text(res))
		}
		var s mcp.Answer
		res = call(t, agent, mcp.ToolStatus, map[string]any{"route": "social_post", "task_id": "task-p", "step_id": "step-1",
			"payload": payload}, &s)
		if res.IsError || s.IntentID != b.IntentID {
			t.Fatalf("status with equivalent payload %v: %s", payload, text(res))
		}
	}
	if e.Social.Effects() != 2 || e.Social.Writes() != 2 {
		t.Fatalf("effects %d, POSTs %d after equivalent retries, want 2", e.Social.Effects(), e.Social.Writes())
	}
	var te mcp.ToolError
	res := call(t, agent, mcp.ToolStatus, map[string]any{"route": "social_post", "task_id": "task-p", "step_id": "step-1"}, &te)
	if !res.IsError || te.Error.Field != "payload" {
		t.Fatalf("status by step without payload: %s", text(res))
	}
	var s mcp.Answer
	res = call(t, agent, mcp.ToolStatus, map[string]any{"route": "social_post", "task_id": "task-p", "step_id": "step-1",
		"payload": map[string]any{"body": "two"}}, &s)
	if res.IsError || s.IntentID != b.IntentID {
		t.Fatalf("status by step with payload: %s", text(res))
	}
}

func mustSHA(t testing.TB, payload string) string {
	t.Helper()
	s, err := events.PayloadSHA256([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
