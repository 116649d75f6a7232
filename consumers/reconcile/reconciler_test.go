package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

var t0 = time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)

// world is a real embedded nats-server, a fake social API over real HTTP
// with an injected clock, a producer and reconcilers sharing that clock.
type world struct {
	t     *testing.T
	node  *testharness.Node
	clock *testharness.ManualClock
	api   *fakeapi.SocialAPI
	route adapter.Route
	store *ledger.Store
	prod  *producer.Producer
}

func newWorld(t *testing.T, policy func(*events.Policy)) *world {
	t.Helper()
	n := testharness.StartNode(t)
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(clock.Now))
	ad := testharness.ExampleRoute(t, "social.yaml", api).Adapter
	pol := adapter.DefaultPolicy()
	pol.ClockSkew = events.Duration(time.Second)
	if policy != nil {
		policy(&pol)
	}
	route := adapter.Route{Name: "social_post", Adapter: ad, Policy: pol}
	store, err := ledger.OpenStore(context.Background(), n.JS, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	pc := producer.DefaultConfig()
	pc.Now = clock.Now
	pc.Actor = "writer"
	prod, err := producer.New(store, pc, route)
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, node: n, clock: clock, api: api, route: route, store: store, prod: prod}
}

// canonical is a payload in the route's canonical shape.
func (w *world) canonical(raw string) (json.RawMessage, error) {
	return w.route.Adapter.(adapter.PayloadNormalizer).NormalizePayload(json.RawMessage(raw))
}

