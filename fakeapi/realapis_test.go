package fakeapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// The fakes of GitHub, Slack and Stripe behave as their providers'
// documentation says, on the points settle relies on.

func fcall(t *testing.T, method, u, token, contentType, body string, hdr ...string) (int, http.Header, map[string]any, []any) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var obj map[string]any
	var arr []any
	if json.Unmarshal(raw, &obj) != nil {
		_ = json.Unmarshal(raw, &arr)
	}
	return resp.StatusCode, resp.Header, obj, arr
}

func TestGitHubFake(t *testing.T) {
	clock := testharness.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken("tok"), fakeapi.WithGitHubClock(clock.Now))
	repo := api.RepoURL()
	if code, _, u, _ := fcall(t, "GET", api.URL()+"/user", "tok", "", ""); code != 200 || u["id"] != float64(4242) || u["login"] != "settle-bot" {
		t.Fatalf("user %d %v", code, u)
	}
	if code, _, _, _ := fcall(t, "GET", api.URL()+"/user", "other", "", ""); code != 401 {
		t.Fatalf("a wrong token: %d", code)
	}
	for i := 0; i < 5; i++ {
		code, _, c, _ := fcall(t, "POST", repo+"/issues/3/comments", "tok", "application/json", `{"body":"c`+string(rune('0'+i))+`"}`)
		if code != 201 || c["issue_url"] != repo+"/issues/3" || c["user"].(map[string]any)["id"] != float64(4242) {
			t.Fatalf("create %d %v", code, c)
		}
		clock.Advance(time.Minute)
	}
	for _, bad := range []struct{ path, body string }{{"/issues/999/comments", `{"body":"x"}`}, {"/issues/3/comments", `{}`}, {"/issues/3/comments", `{"body":""}`}} {
		if code, _, _, _ := fcall(t, "POST", repo+bad.path, "tok", "application/json", bad.body); code != 404 && code != 422 {
			t.Fatalf("%s %s: %d", bad.path, bad.body, code)
		}
	}
	if api.Effects() != 5 || api.Writes() != 8 {
		t.Fatalf("%d effects, %d writes", api.Effects(), api.Writes())
	}
	// since compares updated_at: an old comment edited now is listed.
	api.Edit(1001, "edited")
	since := url.QueryEscape(clock.Now().Add(-90 * time.Second).Format(time.RFC3339))
	_, hdr, _, page := fcall(t, "GET", repo+"/issues/comments?per_page=2&since="+since, "tok", "", "")
	if len(page) != 2 || page[0].(map[string]any)["id"] != float64(1001) || page[1].(map[string]any)["id"] != float64(1005) {
		t.Fatalf("since: %v", page)
	}
	if hdr.Get("Link") != "" {
		t.Fatalf("one page has a Link: %s", hdr.Get("Link"))
	}
	// Link pages: next and last, then prev and first.
	_, hdr, _, page = fcall(t, "GET", repo+"/issues/comments?per_page=2", "tok", "", "")
	if len(page) != 2 || !strings.Contains(hdr.Get("Link"), `page=2&per_page=2>; rel="next"`) || !strings.Contains(hdr.Get("Link"), `page=3&per_page=2>; rel="last"`) {
		t.Fatalf("page 1: %d items, Link %s", len(page), hdr.Get("Link"))
	}
	_, hdr, _, page = fcall(t, "GET", repo+"/issues/comments?per_page=2&page=3", "tok", "", "")
	if len(page) != 1 || strings.Contains(hdr.Get("Link"), `rel="next"`) || !strings.Contains(hdr.Get("Link"), `rel="prev"`) {
		t.Fatalf("page 3: %d items, Link %s", len(page), hdr.Get("Link"))
	}
	// Pages without credentials: public repository 200, unknown issue 404.
	resp, _ := http.Get(api.URL() + "/octo-org/hello-world/issues/3")
	resp.Body.Close()
	resp2, _ := http.Get(api.URL() + "/octo-org/hello-world/issues/999")
	resp2.Body.Close()
	if resp.StatusCode != 200 || resp2.StatusCode != 404 {
		t.Fatalf("pages %d %d", resp.StatusCode, resp2.StatusCode)
	}
}

