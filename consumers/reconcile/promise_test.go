package reconcile

// Tests of the promise — at most one external effect per intent, and
// confirmed only by an effect it made — on the paths where it is easiest
// to break: each test drives one such path end to end, with real embedded
// NATS, real HTTP fakes that count effects, the log and the fold asserted.

import (
	"context"
	"encoding/json"
	"errors"
	"net"
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

// newWorldWith is newWorld with options for the fake social API.
func newWorldWith(t *testing.T, policy func(*events.Policy), opts ...fakeapi.SocialOption) *world {
	t.Helper()
	n := testharness.StartNode(t)
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewSocialAPI(t, append([]fakeapi.SocialOption{fakeapi.WithSocialClock(clock.Now)}, opts...)...)
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
	pc.Now, pc.Actor = clock.Now, "writer"
	prod, err := producer.New(store, pc, route)
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, node: n, clock: clock, api: api, route: route, store: store, prod: prod}
}

// settleUpTo steps like settle but returns the intent after at most n
// steps instead of failing: a test of a loop asserts where it got.
func (w *world) settleUpTo(r *Reconciler, route, intentID string, n int) (*fsm.Intent, error) {
	w.t.Helper()
	var last error
	for k := 0; k < n; k++ {
		res, err := r.Step(context.Background(), route, intentID)
		if err != nil {
			last = err
			w.clock.Advance(time.Minute)
			continue
		}
		last = nil
		if res.Done {
			break
		}
		if res.Wait > 0 {
			w.clock.Advance(res.Wait)
		}
	}
	h, err := w.store.Load(context.Background(), route, intentID)
	if err != nil {
		w.t.Fatal(err)
	}
	i, err := h.Fold()
	if err != nil {
		w.t.Fatal(err)
	}
	return i, last
}

// 1. A 2xx with an external id proves the write; a readback 404 (deleted,
// moderated) must never lead to a second write.
func TestProvenWriteThatVanishesIsNeverWrittenAgain(t *testing.T) {
	w := newWorld(t, nil)
	res := w.execute("task:1", "hello")
	if res.State != fsm.Verifying || w.api.Effects() != 1 {
		t.Fatalf("after the write: %s, %d effects", res.State, w.api.Effects())
	}
	// A moderator removes the post before settle reads it back.
	if !w.api.Remove(res.Intent.ExternalID) {
		t.Fatal("post not found to remove")
	}
	i, err := w.settleUpTo(w.reconciler("w1", nil), "social_post", res.IntentID, 200)
	if err != nil {
		t.Fatal(err)
	}
	h := w.history(res.IntentID)
	if w.api.Writes() != 1 || count(h, events.WriteStarted) != 1 || count(h, events.RetryClaimed) != 0 {
		t.Fatalf("a proven write was written again: writes %d, history %v", w.api.Writes(), typesOf(h))
	}
	if i.State != fsm.ManualAction || i.ManualReason != events.ReasonWrittenUnverified || i.Evidence == nil || len(i.Evidence.Unverified) == 0 {
		t.Fatalf("state %s reason %q evidence %+v", i.State, i.ManualReason, i.Evidence)
	}
}

// A proven write not read back before its window closed (every worker was
// down) is read back once after it: visible and intact, it is confirmed,
// not handed to a human.
func TestProvenWriteReadBackAfterItsWindowIsConfirmed(t *testing.T) {
	w := newWorld(t, nil)
	res := w.execute("task:late", "hello")
	if res.State != fsm.Verifying || w.api.Effects() != 1 {
		t.Fatalf("after the write: %s, %d effects", res.State, w.api.Effects())
	}
	// The first readback fails (the page answers 500); then no worker
	// runs for six hours.
	w.api.FailPages(fakeapi.ReadError500)
	r := w.reconciler("w1", nil)
	if _, err := r.Step(context.Background(), "social_post", res.IntentID); err != nil {
		t.Fatal(err)
	}
	if h := w.history(res.IntentID); h[len(h)-1].Type != events.CheckDeferred {
		t.Fatalf("after a failed readback: %v", typesOf(h))
	}
	w.clock.Advance(6 * time.Hour)
	i, err := w.settleUpTo(r, "social_post", res.IntentID, 20)
	if err != nil {
		t.Fatal(err)
	}
	h := w.history(res.IntentID)
	if i.State != fsm.Confirmed || w.api.Writes() != 1 || count(h, events.WriteStarted) != 1 || count(h, events.ReadbackPassed) != 1 {
		t.Fatalf("state %s %q, writes %d, history %v", i.State, i.ManualReason, w.api.Writes(), typesOf(h))
	}
}