func (w *world) reconciler(name string, store *ledger.Store) *Reconciler {
	w.t.Helper()
	if store == nil {
		store = w.store
	}
	r, err := NewReconciler(store, w.reconcilerConfig(name), w.route)
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// reconcilerConfig is the config of the world's reconcilers.
func (w *world) reconcilerConfig(name string) Config {
	cfg := DefaultConfig()
	cfg.Worker = name
	cfg.Now = w.clock.Now
	cfg.Recheck = time.Minute
	cfg.MaxRecheck = 8 * time.Minute
	cfg.MaxWait = 20 * time.Millisecond
	cfg.AckWait = 2 * time.Second
	cfg.Lease = 30 * time.Second
	cfg.Rand = rand.New(rand.NewPCG(7, 7))
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

func (w *world) execute(requestID, body string) *producer.Result {
	w.t.Helper()
	return w.executePayload(requestID, `{"body":"`+body+`"}`, "")
}

func (w *world) executePayload(requestID, payload, parent string) *producer.Result {
	w.t.Helper()
	res, err := w.prod.Execute(context.Background(), producer.Request{Route: "social_post", Account: "acct_1",
		RequestID: requestID, ParentExternalID: parent, Payload: json.RawMessage(payload)})
	if err != nil {
		w.t.Fatal(err)
	}
	return res
}

// settle steps an intent with r, moving the clock over every wait, until
// the reconciler has nothing more to do.
func (w *world) settle(r *Reconciler, intentID string) *fsm.Intent {
	w.t.Helper()
	for k := 0; k < 200; k++ {
		res, err := r.Step(context.Background(), "social_post", intentID)
		if err != nil {
			w.t.Fatal(err)
		}
		if res.Done {
			return w.intent(intentID)
		}
		if res.Wait > 0 {
			w.clock.Advance(res.Wait)
		}
	}
	w.t.Fatalf("intent %s did not settle in 200 steps", intentID)
	return nil
}

func (w *world) history(intentID string) []events.Event {
	w.t.Helper()
	h, err := w.store.Load(context.Background(), "social_post", intentID)
	if err != nil {
		w.t.Fatal(err)
	}
	return h.Events
}

func (w *world) intent(intentID string) *fsm.Intent {
	w.t.Helper()
	i, err := fsm.Fold(w.history(intentID))
	if err != nil {
		w.t.Fatal(err)
	}
	return i
}

// loaded reads an intent with p as an operator action does, and returns
// its history and fold for the action.
func loaded(t *testing.T, p *producer.Producer, id string) (*ledger.History, *fsm.Intent) {
	t.Helper()
	h, i, err := p.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return h, i
}

// count counts h's events of type t; counting WriteStarted counts every
// write start, an IntentStarted's (a new intent's first) included.
func count(h []events.Event, t events.Type) int {
	n := 0
	for _, e := range h {
		if e.Type == t || (t == events.WriteStarted && e.Type.StartsWrite()) {
			n++
		}
	}
	return n
}

func checksOK(t *testing.T, rc *events.Receipt, names ...string) {
	t.Helper()
	if rc == nil {
		t.Fatal("no receipt")
	}
	got := map[string]bool{}
	for _, c := range rc.Checks {
		got[c.Name] = c.OK
	}
	for _, n := range names {
		if !got[n] {
			t.Errorf("receipt check %s missing or failed: %+v", n, rc.Checks)
		}
	}
}

var readbackChecks = []string{"url", "author", "payload", "parent", "visibility"}

func TestServerSuccessClientTimeoutConfirmsWithOneEffect(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.CommitThenDrop())
	res := w.execute("task:1", "hello")
	if res.State != fsm.Unknown {
		t.Fatalf("after the dropped response: %s", res.State)
	}
	i := w.settle(w.reconciler("w1", nil), res.IntentID)
	if i.State != fsm.Confirmed || w.api.Effects() != 1 || w.api.Writes() != 1 {
		t.Fatalf("state %s effects %d writes %d", i.State, w.api.Effects(), w.api.Writes())
	}
	checksOK(t, i.Receipt, readbackChecks...)
	if i.Receipt.ExternalID != w.api.Posts()[0].ID || i.Receipt.PayloadSHA256 != i.Recorded.PayloadSHA256 || i.Receipt.LiveURL == "" {
		t.Fatalf("receipt %+v", i.Receipt)
	}
	h := w.history(res.IntentID)
	if count(h, events.WriteStarted) != 1 || count(h, events.CandidateFound) != 1 || count(h, events.ReadbackPassed) != 1 {
		t.Fatalf("history %v", typesOf(h))
	}
}

func typesOf(h []events.Event) []events.Type {
	out := make([]events.Type, len(h))
	for i, e := range h {
		out[i] = e.Type
	}
	return out
}

func TestServerFailureWaitsWindowThenOneApprovedRetrySameKey(t *testing.T) {
	w := newWorld(t, func(p *events.Policy) { p.Retry = events.PolicyApproval })
	w.api.Next(fakeapi.ResetBeforeCommit())
	res := w.execute("task:1", "hello")
	r := w.reconciler("w1", nil)
	i := w.settle(r, res.IntentID)
	if i.State != fsm.AwaitingApproval || w.api.Effects() != 0 || w.api.Writes() != 1 {
		t.Fatalf("before approval: state %s effects %d writes %d", i.State, w.api.Effects(), w.api.Writes())
	}
	h := w.history(res.IntentID)
	if count(h, events.CheckDeferred) == 0 || count(h, events.SearchWindowElapsed) != 1 {
		t.Fatalf("did not wait out the window: %v", typesOf(h))
	}
	elapsed := h[len(h)-2]
	if elapsed.Type != events.SearchWindowElapsed || elapsed.At.Before(elapsed.Data.(*events.SearchWindowElapsedData).WindowTo) {
		t.Fatalf("not_found before the window closed: %+v", elapsed)
	}
	lh, li := loaded(t, w.prod, res.IntentID)
	if err := w.prod.Approve(context.Background(), lh, li, "alice", "checked the feed"); err != nil {
		t.Fatal(err)
	}
	i = w.settle(r, res.IntentID)
	if i.State != fsm.Confirmed || w.api.Effects() != 1 || w.api.Writes() != 2 {
		t.Fatalf("after retry: state %s effects %d writes %d", i.State, w.api.Effects(), w.api.Writes())
	}
	checksOK(t, i.Receipt, readbackChecks...)
	h = w.history(res.IntentID)
	if count(h, events.RetryClaimed) != 1 || count(h, events.WriteStarted) != 2 {
		t.Fatalf("history %v", typesOf(h))
	}
	key := i.Recorded.IdempotencyKey
	for _, rec := range w.api.WriteLog() {
		if rec.IdempotencyKey != key {
			t.Fatalf("attempt sent key %q, want %q", rec.IdempotencyKey, key)
		}
	}
	if i.Attempts[1].ClaimOwner != "w1" || i.ApprovedBy != "alice" {
		t.Fatalf("attempt 2 %+v approved by %q", i.Attempts[1], i.ApprovedBy)
	}
}

func TestEventualConsistencyFindsLaterWithoutRetry(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.VisibilityDelay(90 * time.Second).Dropped())
	res := w.execute("task:1", "hello")
	i := w.settle(w.reconciler("w1", nil), res.IntentID)
	h := w.history(res.IntentID)
	if i.State != fsm.Confirmed || w.api.Effects() != 1 || w.api.Writes() != 1 {
		t.Fatalf("state %s effects %d writes %d", i.State, w.api.Effects(), w.api.Writes())
	}
	if count(h, events.CheckDeferred) == 0 || count(h, events.RetryClaimed) != 0 || count(h, events.WriteStarted) != 1 {
		t.Fatalf("history %v", typesOf(h))
	}
	first := h[3] // the first reconcile step's conclusion
	if first.Type != events.CheckDeferred || first.Data.(*events.CheckDeferredData).Reason != "eventual_consistency" {
		t.Fatalf("first search should have found 0 and waited: %v", typesOf(h))
	}
	checksOK(t, i.Receipt, readbackChecks...)
}