func TestSlackFake(t *testing.T) {
	clock := testharness.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	api := fakeapi.NewSlackAPI(t, fakeapi.WithSlackToken("xoxb-t"), fakeapi.WithSlackClock(clock.Now))
	if _, _, r, _ := fcall(t, "POST", api.URL()+"/auth.test", "xoxb-t", "", ""); r["ok"] != true || r["user_id"] != "U0SETTLE" {
		t.Fatalf("auth.test %v", r)
	}
	if code, _, r, _ := fcall(t, "POST", api.URL()+"/auth.test", "bad", "", ""); code != 200 || r["ok"] != false || r["error"] != "invalid_auth" {
		t.Fatalf("a bad token: %d %v", code, r)
	}
	var ts []string
	for i := 0; i < 5; i++ {
		_, _, r, _ := fcall(t, "POST", api.URL()+"/chat.postMessage", "xoxb-t", "application/json",
			`{"channel":"C0SETTLE","text":"m`+string(rune('0'+i))+`","metadata":{"event_type":"e","event_payload":{"k":"v"}}}`)
		if r["ok"] != true || r["channel"] != "C0SETTLE" {
			t.Fatalf("post %v", r)
		}
		ts = append(ts, r["ts"].(string))
	}
	if ts[0] >= ts[1] || ts[3] >= ts[4] {
		t.Fatalf("ts not increasing: %v", ts)
	}
	for body, want := range map[string]string{`{"channel":"C0NONE","text":"x"}`: "channel_not_found", `{"channel":"C0SETTLE"}`: "no_text",
		`{"channel":"C0SETTLE","text":"x","metadata":{"event_type":""}}`: "invalid_metadata_format"} {
		if code, _, r, _ := fcall(t, "POST", api.URL()+"/chat.postMessage", "xoxb-t", "application/json", body); code != 200 || r["error"] != want {
			t.Fatalf("%s: %d %v", body, code, r)
		}
	}
	// History: newest first, cursor pages, inclusive bounds, metadata only on request.
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		_, _, r, _ := fcall(t, "GET", api.URL()+"/conversations.history?channel=C0SETTLE&limit=2&cursor="+url.QueryEscape(cursor), "xoxb-t", "", "")
		for _, m := range r["messages"].([]any) {
			msg := m.(map[string]any)
			if _, ok := msg["metadata"]; ok {
				t.Fatal("metadata without include_all_metadata")
			}
			got = append(got, msg["ts"].(string))
		}
		cursor = r["response_metadata"].(map[string]any)["next_cursor"].(string)
		if cursor == "" {
			if pages != 2 || r["has_more"] != false {
				t.Fatalf("%d pages, has_more %v", pages+1, r["has_more"])
			}
			break
		}
	}
	if strings.Join(got, ",") != strings.Join([]string{ts[4], ts[3], ts[2], ts[1], ts[0]}, ",") {
		t.Fatalf("history %v, posted %v", got, ts)
	}
	_, _, r, _ := fcall(t, "GET", api.URL()+"/conversations.history?channel=C0SETTLE&oldest="+ts[2]+"&latest="+ts[2]+"&inclusive=true&limit=1&include_all_metadata=true", "xoxb-t", "", "")
	if m := r["messages"].([]any); len(m) != 1 || m[0].(map[string]any)["ts"] != ts[2] || m[0].(map[string]any)["metadata"] == nil {
		t.Fatalf("one message: %v", r)
	}
	_, _, r, _ = fcall(t, "GET", api.URL()+"/conversations.history?channel=C0SETTLE&oldest="+ts[2]+"&latest="+ts[2], "xoxb-t", "", "")
	if m := r["messages"].([]any); len(m) != 0 {
		t.Fatalf("exclusive bounds: %v", m)
	}
	api.Next(fakeapi.Status(429))
	if code, hdr, r, _ := fcall(t, "POST", api.URL()+"/chat.postMessage", "xoxb-t", "application/json", `{"channel":"C0SETTLE","text":"x"}`); code != 429 || hdr.Get("Retry-After") == "" || r["error"] != "ratelimited" {
		t.Fatalf("rate limited: %d %v", code, r)
	}
	if api.Effects() != 5 {
		t.Fatalf("%d effects", api.Effects())
	}
}