// 2 and 3. Routes that could retry without a dedup proof are refused at
// load, naming the route and the field.
func TestRouteThatMayRetryNeedsADedupProof(t *testing.T) {
	nowhere := testharness.At{Addr: "https://api.example.com", Secret: "t0ken-for-the-test-only"}
	ad := testharness.ExampleRoute(t, "social.yaml", nowhere).Adapter
	bk := testharness.ExampleRoute(t, "booking.yaml", nowhere).Adapter
	auto := adapter.DefaultPolicy()
	never := adapter.DefaultPolicy()
	never.Retry = events.PolicyNever
	for _, tc := range []struct {
		name string
		ad   adapter.Adapter
		pol  events.Policy
		ok   bool
	}{
		{"status query without a key", capsOverride{bk, func(c *adapter.Capabilities) { c.IdempotencyKey, c.KeyRetention = false, 0 }}, auto, false},
		{"key without a known retention", capsOverride{bk, func(c *adapter.Capabilities) { c.KeyRetention = 0 }}, auto, false},
		{"search without author mapping", capsOverride{ad, func(c *adapter.Capabilities) { c.SearchAuthoritative = false }}, auto, false},
		{"search without author mapping, never retried", capsOverride{ad, func(c *adapter.Capabilities) { c.SearchAuthoritative = false }}, never, true},
		{"authoritative search", ad, auto, true},
		{"key with retention", bk, auto, true},
	} {
		err := adapter.ValidateRoute(adapter.Route{Name: "r1", Adapter: tc.ad, Policy: tc.pol})
		if tc.ok != (err == nil) {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if err != nil && (!strings.Contains(err.Error(), "route r1") || !strings.Contains(err.Error(), "policy.retry")) {
			t.Errorf("%s: error does not name route and field: %v", tc.name, err)
		}
	}
}

// capsOverride changes what an adapter says it can do (a route file that
// maps less than the API offers).
type capsOverride struct {
	adapter.Adapter
	f func(*adapter.Capabilities)
}

func (c capsOverride) Capabilities() adapter.Capabilities {
	caps := c.Adapter.Capabilities()
	c.f(&caps)
	return caps
}

func (c capsOverride) Status(ctx context.Context, q adapter.StatusQuery) (adapter.StatusResult, error) {
	return c.Adapter.(adapter.StatusQuerier).Status(ctx, q)
}

// 4. A post equal to ours in payload and parent but by another author is a
// near match (a human decides), never a licence to write again: against a
// real server the account did not equal the token's user, and the retry
// made a second post.
func TestAuthorOnlyMismatchIsANearMatchNotARetry(t *testing.T) {
	w := newWorldWith(t, nil, fakeapi.WithListAllAuthors())
	w.api.Next(fakeapi.WrongAuthor("u_token_owner").Dropped())
	res := w.execute("task:1", "hello")
	i, err := w.settleUpTo(w.reconciler("w1", nil), "social_post", res.IntentID, 200)
	if err != nil {
		t.Fatal(err)
	}
	if w.api.Writes() != 1 || w.api.Effects() != 1 {
		t.Fatalf("writes %d effects %d: the write was retried over our own post", w.api.Writes(), w.api.Effects())
	}
	if i.State != fsm.ManualAction || i.ManualReason != events.ReasonNearMatch {
		t.Fatalf("state %s reason %q", i.State, i.ManualReason)
	}
	if len(i.Evidence.Candidates) != 1 || !slices.Equal(i.Evidence.Candidates[0].Mismatch, []string{"author"}) {
		t.Fatalf("evidence %+v", i.Evidence.Candidates)
	}
}

// 5. An identical post created before our first attempt is not ours,
// however alike: it is listed as pre-existing, and the write (which never
// reached the server) is made once.
func TestPreExistingLookAlikeIsNeverConfirmedAsOurs(t *testing.T) {
	w := newWorld(t, nil)
	old := w.api.Inject(fakeapi.Post{AuthorID: "acct_1", Body: "hello", CreatedAt: t0.Add(-20 * time.Second)})
	w.api.Next(fakeapi.ResetBeforeCommit())
	res := w.execute("task:1", "hello")
	if res.State != fsm.Unknown {
		t.Fatalf("state %s", res.State)
	}
	i := w.settle(w.reconciler("w1", nil), res.IntentID)
	if i.Receipt == nil || i.Receipt.ExternalID == old.ID || slices.Contains(i.ConfirmedExternalIDs, old.ID) {
		t.Fatalf("the look-alike %s was confirmed as ours: %+v", old.ID, i.Receipt)
	}
	if i.State != fsm.Confirmed || w.api.Effects() != 1 || w.api.Writes() != 2 {
		t.Fatalf("state %s effects %d writes %d", i.State, w.api.Effects(), w.api.Writes())
	}
	var listed bool
	for _, e := range w.history(res.IntentID) {
		if d, ok := e.Data.(*events.SearchWindowElapsedData); ok {
			for _, c := range d.Candidates {
				listed = listed || (c.ExternalID == old.ID && slices.Contains(c.Mismatch, "pre_existing"))
			}
		}
	}
	if !listed {
		t.Fatal("the look-alike is not listed as pre-existing in the evidence")
	}
}

// 6a. A worker that lacks an intent's route must leave the intent for one
// that has it: two processes with different route files, or a rolling
// deploy that adds a route.
func TestWorkerWithoutTheRouteLeavesItsIntentsForOneThatHasIt(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.CommitThenDrop())
	res := w.execute("task:1", "hello")

	// The old worker knows only another route.
	other := newWorld(t, nil)
	cfg := DefaultConfig()
	cfg.Worker, cfg.Now, cfg.MaxWait, cfg.AckWait = "old-deploy", w.clock.Now, 20*time.Millisecond, 2*time.Second
	cfg.Logger = quietLogger()
	otherRoute := other.route
	otherRoute.Name = "other_post"
	old, err := NewReconciler(w.store, cfg, otherRoute)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = old.Run(ctx); close(done) }()
	// Let it drain every message it is given.
	waitFor(t, 10*time.Second, func() bool { return consumersIdle(t, w) })
	cancel()
	<-done
	if st := w.intent(res.IntentID).State; st != fsm.Unknown {
		t.Fatalf("the worker without the route moved the intent to %s", st)
	}

	// The new deploy has the route: the intent is settled.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go func() { _ = w.reconciler("new-deploy", nil).Run(ctx2) }()
	waitFor(t, 20*time.Second, func() bool {
		w.clock.Advance(time.Second)
		return w.intent(res.IntentID).State == fsm.Confirmed
	})
	if w.api.Effects() != 1 || w.api.Writes() != 1 {
		t.Fatalf("effects %d writes %d", w.api.Effects(), w.api.Writes())
	}
}

