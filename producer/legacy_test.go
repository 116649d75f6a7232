package producer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
	ctx := context.Background()
	// The stream was made before ids were scoped: it may hold v1 intents.
	e := newEnvOn(t, func(js jetstream.JetStream) { olderStream(t, js) })
	if e.store.ScopedIDsOnly() {
		t.Fatal("a stream made before scoped ids is taken to hold scoped ids only")
	}
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
		if _, err := e.store.Append(ctx, "social_post", ev, 0); err != nil {
			t.Fatal(err)
		}
		h, err := e.store.Load(ctx, "social_post", id)
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

// olderStream makes the intents stream as a version before scoped ids
// did: no atomic publish, no direct get, no scoped-ids mark.
func olderStream(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "SETTLE_INTENTS",
		Description: "settle intents: one subject per intent, every lifecycle event", Subjects: []string{events.AllSubjects},
		Storage: jetstream.FileStorage, Discard: jetstream.DiscardNew, Duplicates: 10 * time.Minute,
		DenyDelete: true, DenyPurge: true, MaxMsgSize: events.MaxEventSize + 4096})
	if err != nil {
		t.Fatal(err)
	}
}

// A new intent costs no read of the log on a stream this version made
// (its first message's CAS "subject empty" is the check), and a replay
// one read (after that CAS failed); on a stream made before scoped ids, a
// new intent reads its scoped id and looks under its v1 id.
func TestExecuteReadsTheLogOncePerSubmit(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		made      func(t *testing.T, js jetstream.JetStream)
		readsNew  int64
		readsSame int64
	}{
		{"stream made by this version", nil, 0, 1},
		{"stream made before scoped ids", olderStream, 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var made func(jetstream.JetStream)
			if c.made != nil {
				made = func(js jetstream.JetStream) { c.made(t, js) }
			}
			e := newEnvOn(t, made)
			before := e.store.Loads()
			res, err := e.p.Execute(ctx, req("reads-1", "hello"))
			if err != nil || res.State != fsm.Verifying {
				t.Fatalf("%v %+v", err, res)
			}
			if got := e.store.Loads() - before; got != c.readsNew {
				t.Fatalf("a new intent read the log %d times, want %d", got, c.readsNew)
			}
			before = e.store.Loads()
			again, err := e.p.Execute(ctx, req("reads-1", "hello"))
			if err != nil || !again.Replayed {
				t.Fatalf("%v %+v", err, again)
			}
			if got := e.store.Loads() - before; got != c.readsSame {
				t.Fatalf("a replay read the log %d times, want %d", got, c.readsSame)
			}
			// The result is the intent as the log holds it: its events and
			// the sequence of the last, and the fold of exactly those.
			h, err := e.store.Load(ctx, "social_post", res.IntentID)
			if err != nil || h.LastSeq != again.LastSeq || len(h.Events) != len(again.History) || again.Intent.Version != uint64(len(h.Events)) {
				t.Fatalf("result: last seq %d, %d events, version %d; log: %+v %v", again.LastSeq, len(again.History), again.Intent.Version, h, err)
			}
		})
	}
}
