package httproute_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	crdb "github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// The example routes for real APIs (github_comments.yaml,
// slack_message.yaml, stripe_payment_intent.yaml) driven against fakes
// that follow each provider's documentation (testharness).

var rt0 = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

func githubEnv(api *fakeapi.GitHubAPI) map[string]string {
	return map[string]string{"GITHUB_API_URL": api.URL(), "GITHUB_REPOSITORY": "octo-org/hello-world", "GITHUB_TOKEN": secretToken}
}

func slackEnv(api *fakeapi.SlackAPI) map[string]string {
	return map[string]string{"SLACK_API_URL": api.URL(), "SLACK_BOT_TOKEN": secretToken}
}

func stripeEnv(api *fakeapi.StripeAPI) map[string]string {
	return map[string]string{"STRIPE_API_URL": api.URL(), "STRIPE_SECRET_KEY": secretToken}
}

// buildFile parses and builds the only route of an example file, with a
// clock.
func buildFile(t testing.TB, name string, env map[string]string, now func() time.Time, edits ...string) *httproute.Adapter {
	t.Helper()
	return buildWith(t, name, env, func(c *httproute.RouteConfig) { c.Now = now }, edits...)
}

// buildWith is buildFile with the config changed by mod (Go-only fields:
// Now, Sleep, Client) before it is built.
func buildWith(t testing.TB, name string, env map[string]string, mod func(*httproute.RouteConfig), edits ...string) *httproute.Adapter {
	t.Helper()
	data := readExample(t, name)
	if len(edits) > 0 {
		data = mutate(t, data, edits...)
	}
	cfgs, err := httproute.Parse(data, envOf(env))
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	mod(&cfgs[0])
	r, err := httproute.Build(cfgs[0])
	if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	return r.Adapter.(*httproute.Adapter)
}

func normalized(t testing.TB, a adapter.PayloadNormalizer, raw string) json.RawMessage {
	t.Helper()
	p, err := a.NormalizePayload(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("normalize %s: %v", raw, err)
	}
	return p
}

func TestRealAPIExamplesAreValid(t *testing.T) {
	gh := fakeapi.NewGitHubAPI(t)
	sl := fakeapi.NewSlackAPI(t)
	st := fakeapi.NewStripeAPI(t)
	for name, env := range map[string]map[string]string{
		"github_comments.yaml": githubEnv(gh), "slack_message.yaml": slackEnv(sl), "stripe_payment_intent.yaml": stripeEnv(st),
	} {
		errs, warnings := httproute.Lint(readExample(t, name), envOf(env))
		if errs != nil || warnings != nil {
			t.Fatalf("%s: errors %v, warnings %v", name, errs, warnings)
		}
	}
	caps := map[string]adapter.Capabilities{
		"github": buildFile(t, "github_comments.yaml", githubEnv(gh), nil).Capabilities(),
		"slack":  buildFile(t, "slack_message.yaml", slackEnv(sl), nil).Capabilities(),
		"stripe": buildFile(t, "stripe_payment_intent.yaml", stripeEnv(st), nil).Capabilities(),
	}
	want := map[string]adapter.Capabilities{
		"github": {Search: true, SearchAuthoritative: true, Correlation: true},
		"slack":  {Search: true, SearchAuthoritative: true, Correlation: true},
		"stripe": {IdempotencyKey: true, KeyRetention: 24 * time.Hour, StatusQuery: true, ReflectionDelay: time.Minute},
	}
	for k := range want {
		if caps[k] != want[k] {
			t.Fatalf("%s capabilities %+v, want %+v", k, caps[k], want[k])
		}
	}
}