// consumersIdle reports whether every consumer of the stream has delivered
// everything and has nothing waiting for an ack.
func consumersIdle(t *testing.T, w *world) bool {
	t.Helper()
	ctx := context.Background()
	lister := w.store.Stream().ListConsumers(ctx)
	n := 0
	for info := range lister.Info() {
		n++
		if info.NumPending > 0 || info.NumAckPending > 0 {
			return false
		}
	}
	return n > 0 && lister.Err() == nil
}

func waitFor(t *testing.T, bound time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached within the liveness bound %s", bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// noStatusID strips the external id from status answers (an API, or a
// route mapping, that says "completed" without naming the object).
type noStatusID struct{ capsOverride }

func (n noStatusID) Status(ctx context.Context, q adapter.StatusQuery) (adapter.StatusResult, error) {
	st, err := n.capsOverride.Status(ctx, q)
	st.ExternalID = ""
	return st, err
}

// 6b. "Completed" without an external id is a hand-off, never a loop.
func TestCompletedWithoutExternalIDIsHandedOffNotLooped(t *testing.T) {
	clock := testharness.NewManualClock(t0)
	bk := fakeapi.NewBookingAPI(t, fakeapi.WithBookingClock(clock.Now), fakeapi.WithBookingKeyRetention(24*time.Hour))
	ad := testharness.ExampleRoute(t, "booking.yaml", bk).Adapter
	w := &statusWorld{world: routeWorld(t, clock, "booking_change", noStatusID{capsOverride{ad, func(*adapter.Capabilities) {}}}), bk: bk}
	bk.Seed("B-1", 8, nil)
	bk.Next(fakeapi.CommitThenDrop())
	res := w.submit("trip-1:change-seat", change8)
	i, err := w.settleUpTo(w.reconciler("w1", nil), "booking_change", res.IntentID, 60)
	if err != nil {
		t.Fatalf("the step keeps failing: %v", err)
	}
	if i.State != fsm.ManualAction || i.ManualReason != events.ReasonNoExternalID {
		t.Fatalf("state %s reason %q", i.State, i.ManualReason)
	}
	if bk.Writes() != 1 || bk.Effects() != 1 {
		t.Fatalf("writes %d effects %d", bk.Writes(), bk.Effects())
	}
}

// executeReq runs Execute with a full request.
func (w *world) executeReq(req producer.Request) (*producer.Result, error) {
	w.t.Helper()
	if req.Route == "" {
		req.Route = "social_post"
	}
	if req.Account == "" {
		req.Account = "acct_1"
	}
	return w.prod.Execute(context.Background(), req)
}

// 7a. A recorded intent whose writer died is not started after it expired.
func TestExpiredRecordedIntentIsAbandonedNotStarted(t *testing.T) {
	w := newWorld(t, nil)
	seed := events.Recorded(w.history(w.execute("seed", "seed post").IntentID)[0])
	id := events.ScopedIntentID("default", "social_post", "acct_1", "task:orphan")
	d := *seed
	d.RequestID, d.IdempotencyKey = "task:orphan", events.IdempotencyKey(id)
	d.ExpiresAt = t0.Add(time.Minute)
	h := &ledger.History{Route: "social_post"}
	if err := w.store.AppendNext(context.Background(), h, &fsm.Intent{State: fsm.None, ID: id}, "dead", w.clock.Now(), "", &d); err != nil {
		t.Fatal(err)
	}
	writes := w.api.Writes()
	w.clock.Advance(10 * time.Minute) // past the grace and the expiry
	i := w.settle(w.reconciler("w1", nil), id)
	if w.api.Writes() != writes || len(i.Attempts) != 0 {
		t.Fatalf("an expired intent was written: writes %d → %d", writes, w.api.Writes())
	}
	if i.State != fsm.Abandoned || i.EffectPossible {
		t.Fatalf("state %s effect possible %v", i.State, i.EffectPossible)
	}
}

// 7b. An approval that comes after the expiry does not start the write.
func TestApprovalAfterExpiryDoesNotWrite(t *testing.T) {
	w := newWorld(t, func(p *events.Policy) { p.FirstWrite = events.PolicyApproval })
	res, err := w.executeReq(producer.Request{RequestID: "task:1", Payload: json.RawMessage(`{"body":"late"}`), ExpiresAt: t0.Add(time.Minute)})
	if err != nil || res.State != fsm.AwaitingApproval {
		t.Fatalf("%v %+v", err, res)
	}
	w.clock.Advance(2 * time.Minute)
	lh, li := loaded(t, w.prod, res.IntentID)
	if err := w.prod.Approve(context.Background(), lh, li, "alice", "ok"); err != nil {
		t.Fatal(err)
	}
	// The producer (a replay) and the reconciler both refuse to write.
	again, err := w.executeReq(producer.Request{RequestID: "task:1", Payload: json.RawMessage(`{"body":"late"}`), ExpiresAt: t0.Add(time.Minute)})
	if err != nil || again.State != fsm.Abandoned {
		t.Fatalf("replay after expiry: %v state %v", err, again)
	}
	i := w.settle(w.reconciler("w1", nil), res.IntentID)
	if w.api.Writes() != 0 || i.State != fsm.Abandoned {
		t.Fatalf("writes %d state %s", w.api.Writes(), i.State)
	}
}

// deadPort is a loopback address that refuses connections.
func deadPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr
}

