package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
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

// statusWorld wires a status-query route (booking or payment) to a real
// embedded server, with one injected clock for fake, producer and workers.
type statusWorld struct {
	*world
	bk  *fakeapi.BookingAPI
	pay *fakeapi.PaymentAPI
}

func newBookingWorld(t *testing.T, opts ...fakeapi.BookingOption) *statusWorld {
	t.Helper()
	clock := testharness.NewManualClock(t0)
	opts = append([]fakeapi.BookingOption{fakeapi.WithBookingClock(clock.Now), fakeapi.WithBookingReflectionDelay(5 * time.Second)}, opts...)
	bk := fakeapi.NewBookingAPI(t, opts...)
	ad := testharness.ExampleRoute(t, "booking.yaml", bk, testharness.RouteTimeout(2*time.Second)).Adapter
	w := routeWorld(t, clock, "booking_update", ad)
	return &statusWorld{world: w, bk: bk}
}

func newPaymentWorld(t *testing.T) *statusWorld {
	t.Helper()
	clock := testharness.NewManualClock(t0)
	pay := fakeapi.NewPaymentAPI(t, fakeapi.WithPaymentClock(clock.Now))
	ad := testharness.ExampleRoute(t, "payment.yaml", pay, testharness.RouteTimeout(5*time.Second)).Adapter
	w := routeWorld(t, clock, "payment_create", ad)
	return &statusWorld{world: w, pay: pay}
}

func routeWorld(t *testing.T, clock *testharness.ManualClock, name string, ad adapter.Adapter, policy ...func(*events.Policy)) *world {
	t.Helper()
	n := testharness.StartNode(t)
	pol := adapter.DefaultPolicy()
	pol.ClockSkew = events.Duration(time.Second)
	pol.RetentionMargin = events.Duration(time.Hour)
	for _, f := range policy {
		f(&pol)
	}
	route := adapter.Route{Name: name, Adapter: ad, Policy: pol}
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
	return &world{t: t, node: n, clock: clock, route: route, store: store, prod: prod}
}

func (w *statusWorld) submit(requestID, payload string) *producer.Result {
	w.t.Helper()
	res, err := w.prod.Execute(context.Background(), producer.Request{Route: w.route.Name, Account: "acct_1", RequestID: requestID, Payload: json.RawMessage(payload)})
	if err != nil {
		w.t.Fatal(err)
	}
	return res
}

func (w *statusWorld) settleRoute(r *Reconciler, id string) *fsm.Intent {
	w.t.Helper()
	for k := 0; k < 300; k++ {
		res, err := r.Step(context.Background(), w.route.Name, id)
		if err != nil {
			w.t.Fatal(err)
		}
		if res.Done {
			return w.load(id)
		}
		w.clock.Advance(res.Wait)
	}
	w.t.Fatalf("%s did not settle", id)
	return nil
}

func (w *statusWorld) load(id string) *fsm.Intent {
	w.t.Helper()
	h, err := w.store.Load(context.Background(), w.route.Name, id)
	if err != nil {
		w.t.Fatal(err)
	}
	i, err := h.Fold()
	if err != nil {
		w.t.Fatal(err)
	}
	return i
}

