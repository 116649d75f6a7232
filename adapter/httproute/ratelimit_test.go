package httproute_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// TestGitHubRateLimitIsRetryable: GitHub refuses a
// request over its rate limit with 403, x-ratelimit-remaining 0 and the
// reset time. The example route's outcomes match status and headers
// together: the write is a retryable rejection carrying the wait, not a
// definite one (before: rejected, http_rejected, no wait — the caller was
// told the comment would never be written). The wait is measured on the
// API's own Date, so an API clock 10 minutes behind ours does not change
// it. Reads refused the same way carry the wait too.
func TestGitHubRateLimitIsRetryable(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	apiClock := func() time.Time { return clock.Now().Add(-10 * time.Minute) }
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(apiClock))
	a := buildFile(t, "github_comments.yaml", githubEnv(api), clock.Now)
	pl := normalized(t, a, `{"body":"deployed"}`)

	api.Next(fakeapi.RateLimited(90 * time.Second))
	_, err := a.Write(bg, writeReq(1, api.UserID(), "4", pl))
	ce := callError(t, err)
	if ce.Class != adapter.Rejected || !ce.Retryable || ce.Code != "rate_limited" || ce.StatusCode != http.StatusForbidden || ce.RetryAfter != 90*time.Second {
		t.Fatalf("rate-limited write: %+v", *ce)
	}
	if api.Effects() != 0 {
		t.Fatal("a refused write made a comment")
	}
	// Any other 403 stays a definite rejection.
	api.Next(fakeapi.Status(http.StatusForbidden))
	_, err = a.Write(bg, writeReq(2, api.UserID(), "4", pl))
	if ce := callError(t, err); ce.Class != adapter.Rejected || ce.Retryable || ce.RetryAfter != 0 {
		t.Fatalf("a plain 403: %+v", *ce)
	}

	api.LimitReads(1, 30*time.Second)
	q := adapter.SearchQuery{Account: api.UserID(), From: rt0.Add(-time.Hour), To: rt0}
	recs, err := a.Search(bg, q)
	ce = callError(t, err)
	if recs != nil || ce.Code != httproute.CodeRateLimited || !ce.Retryable || ce.RetryAfter != 30*time.Second {
		t.Fatalf("rate-limited search: %v %+v", recs, *ce)
	}
	if _, err := a.Search(bg, q); err != nil {
		t.Fatalf("after the limit: %v", err)
	}
}

// TestSlackRetryAfter: Slack answers 429 with Retry-After. A
// rate-limited chat.postMessage is a retryable rejection carrying the
// wait, so settle does not resend on its own clock. The history method of a non-Marketplace app allows a
// call a minute and 15 messages a page: with rate_limit.max_wait the
// listing waits Retry-After between its pages (on the injected sleep) and
// reads all 20 messages; without it the read fails carrying the wait,
// never a shorter list.
func TestSlackRetryAfter(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewSlackAPI(t, fakeapi.WithSlackToken(secretToken), fakeapi.WithSlackClock(clock.Now), fakeapi.WithSlackNonMarketplaceTier())
	var slept []time.Duration
	sleep := func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		clock.Advance(d)
		return nil
	}
	a := buildWith(t, "slack_message.yaml", slackEnv(api), func(c *httproute.RouteConfig) { c.Now, c.Sleep = clock.Now, sleep })
	pl := normalized(t, a, `{"text":"deploy started"}`)

	api.Next(fakeapi.RateLimited(2500 * time.Millisecond))
	_, err := a.Write(bg, writeReq(1, api.UserID(), "", pl))
	ce := callError(t, err)
	if ce.Class != adapter.Rejected || !ce.Retryable || ce.StatusCode != http.StatusTooManyRequests || ce.RetryAfter != 3*time.Second {
		t.Fatalf("rate-limited post: %+v", *ce)
	}

	for i := 0; i < 20; i++ {
		api.Inject(fakeapi.SlackMessage{Channel: "C0SETTLE", Text: "m" + itoa(i)})
		clock.Advance(time.Second)
	}
	q := adapter.SearchQuery{Account: api.UserID(), From: rt0.Add(-time.Minute), To: clock.Now()}
	recs, err := a.Search(bg, q)
	if err != nil || len(recs) != 20 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	if len(slept) != 1 || slept[0] != time.Minute || api.RateLimitedCalls() != 1 {
		t.Fatalf("slept %v, %d calls refused", slept, api.RateLimitedCalls())
	}

	clock.Advance(time.Minute)
	noWait := buildFile(t, "slack_message.yaml", slackEnv(api), clock.Now, "      max_wait: 3m\n", "      max_wait: 0s\n")
	recs, err = noWait.Search(bg, q)
	ce = callError(t, err)
	if recs != nil || ce.Code != httproute.CodeRateLimited || ce.RetryAfter != time.Minute || !strings.Contains(err.Error(), "search page 2") {
		t.Fatalf("without max_wait: %v %+v", recs, err)
	}
}

// TestRetryAfterHTTPDate: a Retry-After given as an HTTP date, in a
// response without a Date header, is measured on the route's injected
// clock.
func TestRetryAfterHTTPDate(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	rec := newRecorder(t, func(*http.Request) (int, string) { return http.StatusServiceUnavailable, `{}` })
	base := rec.srv.Config.Handler
	rec.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Date"] = nil // no Date: the client's clock decides
		w.Header().Set("Retry-After", clock.Now().Add(45*time.Second).Format(http.TimeFormat))
		base.ServeHTTP(w, r)
	})
	cfgs, err := httproute.Parse([]byte(genericRoute), envOf(map[string]string{"BASE": rec.srv.URL, "KEY": secretToken}))
	if err != nil {
		t.Fatal(err)
	}
	cfgs[0].Now = clock.Now
	a, err := httproute.New(cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Write(bg, writeReq(1, "acct", "", normalized(t, a, `{"title":"t"}`)))
	if ce := callError(t, err); ce.Class != adapter.Unknown || ce.RetryAfter != 45*time.Second {
		t.Fatalf("503 with Retry-After: %+v", *ce)
	}
}
