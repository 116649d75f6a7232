package httproute_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/consumers/reconcile"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// The example route files for real APIs driven end to end: a real
// embedded nats-server, the producer (Execute) and a reconciler (Step),
// the file loaded as written, and the provider's fake over real HTTP, all
// on one manual clock. Each file meets a lost response (the API made the
// effect, the answer never came), a lost request (it never arrived) and a
// look-alike (the same payload by the same account in the same window,
// made by another intent or by hand). The fakes count effects.

type e2e struct {
	t     *testing.T
	node  *testharness.Node
	clock *testharness.ManualClock
	route adapter.Route
	store *ledger.Store
	prod  *producer.Producer
	rec   *reconcile.Reconciler
}

func newE2E(t *testing.T, file string, env map[string]string, clock *testharness.ManualClock) *e2e {
	t.Helper()
	return newE2EData(t, readExample(t, file), env, clock)
}

// newE2EData is newE2E for a route file's data. The route waits (a rate
// limit inside a listing) on the manual clock.
func newE2EData(t *testing.T, data []byte, env map[string]string, clock *testharness.ManualClock) *e2e {
	t.Helper()
	cfgs, err := httproute.Parse(data, envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	cfgs[0].Now = clock.Now
	cfgs[0].Sleep = func(_ context.Context, d time.Duration) error { clock.Advance(d); return nil }
	route, err := httproute.Build(cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	n := testharness.StartNode(t)
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
	return &e2e{t: t, node: n, clock: clock, route: route, store: store, prod: prod, rec: newReconciler(t, store, clock, route)}
}

func newReconciler(t *testing.T, store *ledger.Store, clock *testharness.ManualClock, route adapter.Route) *reconcile.Reconciler {
	t.Helper()
	rc := reconcile.DefaultConfig()
	rc.Worker, rc.Now = "worker-1", clock.Now
	rc.Recheck, rc.MaxRecheck = 30*time.Second, 4*time.Minute
	rc.Rand = rand.New(rand.NewPCG(14, 14))
	rc.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	rec, err := reconcile.NewReconciler(store, rc, route)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// reroute makes every later step with the route as data now declares it
// (an operator edited the route file while an intent was unknown).
func (w *e2e) reroute(data []byte, env map[string]string) {
	w.t.Helper()
	cfgs, err := httproute.Parse(data, envOf(env))
	if err != nil {
		w.t.Fatal(err)
	}
	cfgs[0].Now = w.clock.Now
	route, err := httproute.Build(cfgs[0])
	if err != nil {
		w.t.Fatal(err)
	}
	w.route, w.rec = route, newReconciler(w.t, w.store, w.clock, route)
}

func (w *e2e) execute(requestID, account, parent, payload string) *producer.Result {
	w.t.Helper()
	res, err := w.prod.Execute(context.Background(), producerRequest(w, requestID, account, parent, payload))
	if err != nil {
		w.t.Fatalf("execute %s: %v", requestID, err)
	}
	return res
}

func producerRequest(w *e2e, requestID, account, parent, payload string) producer.Request {
	return producer.Request{Route: w.route.Name, Account: account, RequestID: requestID, ParentExternalID: parent, Payload: json.RawMessage(payload)}
}

// settle steps the intent, moving the clock over every wait, until no
// reconciler has anything more to do.
func (w *e2e) settle(intentID string) *fsm.Intent {
	w.t.Helper()
	for k := 0; k < 300; k++ {
		res, err := w.rec.Step(context.Background(), w.route.Name, intentID)
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
	w.t.Fatalf("intent %s did not settle in 300 steps", intentID)
	return nil
}

func (w *e2e) intent(intentID string) *fsm.Intent {
	w.t.Helper()
	h, err := w.store.Load(context.Background(), w.route.Name, intentID)
	if err != nil {
		w.t.Fatal(err)
	}
	i, err := fsm.Fold(h.Events)
	if err != nil {
		w.t.Fatal(err)
	}
	return i
}

func (w *e2e) types(i *fsm.Intent) []events.Type {
	h, _ := w.store.Load(context.Background(), w.route.Name, i.ID)
	var out []events.Type
	for _, e := range h.Events {
		out = append(out, e.Type)
	}
	return out
}

// confirmedAs asserts the intent is confirmed with the external id want,
// with the marker check among its receipt's checks.
func (w *e2e) confirmedAs(i *fsm.Intent, want string) {
	w.t.Helper()
	if i.State != fsm.Confirmed || i.Receipt == nil || i.Receipt.ExternalID != want {
		w.t.Fatalf("intent %s: state %s, receipt %+v, want confirmed as %s; history %v; evidence %+v", i.ID, i.State, i.Receipt, want, w.types(i), i.Evidence)
	}
	for _, c := range i.Receipt.Checks {
		if !c.OK {
			w.t.Fatalf("receipt with a failed check: %+v", i.Receipt.Checks)
		}
	}
}

// countTypes counts ts's types equal to t; counting WriteStarted counts
// every write start, a new intent's IntentStarted included.
func countTypes(ts []events.Type, t events.Type) int {
	n := 0
	for _, x := range ts {
		if x == t || (t == events.WriteStarted && x.StartsWrite()) {
			n++
		}
	}
	return n
}

// TestGitHubFileFaults: lost response, lost request and look-alikes of
// the GitHub issue comments route, end to end.
func TestGitHubFileFaults(t *testing.T) {
	setup := func(t *testing.T) (*e2e, *fakeapi.GitHubAPI) {
		clock := testharness.NewManualClock(rt0)
		api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now))
		return newE2E(t, "github_comments.yaml", githubEnv(api), clock), api
	}
	body := `{"body":"Build #42 passed"}`

	t.Run("lost_response", func(t *testing.T) {
		w, api := setup(t)
		api.Next(fakeapi.CommitThenDrop())
		res := w.execute("deploy-1", api.UserID(), "7", body)
		if res.State != fsm.Unknown || api.Effects() != 1 {
			t.Fatalf("after the write: %s, %d effects", res.State, api.Effects())
		}
		i := w.settle(res.IntentID)
		w.confirmedAs(i, itoa(int(api.Comments()[0].ID)))
		if api.Effects() != 1 || api.Writes() != 1 {
			t.Fatalf("%d effects, %d writes: a lost response was written again", api.Effects(), api.Writes())
		}
	})

	t.Run("lost_request", func(t *testing.T) {
		w, api := setup(t)
		api.Next(fakeapi.ResetBeforeCommit())
		res := w.execute("deploy-2", api.UserID(), "7", body)
		if res.State != fsm.Unknown || api.Effects() != 0 {
			t.Fatalf("after the write: %s, %d effects", res.State, api.Effects())
		}
		i := w.settle(res.IntentID)
		w.confirmedAs(i, itoa(int(api.Comments()[0].ID)))
		ts := w.types(i)
		if api.Effects() != 1 || countTypes(ts, events.SearchWindowElapsed) != 1 || countTypes(ts, events.WriteStarted) != 2 {
			t.Fatalf("%d effects; history %v", api.Effects(), ts)
		}
	})

	t.Run("look_alike_of_another_intent", func(t *testing.T) {
		// Intent A posts the text; a second later intent B posts the same
		// text under the same issue, and B's request is lost. A's comment
		// matches B on author, payload and parent, but its marker names A:
		// B retries and is confirmed by its own comment.
		w, api := setup(t)
		a := w.execute("review-a", api.UserID(), "9", body)
		w.confirmedAs(w.settle(a.IntentID), "1001")
		w.clock.Advance(time.Second)
		api.Next(fakeapi.ResetBeforeCommit())
		b := w.execute("review-b", api.UserID(), "9", body)
		ib := w.settle(b.IntentID)
		if api.Effects() != 2 || api.EffectsContaining(b.IntentID) != 1 || api.EffectsContaining(a.IntentID) != 1 {
			t.Fatalf("effects %d (A %d, B %d)", api.Effects(), api.EffectsContaining(a.IntentID), api.EffectsContaining(b.IntentID))
		}
		w.confirmedAs(ib, "1002")
		if ia := w.intent(a.IntentID); ia.Receipt.ExternalID != "1001" {
			t.Fatalf("A's receipt moved: %+v", ia.Receipt)
		}
	})

	t.Run("look_alike_by_hand", func(t *testing.T) {
		// Someone posts the same text by hand (same token, no marker) a
		// second before settle's request is lost: it is never confirmed as
		// ours, and nothing is posted over it; a human decides.
		w, api := setup(t)
		api.Inject(fakeapi.GitHubComment{Issue: 7, Body: "Build #42 passed"})
		w.clock.Advance(time.Second)
		api.Next(fakeapi.ResetBeforeCommit())
		res := w.execute("deploy-3", api.UserID(), "7", body)
		i := w.settle(res.IntentID)
		if i.State != fsm.ManualAction || i.ManualReason != events.ReasonNearMatch || api.Effects() != 0 {
			t.Fatalf("state %s (%s), %d effects; history %v", i.State, i.ManualReason, api.Effects(), w.types(i))
		}
		if len(i.ConfirmedExternalIDs) != 0 {
			t.Fatalf("confirmed as %v", i.ConfirmedExternalIDs)
		}
	})

	t.Run("identity_mismatch", func(t *testing.T) {
		// The intent's account is not the token's user: refused before
		// anything is recorded or written.
		w, api := setup(t)
		_, err := w.prod.Execute(context.Background(), producer.Request{Route: w.route.Name, Account: "31337",
			RequestID: "deploy-4", ParentExternalID: "7", Payload: json.RawMessage(body)})
		if !errors.Is(err, producer.ErrInvalidRequest) || !strings.Contains(err.Error(), "account") {
			t.Fatalf("execute: %v", err)
		}
		if api.Writes() != 0 {
			t.Fatalf("%d writes reached GitHub", api.Writes())
		}
		st, err := w.node.JS.Stream(context.Background(), ledger.DefaultStoreConfig().Stream)
		if err != nil {
			t.Fatal(err)
		}
		if info, err := st.Info(context.Background()); err != nil || info.State.Msgs != 0 {
			t.Fatalf("the log holds %d events (%v): something was recorded", info.State.Msgs, err)
		}
	})
}

// slackSettled asserts how a Slack intent ended: confirmed as want, or —
// while the reconciler requires checks the route does not declare (a
// Slack message has no public page: readback.checks is author, payload,
// parent) — handed to a human with want as the object read back and only
// undeclared checks failing. Never another message, never a retry.
func slackSettled(t *testing.T, w *e2e, i *fsm.Intent, want string) {
	t.Helper()
	// The route declares no url or visibility check (a Slack message has
	// no public page): the reconciler requires only what it declares.
	if i.State != fsm.Confirmed {
		t.Fatalf("slack intent ended %s (%s): %v", i.State, i.ManualReason, w.types(i))
	}
	w.confirmedAs(i, want)
	declared := w.route.Adapter.(adapter.CheckDeclarer).ReadbackChecks()
	for _, c := range i.Receipt.Checks {
		if (c.Name == "url" || c.Name == "visibility") && !slices.Contains(declared, c.Name) {
			t.Fatalf("undeclared check %s in the receipt: %+v", c.Name, i.Receipt.Checks)
		}
	}
}

// TestSlackFileFaults: the same faults on the Slack route.
func TestSlackFileFaults(t *testing.T) {
	setup := func(t *testing.T) (*e2e, *fakeapi.SlackAPI) {
		clock := testharness.NewManualClock(rt0)
		api := fakeapi.NewSlackAPI(t, fakeapi.WithSlackToken(secretToken), fakeapi.WithSlackClock(clock.Now))
		return newE2E(t, "slack_message.yaml", slackEnv(api), clock), api
	}
	text := `{"text":"Release 2.0 is live"}`

	t.Run("lost_response", func(t *testing.T) {
		w, api := setup(t)
		api.Next(fakeapi.CommitThenDrop())
		res := w.execute("rel-1", api.UserID(), "", text)
		if res.State != fsm.Unknown || api.Effects() != 1 {
			t.Fatalf("after the write: %s, %d effects", res.State, api.Effects())
		}
		i := w.settle(res.IntentID)
		slackSettled(t, w, i, api.Messages()[0].TS)
		if api.Effects() != 1 || api.Writes() != 1 {
			t.Fatalf("%d effects, %d writes", api.Effects(), api.Writes())
		}
	})

	t.Run("lost_request", func(t *testing.T) {
		w, api := setup(t)
		api.Next(fakeapi.ResetBeforeCommit())
		res := w.execute("rel-2", api.UserID(), "", text)
		if res.State != fsm.Unknown || api.Effects() != 0 {
			t.Fatalf("after the write: %s, %d effects", res.State, api.Effects())
		}
		i := w.settle(res.IntentID)
		ts := w.types(i)
		if api.Effects() != 1 || countTypes(ts, events.SearchWindowElapsed) != 1 || countTypes(ts, events.WriteStarted) != 2 {
			t.Fatalf("%d effects; history %v", api.Effects(), ts)
		}
		slackSettled(t, w, i, api.Messages()[0].TS)
	})

	t.Run("look_alike_of_another_intent", func(t *testing.T) {
		// A message with the same text by the same bot, whose metadata
		// names another intent, posted a second before our lost request.
		w, api := setup(t)
		other := events.ScopedIntentID("default", "slack_message", "acct_1", "rel-0")
		api.Inject(fakeapi.SlackMessage{Channel: "C0SETTLE", Text: "Release 2.0 is live",
			Metadata: json.RawMessage(`{"event_type":"settle_intent","event_payload":{"settle_intent":"` + other + `"}}`)})
		w.clock.Advance(time.Second)
		api.Next(fakeapi.ResetBeforeCommit())
		res := w.execute("rel-3", api.UserID(), "", text)
		i := w.settle(res.IntentID)
		if api.Effects() != 1 || api.EffectsWithMetadata(res.IntentID) != 1 {
			t.Fatalf("%d effects (%d ours)", api.Effects(), api.EffectsWithMetadata(res.IntentID))
		}
		slackSettled(t, w, i, api.Messages()[1].TS)
	})
}

// TestStripeFileFaults: the same faults on the Stripe route (a status
// query by metadata, an idempotency key): a retry is Stripe's replay.
func TestStripeFileFaults(t *testing.T) {
	setup := func(t *testing.T) (*e2e, *fakeapi.StripeAPI) {
		clock := testharness.NewManualClock(rt0)
		api := fakeapi.NewStripeAPI(t, fakeapi.WithStripeToken(secretToken), fakeapi.WithStripeClock(clock.Now),
			fakeapi.WithStripeSearchLag(20*time.Second))
		return newE2E(t, "stripe_payment_intent.yaml", stripeEnv(api), clock), api
	}
	pay := `{"amount":4200,"currency":"jpy","customer":"cus_K1","payment_method":"pm_card_visa"}`

	t.Run("lost_response", func(t *testing.T) {
		w, api := setup(t)
		api.Next(fakeapi.CommitThenDrop())
		res := w.execute("order-1", api.AccountID(), "", pay)
		if res.State != fsm.Unknown || api.Effects() != 1 {
			t.Fatalf("after the write: %s, %d effects", res.State, api.Effects())
		}
		i := w.settle(res.IntentID)
		w.confirmedAs(i, api.PaymentIntents()[0].ID)
		if api.Effects() != 1 || api.Writes() != 1 {
			t.Fatalf("%d effects, %d writes", api.Effects(), api.Writes())
		}
	})

	t.Run("lost_request", func(t *testing.T) {
		w, api := setup(t)
		api.Next(fakeapi.ResetBeforeCommit())
		res := w.execute("order-2", api.AccountID(), "", pay)
		i := w.settle(res.IntentID)
		w.confirmedAs(i, api.PaymentIntents()[0].ID)
		ts := w.types(i)
		key := i.Recorded.IdempotencyKey
		if api.Effects() != 1 || api.EffectsForKey(key) != 1 || countTypes(ts, events.StatusNotFound) != 1 || countTypes(ts, events.WriteStarted) != 2 {
			t.Fatalf("%d effects (%d with the key); history %v", api.Effects(), api.EffectsForKey(key), ts)
		}
	})

	t.Run("lost_response_slow_search", func(t *testing.T) {
		// Search lags past the reflection delay (3 minutes, as in an
		// outage): "not found" licenses a retry only because the key is
		// honoured; Stripe replays the first result, nothing is paid twice,
		// and the payment is verified once search catches up.
		clock := testharness.NewManualClock(rt0)
		api := fakeapi.NewStripeAPI(t, fakeapi.WithStripeToken(secretToken), fakeapi.WithStripeClock(clock.Now),
			fakeapi.WithStripeSearchLag(3*time.Minute))
		w := newE2E(t, "stripe_payment_intent.yaml", stripeEnv(api), clock)
		api.Next(fakeapi.CommitThenDrop())
		res := w.execute("order-3", api.AccountID(), "", pay)
		i := w.settle(res.IntentID)
		w.confirmedAs(i, api.PaymentIntents()[0].ID)
		if api.Effects() != 1 || api.Replays() != 1 {
			t.Fatalf("%d effects, %d replays; history %v", api.Effects(), api.Replays(), w.types(i))
		}
	})

	t.Run("look_alike", func(t *testing.T) {
		// The same customer paid the same amount a second earlier (another
		// intent): the lookup by our key does not see it, our lost request
		// is retried with our key and confirmed by our own payment.
		w, api := setup(t)
		a := w.execute("order-a", api.AccountID(), "", pay)
		w.clock.Advance(time.Second)
		api.Next(fakeapi.ResetBeforeCommit())
		b := w.execute("order-b", api.AccountID(), "", pay)
		ib := w.settle(b.IntentID)
		pis := api.PaymentIntents()
		if api.Effects() != 2 || len(pis) != 2 || api.EffectsForKey(ib.Recorded.IdempotencyKey) != 1 {
			t.Fatalf("%d effects: %+v", api.Effects(), pis)
		}
		w.confirmedAs(ib, pis[1].ID)
		if ia := w.settle(a.IntentID); ia.Receipt.ExternalID != pis[0].ID {
			t.Fatalf("A: %+v", ia.Receipt)
		}
	})
}