// 7c. A retryable rejection is not retried after the expiry, and an
// expired intent is a normal result (state abandoned), never an error.
func TestRetryableRejectionIsNotRetriedAfterExpiry(t *testing.T) {
	clock := testharness.NewManualClock(t0)
	ad := testharness.ExampleRoute(t, "social.yaml", testharness.At{Addr: deadPort(t), Secret: "t0ken-for-the-test-only"},
		testharness.RouteTimeout(2*time.Second)).Adapter
	w := &statusWorld{world: routeWorld(t, clock, "social_post", ad)}
	req := producer.Request{Route: "social_post", Account: "acct_1", RequestID: "task:1", Payload: json.RawMessage(`{"body":"x"}`), ExpiresAt: t0.Add(time.Minute)}
	res, err := w.prod.Execute(context.Background(), req)
	if err != nil || res.State != fsm.Rejected || !res.Intent.LastRejection.Retryable {
		t.Fatalf("%v %+v", err, res)
	}
	clock.Advance(time.Hour) // 59 minutes past the expiry
	for k := 0; k < 5; k++ {
		res, err = w.prod.Execute(context.Background(), req)
		if err != nil {
			t.Fatalf("execute %d of an expired intent: %v", k, err)
		}
		if res.State != fsm.Abandoned {
			t.Fatalf("execute %d: state %s", k, res.State)
		}
	}
	i := w.settleRoute(w.reconciler("w1", nil), res.IntentID)
	h := w.events(res.IntentID)
	if count(h, events.WriteStarted) != 1 || i.State != fsm.Abandoned || i.EffectPossible {
		t.Fatalf("history %v state %s", typesOf(h), i.State)
	}
}