func (w *statusWorld) events(id string) []events.Event {
	w.t.Helper()
	h, err := w.store.Load(context.Background(), w.route.Name, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return h.Events
}

const change8 = `{"booking_id":"B-1","expected_version":8,"change":{"seat":"12A"}}`

func TestBookingResponseLostConfirmedByStatusWithoutResend(t *testing.T) {
	w := newBookingWorld(t)
	w.bk.Seed("B-1", 8, map[string]any{"seat": "3C"})
	w.bk.Next(fakeapi.CommitThenDrop())
	res := w.submit("trip-1:change-seat", change8)
	if res.State != fsm.Unknown {
		t.Fatalf("state %s", res.State)
	}
	i := w.settleRoute(w.reconciler("w1", nil), res.IntentID)
	if i.State != fsm.Confirmed || w.bk.Writes() != 1 || w.bk.Effects() != 1 {
		t.Fatalf("state %s writes %d effects %d", i.State, w.bk.Writes(), w.bk.Effects())
	}
	checksOK(t, i.Receipt, "status", "payload", "version")
	h := w.events(res.IntentID)
	if count(h, events.WriteStarted) != 1 || count(h, events.CandidateFound) != 1 {
		t.Fatalf("history %v", typesOf(h))
	}
	if b, _ := w.bk.Booking("B-1"); b.Version != 9 {
		t.Fatalf("booking at v%d", b.Version)
	}
	// The receipt keeps the three ids apart.
	rc := i.Receipt
	if rc.RequestID != "trip-1:change-seat" || rc.IdempotencyKey != i.Recorded.IdempotencyKey || rc.AttemptID != events.AttemptID(i.ID, 1) {
		t.Fatalf("receipt ids %+v", rc)
	}
}

func TestBookingNeverArrivedRetriedOnceLateOriginalChangesNothing(t *testing.T) {
	w := newBookingWorld(t)
	w.bk.Seed("B-1", 8, map[string]any{"seat": "3C"})
	w.bk.Next(fakeapi.HoldForLateArrival().Dropped())
	res := w.submit("trip-1:change-seat", change8)
	if res.State != fsm.Unknown || w.bk.Effects() != 0 {
		t.Fatalf("state %s effects %d", res.State, w.bk.Effects())
	}
	i := w.settleRoute(w.reconciler("w1", nil), res.IntentID)
	h := w.events(res.IntentID)
	if i.State != fsm.Confirmed || w.bk.Effects() != 1 || count(h, events.WriteStarted) != 2 || count(h, events.StatusNotFound) != 1 {
		t.Fatalf("state %s effects %d history %v", i.State, w.bk.Effects(), typesOf(h))
	}
	// not_found only after the reflection delay.
	for _, e := range h {
		if e.Type == events.StatusNotFound && e.At.Before(i.Attempts[0].StartedAt.Add(5*time.Second)) {
			t.Fatalf("not_found at %s, before the reflection delay", e.At)
		}
	}
	if i.Attempts[0].ID == i.Attempts[1].ID {
		t.Fatal("attempt ids must differ")
	}
	// The late original arrives now, with the same key: no second change.
	t.Logf("history %v", typesOf(h))
	if n := w.bk.ReleaseHeld(); n != 1 {
		t.Fatalf("released %d", n)
	}
	if w.bk.Effects() != 1 || w.bk.EffectsForRequest("trip-1:change-seat") != 1 {
		t.Fatalf("late arrival applied again: effects %d", w.bk.Effects())
	}
	if b, _ := w.bk.Booking("B-1"); b.Version != 9 {
		t.Fatalf("booking at v%d, want 9", b.Version)
	}
}

func TestBookingProcessingPolledWithJitterThenCompleted(t *testing.T) {
	w := newBookingWorld(t, fakeapi.WithBookingProcessingFor(3*time.Minute))
	w.bk.Seed("B-1", 8, nil)
	res := w.submit("trip-1:change-seat", change8) // 202: accepted, processing
	if res.State != fsm.Unknown {
		t.Fatalf("state %s", res.State)
	}
	r := w.reconciler("w1", nil)
	r.cfg.PollBase = 10 * time.Second
	i := w.settleRoute(r, res.IntentID)
	if i.State != fsm.Confirmed || w.bk.Writes() != 1 || w.bk.Effects() != 1 {
		t.Fatalf("state %s writes %d effects %d", i.State, w.bk.Writes(), w.bk.Effects())
	}
	polls := 0
	for _, e := range w.events(res.IntentID) {
		if d, ok := e.Data.(*events.TargetProcessingData); ok {
			polls++
			wait := d.NextCheckAt.Sub(e.At)
			if wait <= 0 || wait > r.dec.PollCap(d.Poll) {
				t.Fatalf("poll %d waits %s, outside (0, %s]", d.Poll, wait, r.dec.PollCap(d.Poll))
			}
		}
	}
	if polls < 2 {
		t.Fatalf("%d polls", polls)
	}
}

func TestBookingNeverCompletesIsHandedOffAtTheDeadline(t *testing.T) {
	w := newBookingWorld(t)
	w.bk.Seed("B-1", 8, nil)
	w.bk.Next(fakeapi.NeverComplete())
	res := w.submit("trip-1:change-seat", change8)
	r := w.reconciler("w1", nil)
	r.cfg.ProcessingDeadline = 10 * time.Minute
	i := w.settleRoute(r, res.IntentID)
	if i.State != fsm.ManualAction || i.ManualReason != events.ReasonProcessingDeadline || w.bk.Writes() != 1 {
		t.Fatalf("state %s reason %s writes %d", i.State, i.ManualReason, w.bk.Writes())
	}
	if i.Evidence == nil || len(i.Evidence.Attempts) != 1 || len(i.Evidence.Queried) == 0 || i.ManualOwner == "" {
		t.Fatalf("handoff evidence %+v owner %q", i.Evidence, i.ManualOwner)
	}
}

func TestBookingKeyRetentionExpiredGoesToManualWithoutWrite(t *testing.T) {
	w := newBookingWorld(t)
	w.bk.Seed("B-1", 8, nil)
	w.bk.Next(fakeapi.ResetBeforeCommit())
	res := w.submit("trip-1:change-seat", change8)
	w.clock.Advance(25 * time.Hour) // nobody reconciled for a day
	i := w.settleRoute(w.reconciler("w1", nil), res.IntentID)
	if i.State != fsm.ManualAction || i.ManualReason != events.ReasonKeyRetentionExpired {
		t.Fatalf("state %s reason %s", i.State, i.ManualReason)
	}
	if w.bk.Writes() != 1 || w.bk.Effects() != 0 || count(w.events(res.IntentID), events.RetryClaimed) != 0 {
		t.Fatalf("writes %d effects %d", w.bk.Writes(), w.bk.Effects())
	}
}

func TestBookingDefiniteFailureWithAndWithoutPartialEffects(t *testing.T) {
	w := newBookingWorld(t)
	w.bk.Seed("B-1", 8, nil)
	w.bk.Seed("B-2", 8, nil)
	w.bk.Next(fakeapi.FailDefinite(422, nil).Dropped(), fakeapi.FailDefinite(500, []string{"seat_hold_placed"}).Dropped())
	clean := w.submit("trip-1:a", change8)
	partial := w.submit("trip-1:b", `{"booking_id":"B-2","expected_version":8,"change":{"seat":"1A"}}`)
	r := w.reconciler("w1", nil)
	a := w.settleRoute(r, clean.IntentID)
	if a.State != fsm.Failed || a.Failure == "" || len(a.PartialEffects) != 0 {
		t.Fatalf("clean failure: state %s failure %q partial %v", a.State, a.Failure, a.PartialEffects)
	}
	b := w.settleRoute(r, partial.IntentID)
	if b.State != fsm.ManualAction || b.ManualReason != events.ReasonPartialEffects || len(b.PartialEffects) != 1 || b.PartialEffects[0] != "seat_hold_placed" {
		t.Fatalf("partial failure: state %s reason %s partial %v", b.State, b.ManualReason, b.PartialEffects)
	}
	if w.bk.Writes() != 2 || w.bk.Effects() != 0 {
		t.Fatalf("writes %d effects %d", w.bk.Writes(), w.bk.Effects())
	}
}

func TestBookingStaleVersionNeverOverwrites(t *testing.T) {
	w := newBookingWorld(t)
	w.bk.Seed("B-1", 8, map[string]any{"seat": "3C"})
	w.bk.ChangeBy("B-1", "someone-else", map[string]any{"seat": "9F"}) // now v9
	res := w.submit("trip-1:change-seat", change8)
	h := w.events(res.IntentID)
	rej, ok := h[len(h)-1].Data.(*events.WriteRejectedData)
	if res.State != fsm.Rejected || !ok || rej.Code != "version_conflict" || rej.Retryable {
		t.Fatalf("state %s history %v", res.State, typesOf(h))
	}
	b, _ := w.bk.Booking("B-1")
	if b.Version != 9 || b.Data["seat"] != "9F" || w.bk.Effects() != 0 {
		t.Fatalf("booking %+v effects %d", b, w.bk.Effects())
	}
	if sr, err := w.reconciler("w1", nil).Step(context.Background(), w.route.Name, res.IntentID); err != nil || !sr.Done || len(sr.Appended) != 0 {
		t.Fatalf("reconciler acted on a definite rejection: %+v %v", sr, err)
	}
}

const charge = `{"amount":1000,"currency":"jpy","customer":"c_1","description":"order 7"}`

func TestPaymentSettleSemantics(t *testing.T) {
	w := newPaymentWorld(t)
	ctx := context.Background()
	first := w.submit("order-7:pay", charge)
	if w.pay.Charges() != 1 {
		t.Fatalf("charges %d", w.pay.Charges())
	}
	// Same request id, different body: refused before any call.
	_, err := w.prod.Execute(ctx, producer.Request{Route: w.route.Name, Account: "acct_1", RequestID: "order-7:pay",
		Payload: json.RawMessage(`{"amount":2000,"currency":"jpy","customer":"c_1","description":"order 7"}`)})
	if !errors.Is(err, producer.ErrPayloadMismatch) || w.pay.Charges() != 1 || w.pay.Writes() != 1 {
		t.Fatalf("mismatch: %v charges %d writes %d", err, w.pay.Charges(), w.pay.Writes())
	}
	// Repeated request: the stored result, no new charge.
	again := w.submit("order-7:pay", charge)
	if !again.Replayed || again.Intent.ExternalID != first.Intent.ExternalID || w.pay.Charges() != 1 || w.pay.Writes() != 1 {
		t.Fatalf("repeat: replayed %v charges %d", again.Replayed, w.pay.Charges())
	}
	// Two concurrent identical submits: exactly one charge.
	var wg sync.WaitGroup
	for k := 0; k < 2; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.prod.Execute(ctx, producer.Request{Route: w.route.Name, Account: "acct_1", RequestID: "order-8:pay", Payload: json.RawMessage(charge)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if w.pay.Charges() != 2 {
		t.Fatalf("two concurrent submits: %d charges in total, want 2", w.pay.Charges())
	}
	// At the API itself: the same key and body replays the stored response
	// byte for byte with the replay marker; another body gets 422.
	post := func(body string) (*http.Response, []byte) {
		req, _ := http.NewRequest("POST", w.pay.URL()+"/v1/charges", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+w.pay.Token())
		req.Header.Set("Idempotency-Key", first.Intent.Recorded.IdempotencyKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	r1, b1 := post(charge)
	r2, b2 := post(charge)
	if r1.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(b1, b2) || r1.StatusCode != r2.StatusCode {
		t.Fatalf("replay: %d %q vs %d %q", r1.StatusCode, b1, r2.StatusCode, b2)
	}
	if r3, _ := post(`{"amount":5,"currency":"jpy","customer":"c_1"}`); r3.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("other body: %d", r3.StatusCode)
	}
	if w.pay.Charges() != 2 {
		t.Fatalf("charges %d after replays", w.pay.Charges())
	}
}

func TestPaymentLostResponseConfirmedByLookup(t *testing.T) {
	w := newPaymentWorld(t)
	w.pay.Next(fakeapi.CommitThenDrop())
	res := w.submit("order-9:pay", charge)
	i := w.settleRoute(w.reconciler("w1", nil), res.IntentID)
	if i.State != fsm.Confirmed || w.pay.Charges() != 1 || w.pay.Writes() != 1 {
		t.Fatalf("state %s charges %d writes %d", i.State, w.pay.Charges(), w.pay.Writes())
	}
}

// retryNever is the only retry policy a route without a dedup proof may have.
func retryNever(p *events.Policy) { p.Retry = events.PolicyNever }

// blind hides every read capability: no status query, no search.
type blind struct{ adapter.Adapter }

func (blind) Capabilities() adapter.Capabilities { return adapter.Capabilities{} }

func TestNoQueryNoDedupHandsOffAndNeverWritesAgain(t *testing.T) {
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(clock.Now))
	ad := testharness.ExampleRoute(t, "social.yaml", api).Adapter
	w := &statusWorld{world: routeWorld(t, clock, "blind_post", blind{ad}, retryNever)}
	api.Next(fakeapi.ResetBeforeCommit())
	res := w.submit("t:1", `{"body":"x"}`)
	i := w.settleRoute(w.reconciler("w1", nil), res.IntentID)
	if i.State != fsm.ManualAction || i.ManualReason != events.ReasonNoQueryNoDedup || i.ManualOwner == "" {
		t.Fatalf("state %s reason %s owner %q", i.State, i.ManualReason, i.ManualOwner)
	}
	ev := i.Evidence
	if ev == nil || len(ev.Attempts) != 1 || ev.Attempts[0].StartedAt.IsZero() || len(ev.Unverified) == 0 {
		t.Fatalf("evidence %+v", ev)
	}
	// Workers restart, again and again, over a long (fake) while: nothing
	// writes after the handoff.
	for k := 0; k < 3; k++ {
		ctx, cancel := context.WithCancel(context.Background())
		r := w.reconciler("restart", nil)
		done := make(chan struct{})
		go func() { _ = r.Run(ctx); close(done) }()
		for j := 0; j < 20; j++ {
			clock.Advance(time.Hour)
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		<-done
	}
	if api.Writes() != 1 || w.load(res.IntentID).State != fsm.ManualAction {
		t.Fatalf("writes %d after restarts", api.Writes())
	}
}

func TestCancellationIsNotRollback(t *testing.T) {
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(clock.Now))
	ad := testharness.ExampleRoute(t, "social.yaml", api).Adapter
	w := &statusWorld{world: routeWorld(t, clock, "blind_post", blind{ad}, retryNever)}
	ctx := context.Background()
	// The write executed but its response was lost; nothing can prove it.
	api.Next(fakeapi.CommitThenDrop())
	res := w.submit("t:1", `{"body":"x"}`)
	i := w.settleRoute(w.reconciler("w1", nil), res.IntentID)
	if i.State != fsm.ManualAction {
		t.Fatalf("state %s", i.State)
	}
	// The caller cancels: recorded, and the record says an effect may exist.
	lh, li := loaded(t, w.prod, res.IntentID)
	if err := w.prod.Abandon(ctx, lh, li, "alice", "no longer needed"); err != nil {
		t.Fatal(err)
	}
	i = w.load(res.IntentID)
	if i.State != fsm.Abandoned || !i.EffectPossible || api.Effects() != 1 {
		t.Fatalf("abandoned: state %s effect possible %v effects %d", i.State, i.EffectPossible, api.Effects())
	}
	// Nothing is rolled back or written after the cancellation.
	if sr, err := w.reconciler("w2", nil).Step(ctx, "blind_post", res.IntentID); err != nil || len(sr.Appended) != 0 || api.Writes() != 1 {
		t.Fatalf("after abandon: %+v %v writes %d", sr, err, api.Writes())
	}
	// Later the write proves executed: it is reported as such on the log.
	post := api.Posts()[0]
	lh, li = loaded(t, w.prod, res.IntentID)
	if err := w.prod.ResolveConfirmed(ctx, lh, li, "bob", "found it on the timeline", post.ID, post.URL); err != nil {
		t.Fatal(err)
	}
	i = w.load(res.IntentID)
	h := w.events(res.IntentID)
	if i.State != fsm.Confirmed || i.Receipt.ExternalID != post.ID || h[len(h)-2].Type != events.Abandoned || h[len(h)-1].Type != events.OperatorConfirmed {
		t.Fatalf("late proof: state %s history %v", i.State, typesOf(h))
	}
	// An intent abandoned before any write carries no possible effect.
	w2 := newBookingWorld(t)
	pol := adapter.DefaultPolicy()
	pol.FirstWrite = events.PolicyApproval
	w2.route.Policy = pol
	p2, err := producer.New(w2.store, producer.Config{Tenant: "default", Actor: "writer", Now: w2.clock.Now, OutcomeTimeout: time.Minute}, w2.route)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := p2.Execute(ctx, producer.Request{Route: w2.route.Name, Account: "acct_1", RequestID: "t:2", Payload: json.RawMessage(change8)})
	if err != nil || r2.State != fsm.AwaitingApproval {
		t.Fatalf("approval route: %v %v", r2, err)
	}
	lh, li = loaded(t, p2, r2.IntentID)
	if err := p2.Abandon(ctx, lh, li, "alice", "changed plans"); err != nil {
		t.Fatal(err)
	}
	if got := w2.load(r2.IntentID); got.State != fsm.Abandoned || got.EffectPossible || w2.bk.Writes() != 0 {
		t.Fatalf("abandoned before writing: %s possible %v writes %d", got.State, got.EffectPossible, w2.bk.Writes())
	}
}
