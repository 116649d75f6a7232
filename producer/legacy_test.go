package producer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
)

// Keys are scoped per tenant and account: the same request id for another
// account or tenant is another intent (no 422, no shared state), each with
// its own write.
func TestRequestIDIsScopedPerTenantAndAccount(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := req("shared-key", "from acct_1")
	b := req("shared-key", "from acct_2")
	b.Account = "acct_2"
	c := req("shared-key", "from another tenant")
	c.Tenant = "acme"
	ids := map[string]bool{}
	for _, r := range []producer.Request{a, b, c} {
		res, err := e.p.Execute(ctx, r)
		if err != nil {
			t.Fatalf("%s/%s: %v", r.Tenant, r.Account, err)
		}
		if res.Replayed {
			t.Fatalf("%s/%s replayed another's intent", r.Tenant, r.Account)
		}
		ids[res.IntentID] = true
	}
	if len(ids) != 3 || e.api.Effects() != 3 {
		t.Fatalf("%d intents, %d effects; want 3 and 3", len(ids), e.api.Effects())
	}
	// The same account again with another payload is still refused.
	a2 := req("shared-key", "changed")
	if _, err := e.p.Execute(ctx, a2); !errors.Is(err, producer.ErrPayloadMismatch) {
		t.Fatalf("same account, other payload: %v", err)
	}
	if id := events.ScopedIntentID("default", "social_post", "acct_2", "shared-key"); !ids[id] {
		t.Fatalf("acct_2's intent is not %s", id)
	}
}

// An intent recorded under its v1 id (before ids named the account) is
// found by the same request: replayed, never recorded and written again.
// A v1 intent of another account does not capture the request.
func TestExecuteFindsAnIntentRecordedUnderItsV1ID(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	record := func(requestID, account, body string) string {
		r := req(requestID, body)
		canon, err := e.ad.NormalizePayload(r.Payload)
		if err != nil {
			t.Fatal(err)
		}
		sum, _ := events.PayloadSHA256(canon)
		id := events.IntentID("default", "social_post", requestID)
		ev := events.New(id, 1, time.Now(), "old-writer", "", &events.IntentRecordedData{
			Tenant: "default", Route: "social_post", Account: account, RequestID: requestID,
			IdempotencyKey: events.IdempotencyKey(id), Payload: canon, PayloadSHA256: sum, Canon: events.CanonV1,
			PlannedAt: time.Now(), Policy: adapter.DefaultPolicy(),
		})
		if _, err := e.p.Store().Append(ctx, "social_post", ev, 0); err != nil {
			t.Fatal(err)
		}
		h, err := e.p.Store().Load(ctx, "social_post", id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fsm.Fold(h.Events); err != nil {
			t.Fatalf("a v1 history does not fold: %v", err)
		}
		return id
	}
	old := record("v1-req", "acct_1", "old post")
	first, err := e.p.Execute(ctx, req("v1-req", "old post"))
	if err != nil || first.IntentID != old {
		t.Fatalf("execute of a v1 intent: %v, id %s want %s", err, first.IntentID, old)
	}
	again, err := e.p.Execute(ctx, req("v1-req", "old post"))
	if err != nil || !again.Replayed || again.IntentID != old || e.api.Effects() != 1 {
		t.Fatalf("replay: %+v %v effects %d", again, err, e.api.Effects())
	}
	dry := req("v1-req", "old post")
	dry.DryRun = true
	if d, err := e.p.Execute(ctx, dry); err != nil || d.DryRun.IntentID != old || d.DryRun.ExistingState == "" {
		t.Fatalf("dry run: %+v %v", d, err)
	}
	// A v1 intent of acct_9 does not capture acct_1's request.
	other := record("v1-other", "acct_9", "someone else's")
	res, err := e.p.Execute(ctx, req("v1-other", "mine"))
	if err != nil || res.IntentID == other || res.Replayed {
		t.Fatalf("another account's v1 intent: %+v %v", res, err)
	}
	if res.IntentID != events.ScopedIntentID("default", "social_post", "acct_1", "v1-other") {
		t.Fatalf("new intent id %s", res.IntentID)
	}
}
