package httproute_test

import (
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

// TestExampleRoutesOnTheirFakes: every
// example route file, loaded as written, driven end to end (a real
// nats-server, the producer, the reconciler) against its fake with the
// provider's documented habits switched on, and a lost response or
// request on top. Each ends confirmed by its own effect (or, where the
// route must not retry, never confirmed by another's), with one effect.
func TestExampleRoutesOnTheirFakes(t *testing.T) {

	// GitHub with an Actions token (GET /user is 403) on a private
	// repository (its pages answer 404 to a visitor), pages capped at 2,
	// the API clock 3 s behind, the first write refused for the rate
	// limit and the second one's response lost, the first read refused
	// for the rate limit too. Before: the identity read failed (403), so
	// nothing could be submitted; on a private repository every comment
	// went to a human (visibility not public); the rate-limit 403 was a
	// definite rejection.
	t.Run("github_comments.yaml", func(t *testing.T) {
		clock := testharness.NewManualClock(rt0)
		api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now),
			fakeapi.WithGitHubInstallationToken("github-actions[bot]", 41898282), fakeapi.WithGitHubPrivateRepo(),
			fakeapi.WithGitHubPageCap(2), fakeapi.WithGitHubClockOffset(-3*time.Second))
		w := newE2E(t, "github_comments.yaml", githubEnv(api), clock)
		for i := 0; i < 5; i++ {
			api.Inject(fakeapi.GitHubComment{Issue: 7, Body: "by hand " + itoa(i), UserID: 77, UserLogin: "someone"})
		}
		clock.Advance(time.Second)
		api.Next(fakeapi.RateLimited(30*time.Second), fakeapi.CommitThenDrop())
		api.LimitReads(1, 20*time.Second)
		res := w.execute("deploy-1", "41898282", "7", `{"body":"Build #42 passed"}`)
		if res.State != fsm.Rejected {
			t.Fatalf("a rate-limited write: %s", res.State)
		}
		i := w.settle(res.IntentID)
		w.confirmedAs(i, itoa(int(api.Comments()[5].ID)))
		if api.Effects() != 1 || api.Writes() != 2 {
			t.Fatalf("%d effects, %d writes; history %v", api.Effects(), api.Writes(), w.types(i))
		}
		if got := countTypes(w.types(i), events.WriteRejected); got != 1 {
			t.Fatalf("%d rejections; history %v", got, w.types(i))
		}
		// A malformed parent is refused before anything is recorded.
		if _, err := w.prod.Execute(bg, producerRequest(w, "deploy-2", "41898282", "seven", `{"body":"x"}`)); err == nil ||
			!strings.Contains(err.Error(), "parent_external_id") || api.Writes() != 2 {
			t.Fatalf("a malformed parent: %v, %d writes", err, api.Writes())
		}
	})

	// Slack rewriting links and entities, with the history tier of a
	// non-Marketplace app (15 a page, a call a minute) over a busy
	// channel, the API clock 2 s ahead, the first post rate-limited and
	// the second one's response lost. Before: a text with & was refused
	// at submission; one with a URL read back as "<http://…>" and never
	// matched the intent (a lost response was posted again); and the
	// second history page was refused (429).
	t.Run("slack_message.yaml", func(t *testing.T) {
		clock := testharness.NewManualClock(rt0)
		api := fakeapi.NewSlackAPI(t, fakeapi.WithSlackToken(secretToken), fakeapi.WithSlackClock(clock.Now),
			fakeapi.WithSlackFormatting(), fakeapi.WithSlackNonMarketplaceTier(), fakeapi.WithSlackClockOffset(2*time.Second))
		w := newE2E(t, "slack_message.yaml", slackEnv(api), clock)
		api.Next(fakeapi.RateLimited(5*time.Second), fakeapi.CommitThenDrop())
		res := w.execute("rel-1", api.UserID(), "", `{"text":"Release 2.0: see https://example.com/notes?a=1&b=2 & www.example.org."}`)
		if res.State != fsm.Rejected {
			t.Fatalf("a rate-limited post: %s", res.State)
		}
		// The channel is busy after the post: the listing needs two pages.
		clock.Advance(time.Second)
		for k := 0; k < 20; k++ {
			api.Inject(fakeapi.SlackMessage{Channel: "C0SETTLE", User: "U0HUMAN", Text: "chat " + itoa(k)})
		}
		i := w.settle(res.IntentID)
		var ours fakeapi.SlackMessage
		for _, m := range api.Messages() {
			if !m.Injected {
				ours = m
			}
		}
		slackSettled(t, w, i, ours.TS)
		if api.Effects() != 1 || !strings.Contains(ours.Text, "<https://example.com/notes?a=1&amp;b=2>") || api.RateLimitedCalls() == 0 {
			t.Fatalf("%d effects, text %q, %d history calls refused", api.Effects(), ours.Text, api.RateLimitedCalls())
		}
	})

	// Stripe with automatic payment methods on by default (confirming
	// needs a return_url unless off session or no redirects), the API
	// clock 10 s behind, search 3 minutes behind, the first response
	// lost; then the route file is edited while the payment is unknown.
	// The retry sends the request its first attempt recorded (not one
	// rendered from the edited route), so Stripe replays the first
	// answer under the same key: one payment, confirmed. Before: the
	// confirmation was refused (no return_url), and the edited retry got
	// a 400 idempotency_error that was recorded as a definite rejection
	// although the first attempt had paid.
	t.Run("stripe_payment_intent.yaml", func(t *testing.T) {
		clock := testharness.NewManualClock(rt0)
		api := fakeapi.NewStripeAPI(t, fakeapi.WithStripeToken(secretToken), fakeapi.WithStripeClock(clock.Now),
			fakeapi.WithStripeSearchLag(3*time.Minute), fakeapi.WithStripeClockOffset(-10*time.Second))
		w := newE2E(t, "stripe_payment_intent.yaml", stripeEnv(api), clock)
		api.Next(fakeapi.CommitThenDrop())
		res := w.execute("order-1", api.AccountID(), "", `{"amount":4200,"currency":"jpy","customer":"cus_K1","payment_method":"pm_card_visa"}`)
		if res.State != fsm.Unknown || api.Effects() != 1 {
			t.Fatalf("after the write: %s, %d effects", res.State, api.Effects())
		}
		w.reroute(mutate(t, readExample(t, "stripe_payment_intent.yaml"), `confirm: "true"`, `confirm: "true"`+"\n        statement_descriptor_suffix: SETTLE"), stripeEnv(api))
		i := w.settle(res.IntentID)
		if i.State != fsm.Confirmed || api.Effects() != 1 || api.Replays() != 1 {
			t.Fatalf("%s, %d effects, %d replays (want confirmed, 1, 1: the retry resent the recorded request); history %v", i.State, api.Effects(), api.Replays(), w.types(i))
		}
		if countTypes(w.types(i), events.WriteStarted) != 2 {
			t.Fatalf("want two attempts (the lost one and the recorded retry); history %v", w.types(i))
		}
		w.confirmedAs(i, api.PaymentIntents()[0].ID)
		for _, v := range api.Versions() {
			if v != "2024-06-20" {
				t.Fatalf("a request without the pinned version: %v", api.Versions())
			}
		}
		if n := countTypes(w.types(i), events.WriteRejected); n != 0 {
			t.Fatalf("the key-reused answer was recorded as a rejection; history %v", w.types(i))
		}
	})

	// Booking: accounts A and B submit the same change under the same
	// request id; A's is applied, B's request is lost. B's status lookup
	// must not find A's change: before, it did (by the bare request id),
	// its payload hashed like B's, and B was confirmed by A's change while
	// B's own write never happened.
	t.Run("booking.yaml", func(t *testing.T) {
		clock := testharness.NewManualClock(rt0)
		api := fakeapi.NewBookingAPI(t, fakeapi.WithBookingToken(secretToken), fakeapi.WithBookingClock(clock.Now), fakeapi.WithBookingReflectionDelay(5*time.Second))
		api.Seed("B-1", 1, map[string]any{"seat": "12A"})
		w := newE2E(t, "booking.yaml", exampleEnv(api.URL()), clock)
		change := `{"booking_id":"B-1","expected_version":1,"change":{"seat":"14C"}}`
		a := w.execute("shared-req", "acct_a", "", change)
		ia := w.settle(a.IntentID)
		w.confirmedAs(ia, "B-1@v2")
		api.Next(fakeapi.ResetBeforeCommit())
		b := w.execute("shared-req", "acct_b", "", change)
		ib := w.settle(b.IntentID)
		if ib.State == fsm.Confirmed || len(ib.ConfirmedExternalIDs) != 0 {
			t.Fatalf("B confirmed by A's change: %s %+v; history %v", ib.State, ib.Receipt, w.types(ib))
		}
		if api.Effects() != 1 || countTypes(w.types(ib), events.StatusNotFound) == 0 {
			t.Fatalf("%d effects; history %v", api.Effects(), w.types(ib))
		}
	})

	// The payment and social examples: a lost response, settled by their
	// lookups, one effect.
	t.Run("payment.yaml", func(t *testing.T) {
		clock := testharness.NewManualClock(rt0)
		api := fakeapi.NewPaymentAPI(t, fakeapi.WithPaymentToken(secretToken), fakeapi.WithPaymentClock(clock.Now))
		w := newE2E(t, "payment.yaml", exampleEnv(api.URL()), clock)
		api.Next(fakeapi.CommitThenDrop())
		res := w.execute("ch-1", "acct", "", `{"amount":1200,"currency":"jpy","customer":"c_1"}`)
		i := w.settle(res.IntentID)
		if i.State != fsm.Confirmed || api.Charges() != 1 {
			t.Fatalf("%s, %d charges; history %v", i.State, api.Charges(), w.types(i))
		}
	})
	t.Run("social.yaml", func(t *testing.T) {
		clock := testharness.NewManualClock(rt0)
		api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialToken(secretToken), fakeapi.WithSocialClock(clock.Now))
		w := newE2E(t, "social.yaml", exampleEnv(api.URL()), clock)
		api.Next(fakeapi.CommitThenDrop())
		res := w.execute("post-1", "acct_1", "", `{"body":"hello"}`)
		i := w.settle(res.IntentID)
		if i.State != fsm.Confirmed || api.Effects() != 1 {
			t.Fatalf("%s, %d effects; history %v", i.State, api.Effects(), w.types(i))
		}
	})
}