// TestGitHubRoute: identity, write with the hidden marker, a search of
// the repository's comments (parent from issue_url's last segment, the
// marker read and removed), readback with visibility from the page probe.
func TestGitHubRoute(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now))
	a := buildFile(t, "github_comments.yaml", githubEnv(api), clock.Now)

	if id, err := a.Identity(bg); err != nil || id != api.UserID() {
		t.Fatalf("identity %q %v, want %s", id, err, api.UserID())
	}
	if err := a.CheckAccount(bg, api.UserID()); err != nil {
		t.Fatal(err)
	}
	err := a.CheckAccount(bg, "999")
	if !errors.Is(err, adapter.ErrAccountMismatch) || !strings.Contains(err.Error(), `"999"`) || len(crdb.GetAllHints(err)) == 0 {
		t.Fatalf("mismatch: %v (hints %v)", err, crdb.GetAllHints(err))
	}
	noSecret(t, "mismatch", err)

	pl := normalized(t, a, `{"body":"Deployed **v1.2**"}`)
	req := writeReq(1, api.UserID(), "7", pl)
	res, err := a.Write(bg, req)
	if err != nil {
		t.Fatal(err)
	}
	c := api.Comments()
	if len(c) != 1 || c[0].Issue != 7 || c[0].Body != "Deployed **v1.2**\n\n<!-- settle:"+req.IntentID+" -->" {
		t.Fatalf("stored %+v", c)
	}
	if res.ExternalID != "1001" || !strings.HasSuffix(res.LiveURL, "/octo-org/hello-world/issues/7#issuecomment-1001") || res.StatusCode != http.StatusCreated {
		t.Fatalf("result %+v", res)
	}

	clock.Advance(time.Second)
	recs, err := a.Search(bg, adapter.SearchQuery{Account: api.UserID(), From: rt0.Add(-time.Minute), To: rt0.Add(time.Minute)})
	if err != nil || len(recs) != 1 {
		t.Fatalf("search %+v %v", recs, err)
	}
	r := recs[0]
	if r.ExternalID != "1001" || r.AuthorID != api.UserID() || r.ParentID != "7" || r.CorrelationID != req.IntentID ||
		!r.CreatedAt.Equal(rt0) || hashOf(t, r.Payload) != hashOf(t, pl) || r.Partial {
		t.Fatalf("record %+v (payload %s)", r, r.Payload)
	}
	got, err := a.Get(bg, "1001")
	if err != nil || got.AuthorID != api.UserID() || got.ParentID != "7" || got.CorrelationID != req.IntentID || hashOf(t, got.Payload) != hashOf(t, pl) || got.LiveURL != res.LiveURL {
		t.Fatalf("get %+v %v", got, err)
	}
	if code, err := a.Probe(bg, got.LiveURL); err != nil || code != http.StatusOK {
		t.Fatalf("probe %d %v", code, err)
	}

	// A comment made in the window but not by settle carries no marker.
	api.Inject(fakeapi.GitHubComment{Issue: 7, Body: "Deployed **v1.2**"})
	recs, _ = a.Search(bg, adapter.SearchQuery{Account: api.UserID(), From: rt0.Add(-time.Minute), To: rt0.Add(time.Minute)})
	if len(recs) != 2 || recs[1].CorrelationID != "" || hashOf(t, recs[1].Payload) != hashOf(t, pl) {
		t.Fatalf("a comment without a marker: %+v", recs)
	}

	// A private repository: its pages answer 404 to
	// a visitor, so the route declares no url or visibility check and
	// probes no page; the readback passes every check it declares. Before,
	// the route probed the page, read "not_public" and every comment of a
	// private repository went to a human.
	priv := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubPrivateRepo())
	pa := buildFile(t, "github_comments.yaml", githubEnv(priv), nil)
	if got := pa.ReadbackChecks(); strings.Join(got, ",") != "author,payload,parent" {
		t.Fatalf("checks %v", got)
	}
	if _, err := pa.Write(bg, writeReq(2, priv.UserID(), "1", pl)); err != nil {
		t.Fatal(err)
	}
	pr, err := pa.Get(bg, "1001")
	if err != nil || pr.AuthorID != priv.UserID() || pr.ParentID != "1" || hashOf(t, pr.Payload) != hashOf(t, pl) {
		t.Fatalf("private: %+v %v", pr, err)
	}
	if priv.PageCalls() != 0 {
		t.Fatalf("probed %d pages", priv.PageCalls())
	}
}

