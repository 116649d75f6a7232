package producer_test

import (
	"context"
	"errors"
	"testing"

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

// A new intent costs no read of the log (its first message's CAS "subject
// empty" is the check), and a replay one read (after that CAS failed).
func TestExecuteReadsTheLogOncePerSubmit(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	before := e.store.Loads()
	res, err := e.p.Execute(ctx, req("reads-1", "hello"))
	if err != nil || res.State != fsm.Verifying {
		t.Fatalf("%v %+v", err, res)
	}
	if got := e.store.Loads() - before; got != 0 {
		t.Fatalf("a new intent read the log %d times, want 0", got)
	}
	before = e.store.Loads()
	again, err := e.p.Execute(ctx, req("reads-1", "hello"))
	if err != nil || !again.Replayed {
		t.Fatalf("%v %+v", err, again)
	}
	if got := e.store.Loads() - before; got != 1 {
		t.Fatalf("a replay read the log %d times, want 1", got)
	}
	// The result is the intent as the log holds it: its events and the
	// sequence of the last, and the fold of exactly those.
	h, err := e.store.Load(ctx, "social_post", res.IntentID)
	if err != nil || h.LastSeq != again.LastSeq || len(h.Events) != len(again.History) || again.Intent.Version != uint64(len(h.Events)) {
		t.Fatalf("result: last seq %d, %d events, version %d; log: %+v %v", again.LastSeq, len(again.History), again.Intent.Version, h, err)
	}
}
