package reconcile

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/consumers/audit"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/testharness"
)

// updateLogV1 rewrites testharness/testdata/logv1 from a log this version
// writes. It was run once, by the version whose every write was
// IntentRecorded, WriteStarted and an outcome (before IntentStarted); the
// files it wrote are that format's witness, and a version that writes
// IntentStarted refuses to write them again.
var updateLogV1 = flag.Bool("update-logv1", false, "write testharness/testdata/logv1 from this version's log")

// TestGenerateLogV1 writes, behind -update-logv1, a small log covering
// every path of a write (confirmed by readback and by a trusted response,
// rejected, unknown then confirmed by search, retried after a proven
// not-found, resent after a rate limit, approved, abandoned, duplicates
// handed to a human) and what the projector and the audit made of it.
func TestGenerateLogV1(t *testing.T) {
	if !*updateLogV1 {
		t.Skip("run with -update-logv1 to write testharness/testdata/logv1")
	}
	ctx := context.Background()
	n := testharness.StartNode(t)
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(clock.Now))
	ad := testharness.ExampleRoute(t, "social.yaml", api).Adapter
	pol := adapter.DefaultPolicy()
	pol.ClockSkew = events.Duration(time.Second)
	approval, trusted := pol, pol
	approval.FirstWrite, approval.Retry = events.PolicyApproval, events.PolicyApproval
	trusted.TrustResponse = true
	routes := []adapter.Route{
		{Name: "social_post", Adapter: ad, Policy: pol},
		{Name: "social_approval", Adapter: ad, Policy: approval},
		{Name: "social_trusted", Adapter: ad, Policy: trusted},
	}
	store, err := ledger.OpenStore(ctx, n.JS, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	pc := producer.DefaultConfig()
	pc.Now, pc.Actor = clock.Now, "writer"
	prod, err := producer.New(store, pc, routes...)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, node: n, clock: clock, api: api, route: routes[0], store: store, prod: prod}
	rc, err := NewReconciler(store, w.reconcilerConfig("w1"), routes...)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(route, requestID, body string) *producer.Result {
		t.Helper()
		res, err := prod.Execute(ctx, producer.Request{Route: route, Account: "acct_1", RequestID: requestID,
			Payload: json.RawMessage(`{"body":"` + body + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	settle := func(route, id string) *fsm.Intent {
		t.Helper()
		for k := 0; k < 200; k++ {
			res, err := rc.Step(ctx, route, id)
			if err != nil {
				t.Fatal(err)
			}
			if res.Done {
				_, i := loaded(t, prod, id)
				return i
			}
			clock.Advance(max(res.Wait, time.Second))
		}
		t.Fatalf("%s did not settle", id)
		return nil
	}
	want := func(i *fsm.Intent, s fsm.State) {
		t.Helper()
		if i.State != s {
			t.Fatalf("%s: %s, want %s", i.ID, i.State, s)
		}
	}

	// Confirmed by readback.
	want(settle("social_post", exec("social_post", "v1:confirmed", "confirmed").IntentID), fsm.Confirmed)
	// Confirmed by a trusted response, at once.
	want(exec("social_trusted", "v1:trusted", "trusted").Intent, fsm.Confirmed)
	// Rejected (a definite 400).
	api.Next(fakeapi.Status(400))
	want(settle("social_post", exec("social_post", "v1:rejected", "rejected").IntentID), fsm.Rejected)
	// Unknown (the response lost), confirmed by search and readback.
	api.Next(fakeapi.CommitThenDrop())
	res := exec("social_post", "v1:unknown", "unknown")
	want(res.Intent, fsm.Unknown)
	want(settle("social_post", res.IntentID), fsm.Confirmed)
	// Not found after the window, retried under a claim, confirmed.
	api.Next(fakeapi.ResetBeforeCommit())
	if i := settle("social_post", exec("social_post", "v1:retried", "retried").IntentID); i.State != fsm.Confirmed || len(i.Attempts) != 2 {
		t.Fatalf("retried: %s with %d attempts", i.State, len(i.Attempts))
	}
	// Rate limited, resent by settle, confirmed.
	api.Next(fakeapi.Status(429))
	if i := settle("social_post", exec("social_post", "v1:resent", "resent").IntentID); i.State != fsm.Confirmed || len(i.Attempts) != 2 {
		t.Fatalf("resent: %s with %d attempts", i.State, len(i.Attempts))
	}
	// Approval needed, approved, written by the reconciler.
	res = exec("social_approval", "v1:approved", "approved")
	want(res.Intent, fsm.AwaitingApproval)
	h, i := loaded(t, prod, res.IntentID)
	if err := prod.Approve(ctx, h, i, "alice", "reviewed"); err != nil {
		t.Fatal(err)
	}
	want(settle("social_approval", res.IntentID), fsm.Confirmed)
	// Approval needed, abandoned instead.
	res = exec("social_approval", "v1:abandoned", "abandoned")
	h, i = loaded(t, prod, res.IntentID)
	if err := prod.Abandon(ctx, h, i, "alice", "not needed"); err != nil {
		t.Fatal(err)
	}
	_, i = loaded(t, prod, res.IntentID)
	want(i, fsm.Abandoned)
	// Two exact duplicates found: handed to a human.
	api.Next(fakeapi.Duplicate().Dropped())
	want(settle("social_post", exec("social_post", "v1:duplicates", "duplicates").IntentID), fsm.ManualAction)

	// The v1 form has no IntentStarted: a version that writes one cannot
	// write this witness again (it would overwrite it with another form).
	for _, id := range []string{"v1:confirmed", "v1:trusted"} {
		for _, r := range routes {
			h, err := store.LoadIfAny(ctx, r.Name, events.ScopedIntentID("default", r.Name, "acct_1", id))
			if err == nil && h != nil && h.Events[0].Type == events.IntentStarted {
				t.Fatalf("this version records and starts an intent in one IntentStarted: testdata/logv1 is the witness of the form before it and is not written again")
			}
		}
	}
	dir := testharness.LogV1Dir()
	msgs := testharness.DumpStream(t, n.JS, store.Config().Stream, filepath.Join(dir, "log.jsonl"))
	proj := openProjection(t, n.JS)
	page, err := proj.List(ctx, projectorFilterAll())
	if err != nil {
		t.Fatal(err)
	}
	views := map[string]any{}
	for _, v := range page.Items {
		views[v.IntentID] = v
	}
	writeJSON(t, filepath.Join(dir, "views.json"), views)
	rep := runAudit(t, n.JS, audit.AuditConfig{Now: clock.Now, Projection: proj})
	if !rep.OK() || rep.Projection == nil || rep.Projection.Compared != len(views) {
		t.Fatalf("the v1 log does not audit clean: %v %+v", rep.Violations, rep.Projection)
	}
	writeJSON(t, filepath.Join(dir, "audit.json"), map[string]any{"intents": rep.Intents, "events": rep.Events, "states": rep.States})
	t.Logf("wrote %d messages, %d intents to %s", msgs, len(views), dir)
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func projectorFilterAll() projector.Filter { return projector.Filter{Limit: projector.MaxLimit} }