// TestLinkHeaderPagination: GitHub's Link rel="next" is followed over
// more than 3 pages; a listing that needs more than max_pages is an error,
// never a shorter list; a next link to another origin is refused.
func TestLinkHeaderPagination(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now))
	a := buildFile(t, "github_comments.yaml", githubEnv(api), clock.Now, "page_size: 100", "page_size: 2")
	for i := 0; i < 7; i++ {
		api.Inject(fakeapi.GitHubComment{Issue: 1 + i%3, Body: "c" + itoa(i)})
		clock.Advance(time.Second)
	}
	q := adapter.SearchQuery{Account: api.UserID(), From: rt0.Add(-time.Minute), To: rt0.Add(time.Hour)}
	before := api.ListCalls()
	recs, err := a.Search(bg, q)
	if err != nil {
		t.Fatal(err)
	}
	if pages := api.ListCalls() - before; pages != 4 {
		t.Fatalf("read %d pages of 2 for 7 comments, want 4", pages)
	}
	if len(recs) != 7 {
		t.Fatalf("%d records, want 7", len(recs))
	}
	for i, r := range recs {
		if r.ExternalID != itoa(1001+i) || r.ParentID != itoa(1+i%3) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}

	short := buildFile(t, "github_comments.yaml", githubEnv(api), clock.Now, "page_size: 100", "page_size: 2", "max_pages: 50", "max_pages: 3")
	if recs, err := short.Search(bg, q); !crdb.Is(err, adapter.ErrListingIncomplete) || len(recs) != 6 || !strings.Contains(err.Error(), "more than 3 pages") {
		t.Fatalf("max_pages reached: %v %v", recs, err)
	}
}

// TestMarkerTellsLookAlikesApart: two intents of one account with the same
// payload under the same parent, written one second apart, read back as
// two records with the same payload hash (the marker is not part of it)
// and each naming its own intent; on Slack the marker is in message
// metadata.
func TestMarkerTellsLookAlikesApart(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	t.Run("github", func(t *testing.T) {
		api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now))
		a := buildFile(t, "github_comments.yaml", githubEnv(api), clock.Now)
		pl := normalized(t, a, `{"body":"LGTM"}`)
		r1, r2 := writeReq(11, api.UserID(), "3", pl), writeReq(12, api.UserID(), "3", pl)
		for _, r := range []adapter.WriteRequest{r1, r2} {
			if _, err := a.Write(bg, r); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Second)
		}
		recs, err := a.Search(bg, adapter.SearchQuery{Account: api.UserID(), From: rt0.Add(-time.Minute), To: clock.Now()})
		if err != nil || len(recs) != 2 {
			t.Fatalf("search %v %v", recs, err)
		}
		lookAlikes(t, recs, pl, r1.IntentID, r2.IntentID)
		if recs[0].ParentID != "3" || recs[1].ParentID != "3" || recs[0].AuthorID != recs[1].AuthorID {
			t.Fatalf("not look-alikes: %+v", recs)
		}
	})
	t.Run("slack", func(t *testing.T) {
		api := fakeapi.NewSlackAPI(t, fakeapi.WithSlackToken(secretToken), fakeapi.WithSlackClock(clock.Now))
		a := buildFile(t, "slack_message.yaml", slackEnv(api), clock.Now)
		pl := normalized(t, a, `{"text":"build green"}`)
		r1, r2 := writeReq(21, api.UserID(), "", pl), writeReq(22, api.UserID(), "", pl)
		start := clock.Now()
		for _, r := range []adapter.WriteRequest{r1, r2} {
			if _, err := a.Write(bg, r); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Second)
		}
		recs, err := a.Search(bg, adapter.SearchQuery{Account: api.UserID(), From: start.Add(-time.Minute), To: clock.Now()})
		if err != nil || len(recs) != 2 {
			t.Fatalf("search %v %v", recs, err)
		}
		// conversations.history is newest first.
		lookAlikes(t, recs, pl, r2.IntentID, r1.IntentID)
	})
}