// 9. A payload whose event would exceed the decoder's limit is refused
// before anything is recorded or written.
func TestOversizedPayloadIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	w := newWorld(t, nil)
	body := strings.Repeat("a", events.MaxEventSize-2048)
	_, err := w.executeReq(producer.Request{RequestID: "task:big", Payload: json.RawMessage(`{"body":"` + body + `"}`)})
	if !errors.Is(err, producer.ErrPayloadTooLarge) {
		t.Fatalf("err %v", err)
	}
	if w.api.Writes() != 0 {
		t.Fatalf("%d writes went out", w.api.Writes())
	}
	if _, err := w.store.Load(context.Background(), "social_post", events.ScopedIntentID("default", "social_post", "acct_1", "task:big")); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("something was recorded: %v", err)
	}
	// Escaping can make a payload under the limit an event over it: the
	// log's JSON writes each '<' as \u003c (6 bytes).
	lt := strings.Repeat("<", (events.MaxEventSize-200)/6)
	_, err = w.executeReq(producer.Request{RequestID: "task:lt", Payload: json.RawMessage(`{"body":"` + lt + `"}`)})
	if !errors.Is(err, producer.ErrPayloadTooLarge) || w.api.Writes() != 0 {
		t.Fatalf("err %v writes %d", err, w.api.Writes())
	}
}