func TestTwoExactDuplicatesGoToManualActionWithoutWrites(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.Duplicate().Dropped())
	res := w.execute("task:1", "hello")
	i := w.settle(w.reconciler("w1", nil), res.IntentID)
	if i.State != fsm.ManualAction || i.ManualReason != events.ReasonDuplicateExactMatches {
		t.Fatalf("state %s reason %s", i.State, i.ManualReason)
	}
	if w.api.Writes() != 1 || w.api.Effects() != 2 || len(w.api.Posts()) != 2 {
		t.Fatalf("writes %d effects %d (nothing may be written or deleted)", w.api.Writes(), w.api.Effects())
	}
	if len(i.Evidence.Candidates) != 2 || i.Receipt != nil {
		t.Fatalf("evidence %+v receipt %v", i.Evidence, i.Receipt)
	}
}

const assetA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func TestMatchRefusesOtherAuthorParentOrAssets(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.CommitThenDrop())
	res := w.executePayload("task:1", `{"body":"hello","assets":["`+assetA+`"]}`, "p_parent")
	i := res.Intent
	good, _ := w.canonical(`{"body":"hello","assets":["` + assetA + `"]}`)
	noAsset, _ := w.canonical(`{"body":"hello"}`)
	cases := []struct {
		name     string
		rec      testRecord
		mismatch string
	}{
		{"exact", testRecord{"acct_1", "p_parent", good}, ""},
		{"other author", testRecord{"acct_2", "p_parent", good}, "author"},
		{"other parent", testRecord{"acct_1", "p_other", good}, "parent"},
		{"no parent", testRecord{"acct_1", "", good}, "parent"},
		{"missing image", testRecord{"acct_1", "p_parent", noAsset}, "payload"},
	}
	sums := &payloadSums{} // the cases' records as one listing's
	for _, c := range cases {
		ref := fsm.Match(i, i.Caps(), candidate(w.route, i, c.rec.record(), sums))
		if c.mismatch == "" {
			if !ref.Match {
				t.Errorf("%s: not matched: %v", c.name, ref.Mismatch)
			}
			continue
		}
		if ref.Match || len(ref.Mismatch) != 1 || ref.Mismatch[0] != c.mismatch {
			t.Errorf("%s: match %v mismatch %v", c.name, ref.Match, ref.Mismatch)
		}
	}
}