func lookAlikes(t *testing.T, recs []adapter.Record, pl json.RawMessage, first, second string) {
	t.Helper()
	if hashOf(t, recs[0].Payload) != hashOf(t, pl) || hashOf(t, recs[1].Payload) != hashOf(t, pl) {
		t.Fatalf("payloads %s / %s do not hash like the intent %s", recs[0].Payload, recs[1].Payload, pl)
	}
	if recs[0].CorrelationID != first || recs[1].CorrelationID != second {
		t.Fatalf("markers %q %q, want %q %q", recs[0].CorrelationID, recs[1].CorrelationID, first, second)
	}
	if events.ValidateIntentID(first) != nil {
		t.Fatalf("not an intent id: %q", first)
	}
}

// TestIdentityMismatchWritesNothing: a write whose account is not the
// credential's identity is refused before anything is sent (the API sees
// no write); an identity that cannot be read is a retryable not-sent.
func TestIdentityMismatchWritesNothing(t *testing.T) {
	gh := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken))
	sl := fakeapi.NewSlackAPI(t, fakeapi.WithSlackToken(secretToken))
	st := fakeapi.NewStripeAPI(t, fakeapi.WithStripeToken(secretToken))
	cases := []struct {
		name    string
		a       *httproute.Adapter
		payload string
		writes  func() int
	}{
		{"github", buildFile(t, "github_comments.yaml", githubEnv(gh), nil), `{"body":"x"}`, gh.Writes},
		{"slack", buildFile(t, "slack_message.yaml", slackEnv(sl), nil), `{"text":"x"}`, sl.Writes},
		{"stripe", buildFile(t, "stripe_payment_intent.yaml", stripeEnv(st), nil), `{"amount":100,"currency":"jpy","customer":"cus_1","payment_method":"pm_card_visa"}`, st.Writes},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pl := normalized(t, c.a, c.payload)
			_, err := c.a.Write(bg, writeReq(1, "someone-else", "1", pl))
			ce := callError(t, err)
			if ce.Class != adapter.NotSent || ce.Code != "account_mismatch" || ce.Retryable {
				t.Fatalf("mismatch: %+v", *ce)
			}
			if n := c.writes(); n != 0 {
				t.Fatalf("%d writes reached the API", n)
			}
			if err := c.a.CheckAccount(bg, "someone-else"); !errors.Is(err, adapter.ErrAccountMismatch) {
				t.Fatalf("CheckAccount: %v", err)
			}
		})
	}

	// The identity cannot be read: nothing is sent, and it may be retried.
	dead := fakeapi.NewGitHubAPIServer(fakeapi.GitHubConfig{Token: secretToken})
	dead.Close()
	a := buildFile(t, "github_comments.yaml", githubEnv(dead), nil)
	_, err := a.Write(bg, writeReq(2, "4242", "1", normalized(t, a, `{"body":"x"}`)))
	if ce := callError(t, err); ce.Class != adapter.NotSent || ce.Code != "identity_unavailable" || !ce.Retryable {
		t.Fatalf("identity unavailable: %+v", *ce)
	}
	if err := a.CheckAccount(bg, "4242"); err == nil || errors.Is(err, adapter.ErrAccountMismatch) {
		t.Fatalf("an unreadable identity is not a mismatch: %v", err)
	}
}