// 10. Proven rejections (429, never sent) are resent by settle itself, with
// backoff, inside the resend budget: the caller does not have to come back.
func TestRetryableRejectionsAreResentBySettle(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.Status(429), fakeapi.Status(429), fakeapi.Status(429))
	res := w.execute("task:1", "hello")
	if res.State != fsm.Rejected {
		t.Fatalf("state %s", res.State)
	}
	i := w.settle(w.reconciler("w1", nil), res.IntentID)
	if i.State != fsm.Confirmed || w.api.Effects() != 1 || w.api.Writes() != 4 {
		t.Fatalf("state %s effects %d writes %d", i.State, w.api.Effects(), w.api.Writes())
	}
	h := w.history(res.IntentID)
	var at []time.Time
	for _, e := range h {
		if e.Type.StartsWrite() {
			at = append(at, e.At)
		}
	}
	for k := 1; k < len(at); k++ {
		if !at[k].After(at[k-1]) {
			t.Fatalf("resend %d without backoff: %v", k, at)
		}
	}
	// A budget spent leaves the rejection standing, visible.
	w2 := newWorld(t, func(p *events.Policy) { p.ResendBudget = 2 })
	w2.api.Next(fakeapi.Status(429), fakeapi.Status(429), fakeapi.Status(429))
	r2 := w2.execute("task:2", "hello")
	i2 := w2.settle(w2.reconciler("w1", nil), r2.IntentID)
	if i2.State != fsm.Rejected || w2.api.Writes() != 3 || w2.api.Effects() != 0 {
		t.Fatalf("state %s writes %d effects %d", i2.State, w2.api.Writes(), w2.api.Effects())
	}
}

// 11a. A search answer without its items array is a read error, not "0
// candidates" (which, on the last check, would license a retry).
func TestSearchWithoutItemsIsNotZeroCandidates(t *testing.T) {
	w := newWorld(t, func(p *events.Policy) { p.ReadFailingAfter = events.Duration(10 * time.Minute) })
	faults := make([]fakeapi.ReadFault, 200)
	for k := range faults {
		faults[k] = fakeapi.ReadNoItems
	}
	w.api.FailLists(faults...)
	w.api.Next(fakeapi.ResetBeforeCommit())
	res := w.execute("task:1", "hello")
	i, err := w.settleUpTo(w.reconciler("w1", nil), "social_post", res.IntentID, 200)
	if err != nil {
		t.Fatal(err)
	}
	if w.api.Writes() != 1 || i.State != fsm.ManualAction || i.ManualReason != events.ReasonReadFailing {
		t.Fatalf("writes %d state %s reason %q", w.api.Writes(), i.State, i.ManualReason)
	}
}

// 11b. Reads that keep failing escalate after the policy's bound, with the
// last errors as evidence.
func TestReadsThatKeepFailingAreHandedOff(t *testing.T) {
	w := newWorld(t, nil)
	faults := make([]fakeapi.ReadFault, 400)
	for k := range faults {
		faults[k] = fakeapi.ReadError500
	}
	w.api.FailLists(faults...)
	w.api.Next(fakeapi.CommitThenDrop())
	res := w.execute("task:1", "hello")
	i, err := w.settleUpTo(w.reconciler("w1", nil), "social_post", res.IntentID, 300)
	if err != nil {
		t.Fatal(err)
	}
	if i.State != fsm.ManualAction || i.ManualReason != events.ReasonReadFailing || len(i.Evidence.Errors) == 0 {
		t.Fatalf("state %s reason %q evidence %+v", i.State, i.ManualReason, i.Evidence)
	}
	if !strings.Contains(i.Evidence.Errors[len(i.Evidence.Errors)-1], "search") {
		t.Fatalf("errors %v", i.Evidence.Errors)
	}
	var first, last time.Time
	for _, e := range w.history(res.IntentID) {
		if d, ok := e.Data.(*events.CheckDeferredData); ok && d.Reason == events.DeferReadFailed {
			if first.IsZero() {
				first = e.At
			}
			last = e.At
		}
	}
	if last.Sub(first) >= events.DefaultReadFailingAfter || w.api.Writes() != 1 {
		t.Fatalf("failed reads from %s to %s; writes %d", first, last, w.api.Writes())
	}
}

// 11c. A transient probe error is a failed read, not a failed url check.
func TestTransientProbeErrorIsRetriedNotAFailedCheck(t *testing.T) {
	w := newWorld(t, nil)
	w.api.FailPages(fakeapi.ReadError500)
	w.api.Next(fakeapi.CommitThenDrop())
	res := w.execute("task:1", "hello")
	i := w.settle(w.reconciler("w1", nil), res.IntentID)
	if i.State != fsm.Confirmed || w.api.Writes() != 1 {
		t.Fatalf("state %s reason %q writes %d", i.State, i.ManualReason, w.api.Writes())
	}
	checksOK(t, i.Receipt, readbackChecks...)
}