func TestNearMatchesAreNeverConfirmedNorRetried(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault fakeapi.Fault
	}{
		{"different parent", fakeapi.WrongParent("p_other").Dropped()},
		{"missing image", fakeapi.MissingAsset().Dropped()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, nil)
			w.api.Next(tc.fault)
			res := w.executePayload("task:1", `{"body":"hello","assets":["`+assetA+`"]}`, "p_parent")
			i := w.settle(w.reconciler("w1", nil), res.IntentID)
			h := w.history(res.IntentID)
			if count(h, events.CandidateFound) != 0 || i.Receipt != nil {
				t.Fatalf("a non-matching post was taken for ours: %v", typesOf(h))
			}
			if i.State != fsm.ManualAction || i.ManualReason != events.ReasonNearMatch || w.api.Writes() != 1 {
				t.Fatalf("state %s reason %s writes %d", i.State, i.ManualReason, w.api.Writes())
			}
		})
	}
}

func TestOtherAuthorsPostIsNotOursAndTheWriteIsRetried(t *testing.T) {
	w := newWorld(t, nil)
	// Someone else posted the same text; our write never happened.
	w.api.Inject(fakeapi.Post{AuthorID: "acct_2", Body: "hello", Visibility: "public", CreatedAt: t0})
	w.api.Next(fakeapi.ResetBeforeCommit())
	res := w.execute("task:1", "hello")
	i := w.settle(w.reconciler("w1", nil), res.IntentID)
	if i.State != fsm.Confirmed || w.api.Effects() != 1 || w.api.Writes() != 2 {
		t.Fatalf("state %s effects %d writes %d", i.State, w.api.Effects(), w.api.Writes())
	}
	if i.Receipt.ExternalID == w.api.Posts()[0].ID {
		t.Fatal("another author's post became our receipt")
	}
}

func TestLiveURL404AndDraftGoToManualAction(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  fakeapi.Fault
		failed string
	}{
		{"url 404", fakeapi.URL404().Dropped(), "url"},
		{"draft", fakeapi.Draft().Dropped(), "visibility"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, nil)
			w.api.Next(tc.fault)
			res := w.execute("task:1", "hello")
			i := w.settle(w.reconciler("w1", nil), res.IntentID)
			if i.State != fsm.ManualAction || i.ManualReason != events.ReasonReadbackFailed || i.Receipt != nil {
				t.Fatalf("state %s reason %s", i.State, i.ManualReason)
			}
			if !slices.Contains(i.Evidence.Unverified, tc.failed) {
				t.Fatalf("failed checks %v do not name %s", i.Evidence.Unverified, tc.failed)
			}
			if w.api.Writes() != 1 || w.api.Effects() != 1 {
				t.Fatalf("writes %d effects %d", w.api.Writes(), w.api.Effects())
			}
		})
	}
}