// TestIdentityRefresh: the identity is read once, trusted for
// identity.refresh by the route's clock, then read again.
func TestIdentityRefresh(t *testing.T) {
	var calls int
	id := "u1"
	rec := newRecorder(t, func(r *http.Request) (int, string) {
		if r.URL.Path == "/me" {
			calls++
			return 200, `{"who":{"id":"` + id + `"}}`
		}
		return 404, `{}`
	})
	clock := testharness.NewManualClock(rt0)
	cfgs, err := httproute.Parse([]byte(`routes:
  - name: notes
    base_url: `+rec.srv.URL+`
    identity: {url: "{{base}}/me", id: $.who.id, refresh: 1m}
    write: {method: POST, url: "{{base}}/notes", response: {external_id: $.id}}
    policy: {trust_response: true, retry: never}
`), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfgs[0].Now = clock.Now
	r, err := httproute.Build(cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	a := r.Adapter.(*httproute.Adapter)
	for range 3 {
		if err := a.CheckAccount(bg, "u1"); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("%d identity reads, want 1", calls)
	}
	id = "u2" // the token was rotated to another user
	clock.Advance(59 * time.Second)
	if err := a.CheckAccount(bg, "u1"); err != nil {
		t.Fatal("refreshed before identity.refresh")
	}
	clock.Advance(2 * time.Second)
	if err := a.CheckAccount(bg, "u1"); !errors.Is(err, adapter.ErrAccountMismatch) || calls != 2 {
		t.Fatalf("after refresh: %v (%d reads)", err, calls)
	}
}

// TestSlackRoute: identity from auth.test, ok:false answers classified,
// readback of one message by its ts, declared readback checks.
func TestSlackRoute(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewSlackAPI(t, fakeapi.WithSlackToken(secretToken), fakeapi.WithSlackClock(clock.Now))
	a := buildFile(t, "slack_message.yaml", slackEnv(api), clock.Now)
	if err := a.CheckAccount(bg, api.UserID()); err != nil {
		t.Fatal(err)
	}
	if got := a.ReadbackChecks(); strings.Join(got, ",") != "author,payload,parent" {
		t.Fatalf("checks %v", got)
	}
	pl := normalized(t, a, `{"text":"release 1.4 is out"}`)
	req := writeReq(1, api.UserID(), "", pl)
	res, err := a.Write(bg, req)
	if err != nil {
		t.Fatal(err)
	}
	m := api.Messages()
	if len(m) != 1 || m[0].TS != res.ExternalID || m[0].Text != "release 1.4 is out" || !strings.Contains(string(m[0].Metadata), req.IntentID) {
		t.Fatalf("stored %+v, result %+v", m, res)
	}
	got, err := a.Get(bg, res.ExternalID)
	if err != nil || got.ExternalID != res.ExternalID || got.AuthorID != api.UserID() || got.CorrelationID != req.IntentID ||
		!got.CreatedAt.Equal(rt0) || hashOf(t, got.Payload) != hashOf(t, pl) {
		t.Fatalf("get %+v %v", got, err)
	}
	if _, err := a.Get(bg, "1.000001"); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("missing message: %v", err)
	}
	if _, err := normalizedErr(a, `{"text":"a <b> & c"}`); err == nil {
		t.Fatal("a text Slack would store escaped was accepted")
	}

	for _, c := range []struct {
		fault fakeapi.Fault
		class adapter.Class
		code  string
		retry bool
	}{
		{fakeapi.Status(429), adapter.Rejected, "ratelimited", true},
		{fakeapi.Status(500), adapter.Unknown, "slack_fatal_error", false},
		{fakeapi.CommitThenDrop(), adapter.Unknown, "connection_reset", false},
	} {
		api.Next(c.fault)
		_, err := a.Write(bg, writeReq(2, api.UserID(), "", pl))
		ce := callError(t, err)
		if ce.Class != c.class || ce.Retryable != c.retry || (c.code != "connection_reset" && ce.Code != c.code) {
			t.Fatalf("%v: %+v", c.fault, *ce)
		}
	}
	// {"ok": false} on HTTP 200: a definite rejection.
	wrong := buildFile(t, "slack_message.yaml", slackEnv(api), clock.Now, "channel: C0SETTLE", "channel: C0GONE")
	_, err = wrong.Write(bg, writeReq(3, api.UserID(), "", pl))
	if ce := callError(t, err); ce.Class != adapter.Rejected || ce.Code != "slack_error" || ce.Retryable {
		t.Fatalf("channel_not_found: %+v", *ce)
	}
	// A history answer without messages is an error, never an empty page.
	bad := buildFile(t, "slack_message.yaml", map[string]string{"SLACK_API_URL": api.URL(), "SLACK_BOT_TOKEN": "wrong"}, clock.Now)
	if recs, err := bad.Search(bg, adapter.SearchQuery{Account: api.UserID(), From: rt0, To: rt0.Add(time.Hour)}); err == nil || recs != nil {
		t.Fatalf("invalid_auth listing: %v %v", recs, err)
	}
}

func normalizedErr(a adapter.PayloadNormalizer, raw string) (json.RawMessage, error) {
	return a.NormalizePayload(json.RawMessage(raw))
}

// TestStripeRoute: a PaymentIntent with Idempotency-Key and the marker in
// metadata; a repeat with the key is Stripe's replay (no second payment);
// the lookup by metadata is not found until search catches up.
func TestStripeRoute(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewStripeAPI(t, fakeapi.WithStripeToken(secretToken), fakeapi.WithStripeClock(clock.Now),
		fakeapi.WithStripeSearchLag(30*time.Second))
	a := buildFile(t, "stripe_payment_intent.yaml", stripeEnv(api), clock.Now)
	if err := a.CheckAccount(bg, api.AccountID()); err != nil {
		t.Fatal(err)
	}
	pl := normalized(t, a, `{"amount":1500,"currency":"jpy","customer":"cus_A1","payment_method":"pm_card_visa","description":""}`)
	req := writeReq(1, api.AccountID(), "", pl)
	res, err := a.Write(bg, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.Write(bg, req)
	if err != nil || again.ExternalID != res.ExternalID || api.Effects() != 1 || api.Replays() != 1 {
		t.Fatalf("replay %+v %v: %d effects, %d replays", again, err, api.Effects(), api.Replays())
	}
	pi := api.PaymentIntents()[0]
	if pi.Metadata["settle_intent"] != req.IntentID || pi.Metadata["settle_key"] != req.IdempotencyKey || pi.Status != "succeeded" {
		t.Fatalf("stored %+v", pi)
	}
	q := adapter.StatusQuery{RequestID: req.RequestID, IdempotencyKey: req.IdempotencyKey, Account: req.Account}
	if _, err := a.Status(bg, q); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("status before search caught up: %v", err)
	}
	clock.Advance(31 * time.Second)
	st, err := a.Status(bg, q)
	if err != nil || st.State != adapter.StatusCompleted || st.ExternalID != res.ExternalID || hashOf(t, st.Payload) != hashOf(t, pl) || !st.ReceivedAt.Equal(rt0) {
		t.Fatalf("status %+v %v", st, err)
	}
	got, err := a.Get(bg, res.ExternalID)
	if err != nil || got.ExternalID != res.ExternalID || hashOf(t, got.Payload) != hashOf(t, pl) {
		t.Fatalf("get %+v %v", got, err)
	}
	// The same key with other parameters: Stripe's
	// 400 idempotency_error says an earlier request with the key reached
	// it — unknown with adapter.CodeKeyReused, never a rejection (before:
	// rejected, while the first attempt had paid).
	other := req
	other.Payload = normalized(t, a, `{"amount":1600,"currency":"jpy","customer":"cus_A1","payment_method":"pm_card_visa"}`)
	_, err = a.Write(bg, other)
	if ce := callError(t, err); ce.Class != adapter.Unknown || ce.Code != adapter.CodeKeyReused || ce.StatusCode != 400 || api.Effects() != 1 {
		t.Fatalf("key reuse: %+v, %d effects", *ce, api.Effects())
	}
}