func TestStripeFake(t *testing.T) {
	clock := testharness.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	api := fakeapi.NewStripeAPI(t, fakeapi.WithStripeToken("sk_t"), fakeapi.WithStripeClock(clock.Now), fakeapi.WithStripeSearchLag(time.Minute))
	form := "application/x-www-form-urlencoded"
	body := "amount=500&currency=usd&customer=cus_1&payment_method=pm_card_visa&confirm=true&metadata%5Bk%5D=v1"
	// The account's default version has automatic payment methods on:
	// confirming needs a return_url, or off_session, or no redirects.
	code, hdr, e, _ := fcall(t, "POST", api.URL()+"/v1/payment_intents", "sk_t", form, body, "Idempotency-Key", "key-0")
	if code != 400 || e["error"].(map[string]any)["param"] != "return_url" || hdr.Get("Stripe-Version") != "2024-06-20" {
		t.Fatalf("confirm without return_url: %d %v", code, e)
	}
	if code, _, _, _ := fcall(t, "POST", api.URL()+"/v1/payment_intents", "sk_t", form, strings.Replace(body, "v1", "old", 1), "Idempotency-Key", "key-old", "Stripe-Version", "2022-11-15"); code != 200 {
		t.Fatalf("an older pinned version needs no return_url: %d", code)
	}
	if code, _, _, _ := fcall(t, "POST", api.URL()+"/v1/payment_intents", "sk_t", form, "amount=500&currency=usd&off_session=true", "Idempotency-Key", "key-off"); code != 400 {
		t.Fatalf("off_session without confirm: %d", code)
	}
	body += "&off_session=true&automatic_payment_methods%5Benabled%5D=true&automatic_payment_methods%5Ballow_redirects%5D=never"
	code, _, pi, _ := fcall(t, "POST", api.URL()+"/v1/payment_intents", "sk_t", form, body, "Idempotency-Key", "key-1", "Stripe-Version", "2024-06-20")
	if code != 200 || pi["status"] != "succeeded" || pi["metadata"].(map[string]any)["k"] != "v1" {
		t.Fatalf("create %d %v", code, pi)
	}
	if v := api.Versions(); len(v) != 4 || v[1] != "2022-11-15" || v[3] != "2024-06-20" {
		t.Fatalf("versions %v", v)
	}
	code, hdr, again, _ := fcall(t, "POST", api.URL()+"/v1/payment_intents", "sk_t", form, body, "Idempotency-Key", "key-1")
	if code != 200 || again["id"] != pi["id"] || hdr.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %v", code, again)
	}
	code, _, e, _ = fcall(t, "POST", api.URL()+"/v1/payment_intents", "sk_t", form, strings.Replace(body, "500", "600", 1), "Idempotency-Key", "key-1")
	if code != 400 || e["error"].(map[string]any)["type"] != "idempotency_error" {
		t.Fatalf("other parameters: %d %v", code, e)
	}
	if code, _, e, _ := fcall(t, "POST", api.URL()+"/v1/payment_intents", "sk_t", form, "currency=usd", "Idempotency-Key", "key-2"); code != 400 || e["error"].(map[string]any)["param"] != "amount" {
		t.Fatalf("missing amount: %d %v", code, e)
	}
	if api.Effects() != 2 || api.EffectsForKey("key-1") != 1 {
		t.Fatalf("%d effects", api.Effects())
	}
	// Search: not read-after-write; exact metadata clauses.
	q := url.QueryEscape("metadata['k']:'v1' AND status:'succeeded'")
	if _, _, r, _ := fcall(t, "GET", api.URL()+"/v1/payment_intents/search?query="+q, "sk_t", "", ""); len(r["data"].([]any)) != 0 {
		t.Fatalf("searchable at once: %v", r)
	}
	clock.Advance(time.Minute)
	if _, _, r, _ := fcall(t, "GET", api.URL()+"/v1/payment_intents/search?query="+q, "sk_t", "", ""); len(r["data"].([]any)) != 1 || r["object"] != "search_result" {
		t.Fatalf("after the lag: %v", r)
	}
	if code, _, _, _ := fcall(t, "GET", api.URL()+"/v1/payment_intents/search?query=nonsense", "sk_t", "", ""); code != 400 {
		t.Fatalf("a bad query: %d", code)
	}
	// Keys are pruned after 24 hours: the same key then makes a new payment.
	clock.Advance(24 * time.Hour)
	if code, _, pi2, _ := fcall(t, "POST", api.URL()+"/v1/payment_intents", "sk_t", form, body, "Idempotency-Key", "key-1"); code != 200 || pi2["id"] == pi["id"] || api.Effects() != 3 {
		t.Fatalf("after retention: %d %v, %d effects", code, pi2, api.Effects())
	}
	if code, _, a, _ := fcall(t, "GET", api.URL()+"/v1/account", "sk_t", "", ""); code != 200 || a["id"] != api.AccountID() {
		t.Fatalf("account %v", a)
	}
	if code, _, _, _ := fcall(t, "GET", api.URL()+"/v1/payment_intents/pi_nope", "sk_t", "", ""); code != 404 {
		t.Fatalf("missing: %d", code)
	}
}