func TestWorkerKilledAfterClaimReconcilesAgainBeforeAnyWrite(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.ResetBeforeCommit())
	res := w.execute("task:1", "hello")
	dying := w.reconciler("dying", nil)
	killed := errors.New("worker killed")
	dying.hookAfterClaim = func(string) error { return killed }
	for k := 0; k < 100; k++ {
		sr, err := dying.Step(context.Background(), "social_post", res.IntentID)
		if errors.Is(err, killed) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		w.clock.Advance(sr.Wait)
	}
	i := w.intent(res.IntentID)
	if i.State != fsm.RetryClaimed || i.Claim.Owner != "dying" || w.api.Writes() != 1 {
		t.Fatalf("after the kill: state %s writes %d", i.State, w.api.Writes())
	}
	other := w.reconciler("survivor", nil)
	sr, err := other.Step(context.Background(), "social_post", res.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.Appended) != 0 || sr.Wait <= 0 || w.api.Writes() != 1 {
		t.Fatalf("survivor acted on a live claim: %+v", sr)
	}
	i = w.settle(other, res.IntentID)
	if i.State != fsm.Confirmed || w.api.Effects() != 1 || w.api.Writes() != 2 {
		t.Fatalf("state %s effects %d writes %d", i.State, w.api.Effects(), w.api.Writes())
	}
	h := w.history(res.IntentID)
	// Order: dying's claim, its expiry, a new reconciliation, a fresh claim
	// by the survivor, and only then the second WriteStarted.
	var order []string
	for _, e := range h {
		switch d := e.Data.(type) {
		case *events.RetryClaimedData:
			order = append(order, "claim:"+d.Owner)
		case *events.ClaimExpiredData:
			order = append(order, "expired:"+d.Owner)
		case *events.ReconcileStartedData:
			if len(order) == 0 || order[len(order)-1] != "reconcile" {
				order = append(order, "reconcile")
			}
		case *events.IntentStartedData:
			order = append(order, fmt.Sprintf("write%d:%s", d.Started.Attempt, d.Started.ClaimOwner))
		case *events.WriteStartedData:
			order = append(order, fmt.Sprintf("write%d:%s", d.Attempt, d.ClaimOwner))
		}
	}
	got := strings.Join(order, " ")
	want := "write1: reconcile claim:dying expired:dying reconcile claim:survivor write2:survivor"
	if got != want {
		t.Fatalf("order\n got %s\nwant %s", got, want)
	}
}

func TestDryRunReportsWithoutWriting(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.CommitThenDrop())
	res := w.execute("task:1", "hello")
	before := len(w.history(res.IntentID))
	rep, err := w.reconciler("w1", nil).DryRun(context.Background(), "social_post", res.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Would != events.CandidateFound || len(rep.Candidates) != 1 || !rep.Candidates[0].Match {
		t.Fatalf("report %+v", rep)
	}
	if len(rep.Checks) != 5 {
		t.Fatalf("checks %+v", rep.Checks)
	}
	for _, c := range rep.Checks {
		if !c.OK {
			t.Fatalf("check %s failed", c.Name)
		}
	}
	if after := len(w.history(res.IntentID)); after != before || w.api.Writes() != 1 {
		t.Fatalf("dry run appended %d events, writes %d", after-before, w.api.Writes())
	}
}