// TestFakeHabits: the documented habits each fake can be switched to —
// an installation token GET /user refuses, GraphQL's viewer, edits after
// creation, Slack's text rewriting, an API clock that is off.
func TestFakeHabits(t *testing.T) {
	clock := testharness.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))

	gh := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken("tok"), fakeapi.WithGitHubClock(clock.Now),
		fakeapi.WithGitHubInstallationToken("github-actions[bot]", 41898282), fakeapi.WithGitHubClockOffset(-10*time.Second),
		fakeapi.WithGitHubEditAfterCreate(func(b string) string { return strings.Replace(b, "teh", "the", 1) }))
	if code, _, u, _ := fcall(t, "GET", gh.URL()+"/user", "tok", "", ""); code != 403 || u["message"] != "Resource not accessible by integration" {
		t.Fatalf("GET /user with an installation token: %d %v", code, u)
	}
	code, _, v, _ := fcall(t, "POST", gh.URL()+"/graphql", "tok", "application/json", `{"query":"query { viewer { login databaseId } }"}`)
	if viewer := v["data"].(map[string]any)["viewer"].(map[string]any); code != 200 || viewer["databaseId"] != float64(41898282) || viewer["login"] != "github-actions[bot]" {
		t.Fatalf("viewer %d %v", code, v)
	}
	if code, _, _, _ := fcall(t, "POST", gh.URL()+"/graphql", "", "application/json", `{"query":"{viewer{login}}"}`); code != 401 {
		t.Fatalf("GraphQL without a token: %d", code)
	}
	code, hdr, c, _ := fcall(t, "POST", gh.RepoURL()+"/issues/3/comments", "tok", "application/json", `{"body":"fixed teh build"}`)
	if code != 201 || c["body"] != "fixed teh build" || c["user"].(map[string]any)["type"] != "Bot" || c["created_at"] != "2029-12-31T23:59:50Z" ||
		hdr.Get("Date") != "Mon, 31 Dec 2029 23:59:50 GMT" {
		t.Fatalf("create %d %v (Date %s)", code, c, hdr.Get("Date"))
	}
	_, _, got, _ := fcall(t, "GET", gh.RepoURL()+"/issues/comments/"+itoa(int(c["id"].(float64))), "tok", "", "")
	if got["body"] != "fixed the build" || got["updated_at"] == got["created_at"] || gh.Effects() != 1 {
		t.Fatalf("after the edit: %v", got)
	}

	sl := fakeapi.NewSlackAPI(t, fakeapi.WithSlackToken("xoxb-t"), fakeapi.WithSlackClock(clock.Now), fakeapi.WithSlackFormatting(),
		fakeapi.WithSlackClockOffset(5*time.Second), fakeapi.WithSlackEditAfterPost(func(s string) string { return s + " (edited)" }))
	_, _, p, _ := fcall(t, "POST", sl.URL()+"/chat.postMessage", "xoxb-t", "application/json",
		`{"channel":"C0SETTLE","text":"see http://x.org/a?b=1&c=2 & www.y.org. a<b"}`)
	const stored = "see <http://x.org/a?b=1&amp;c=2> &amp; <http://www.y.org|www.y.org>. a&lt;b"
	if p["ok"] != true || p["message"].(map[string]any)["text"] != stored || p["ts"] != "1893456005.000000" {
		t.Fatalf("post %v", p)
	}
	_, _, h, _ := fcall(t, "GET", sl.URL()+"/conversations.history?channel=C0SETTLE", "xoxb-t", "", "")
	m := h["messages"].([]any)[0].(map[string]any)
	if m["text"] != stored+" (edited)" || m["edited"] == nil {
		t.Fatalf("history %v", m)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestFakeHabitsOfTheSimulation: offset pages (served from the item
// offset, silently capped and counted), web-site faults on GitHub, and
// Stripe's idempotency_error after the payment was made.
func TestFakeHabitsOfTheSimulation(t *testing.T) {
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken("tok"), fakeapi.WithGitHubPageCap(4))
	for i := 0; i < 6; i++ {
		api.Inject(fakeapi.GitHubComment{Issue: 1, Body: "c" + strconv.Itoa(i)})
	}
	var bodies []string
	for off := 0; ; {
		code, hdr, _, items := fcall(t, "GET", api.RepoURL()+"/issues/comments?per_page=10&offset="+strconv.Itoa(off), "tok", "", "")
		if code != 200 || hdr.Get("Link") != "" {
			t.Fatalf("offset %d: %d, Link %q", off, code, hdr.Get("Link"))
		}
		if len(items) == 0 {
			break
		}
		for _, it := range items {
			bodies = append(bodies, it.(map[string]any)["body"].(string))
		}
		off += len(items)
	}
	if strings.Join(bodies, ",") != "c0,c1,c2,c3,c4,c5" || api.CappedPages() != 1 {
		t.Fatalf("offset pages %v, %d capped (want one: the first page of 4)", bodies, api.CappedPages())
	}
	api.FailPages(fakeapi.ReadError500)
	for k, want := range []int{500, 200} {
		resp, err := http.Get(api.URL() + "/octo-org/hello-world/issues/1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("page %d: %d, want %d", k, resp.StatusCode, want)
		}
	}

	st := fakeapi.NewStripeAPI(t, fakeapi.WithStripeToken("sk"))
	st.Next(fakeapi.KeyReused())
	code, _, e, _ := fcall(t, "POST", st.URL()+"/v1/payment_intents", "sk", "application/x-www-form-urlencoded",
		"amount=100&currency=jpy&customer=cus_1", "Idempotency-Key", "k1")
	if code != 400 || e["error"].(map[string]any)["type"] != "idempotency_error" || st.EffectsForKey("k1") != 1 {
		t.Fatalf("key reused: %d %v, %d effects", code, e, st.EffectsForKey("k1"))
	}
}