func TestWriterDiedAfterWriteStartedBecomesUnknownAfterDeadline(t *testing.T) {
	w := newWorld(t, nil)
	// A writer recorded and started, then died before calling the API.
	rec := events.Recorded(w.history(w.execute("seed", "x").IntentID)[0])
	id := events.ScopedIntentID("default", "social_post", "acct_1", "task:dead")
	d := *rec
	d.RequestID = "task:dead"
	d.IdempotencyKey = events.IdempotencyKey(id)
	// Its own payload: two intents of one account with the same payload in
	// overlapping windows cannot be told apart by search (ARCHITECTURE.md).
	d.Payload, _ = w.canonical(`{"body":"dead writer's post"}`)
	d.PayloadSHA256, _ = events.PayloadSHA256(d.Payload)
	h := &ledger.History{Route: "social_post"}
	i := &fsm.Intent{State: fsm.None, ID: id}
	if err := w.store.AppendNext(context.Background(), h, i, "dead", w.clock.Now(), "", &d); err != nil {
		t.Fatal(err)
	}
	if err := w.store.AppendNext(context.Background(), h, i, "dead", w.clock.Now(), events.AttemptID(id, 1),
		&events.WriteStartedData{Attempt: 1, IdempotencyKey: d.IdempotencyKey, Deadline: w.clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	r := w.reconciler("w1", nil)
	sr, err := r.Step(context.Background(), "social_post", id)
	if err != nil || len(sr.Appended) != 0 || sr.Wait <= 0 {
		t.Fatalf("before the deadline: %+v %v", sr, err)
	}
	got := w.settle(r, id)
	hist := w.history(id)
	if hist[2].Type != events.OutcomeUnknown || hist[2].Data.(*events.OutcomeUnknownData).Code != "attempt_deadline_passed" {
		t.Fatalf("history %v", typesOf(hist))
	}
	if got.State != fsm.Confirmed || w.api.EffectsForKey(d.IdempotencyKey) != 1 {
		t.Logf("history %v reason %s evidence %+v", typesOf(hist), got.ManualReason, got.Evidence)
		t.Fatalf("state %s effects %d", got.State, w.api.EffectsForKey(d.IdempotencyKey))
	}
}

type testRecord struct {
	author, parent string
	payload        json.RawMessage
}

func (r testRecord) record() adapter.Record {
	return adapter.Record{ExternalID: "p_x", AuthorID: r.author, ParentID: r.parent, Payload: r.payload, Visibility: "public"}
}

func TestRecordedIntentOfADeadWriterIsStartedOnceAfterTheGrace(t *testing.T) {
	w := newWorld(t, nil)
	// A writer recorded an intent and died before WriteStarted.
	seed := events.Recorded(w.history(w.execute("seed", "seed post").IntentID)[0])
	id := events.ScopedIntentID("default", "social_post", "acct_1", "task:orphan")
	d := *seed
	d.RequestID, d.IdempotencyKey = "task:orphan", events.IdempotencyKey(id)
	d.Payload, _ = w.canonical(`{"body":"orphaned intent"}`)
	d.PayloadSHA256, _ = events.PayloadSHA256(d.Payload)
	h := &ledger.History{Route: "social_post"}
	if err := w.store.AppendNext(context.Background(), h, &fsm.Intent{State: fsm.None, ID: id}, "dead", w.clock.Now(), "", &d); err != nil {
		t.Fatal(err)
	}
	writes := w.api.Writes()
	r := w.reconciler("w1", nil)
	sr, err := r.Step(context.Background(), "social_post", id)
	if err != nil || len(sr.Appended) != 0 || sr.Wait <= 0 || w.api.Writes() != writes {
		t.Fatalf("inside the grace: %+v %v", sr, err)
	}
	i := w.settle(r, id)
	if i.State != fsm.Confirmed || w.api.EffectsForKey(d.IdempotencyKey) != 1 || len(i.Attempts) != 1 {
		t.Fatalf("state %s effects %d attempts %d", i.State, w.api.EffectsForKey(d.IdempotencyKey), len(i.Attempts))
	}
}

func TestFirstWriteApprovalThenTheReconcilerWrites(t *testing.T) {
	w := newWorld(t, func(p *events.Policy) { p.FirstWrite = events.PolicyApproval })
	res := w.execute("task:1", "needs a human first")
	if res.State != fsm.AwaitingApproval || w.api.Writes() != 0 {
		t.Fatalf("state %s writes %d", res.State, w.api.Writes())
	}
	r := w.reconciler("w1", nil)
	if sr, err := r.Step(context.Background(), "social_post", res.IntentID); err != nil || !sr.Done || w.api.Writes() != 0 {
		t.Fatalf("unapproved: %+v %v writes %d", sr, err, w.api.Writes())
	}
	lh, li := loaded(t, w.prod, res.IntentID)
	if err := w.prod.Approve(context.Background(), lh, li, "alice", "reviewed"); err != nil {
		t.Fatal(err)
	}
	i := w.settle(r, res.IntentID)
	if i.State != fsm.Confirmed || w.api.Effects() != 1 || i.ApprovedBy != "alice" {
		t.Fatalf("state %s effects %d approved by %q", i.State, w.api.Effects(), i.ApprovedBy)
	}
}
