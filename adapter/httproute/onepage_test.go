package httproute_test

import (
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

// A search without pagination reads one page. GitHub's listing is paged
// (per_page, capped at 100, 30 when not asked) and says where the next
// page is in its Link header: a route that leaves out next_link would
// take the first page for the whole listing, miss its own comment on a
// later page after a lost response, and post it again.

// lostBehindAPage posts with a lost response after three comments by
// someone else in the same window, on a GitHub route declared by data,
// and settles the intent. The fake serves pages of two.
func lostBehindAPage(t *testing.T, data []byte) (*e2e, *fakeapi.GitHubAPI, *fsm.Intent) {
	t.Helper()
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now), fakeapi.WithGitHubPageCap(2))
	w := newE2EData(t, data, githubEnv(api), clock)
	for k := 0; k < 3; k++ {
		api.Inject(fakeapi.GitHubComment{Issue: 7, Body: "LGTM " + itoa(k), UserID: 77, UserLogin: "someone"})
	}
	clock.Advance(time.Second)
	api.Next(fakeapi.CommitThenDrop())
	res := w.execute("deploy-1", api.UserID(), "7", `{"body":"Build #42 passed"}`)
	if res.State != fsm.Unknown || api.Effects() != 1 {
		t.Fatalf("after the write: %s, %d effects", res.State, api.Effects())
	}
	return w, api, w.settle(res.IntentID)
}

// TestOnePageSearchWithPageSizeIsRefused: a search.url that asks for
// pages of {{page_size}} items but declares no way to read the next page
// cannot prove a write absent, so the route is refused at load.
func TestOnePageSearchWithPageSizeIsRefused(t *testing.T) {
	data := mutate(t, readExample(t, "github_comments.yaml"), "      next_link: true\n", "")
	errs := httproute.Check(data, envOf(exampleEnv("http://127.0.0.1:1")))
	if len(errs) == 0 {
		// What loading it would do: the comment on page 2 is never seen.
		_, api, i := lostBehindAPage(t, data)
		t.Fatalf("the route loaded; after a lost response it ended %s with %d effects", i.State, api.Effects())
	}
	oneError(t, data, exampleEnv("http://127.0.0.1:1"), "github_issue_comment", "search.url", "{{page_size}}", "next page")
}

// TestOnePageSearchSeesTheAPIsNextLink: a one-page search (per_page in
// the URL as text, no pagination declared) whose answer has a Link
// rel="next" proves nothing absent: the listing is incomplete, a failed
// read, and the lost comment is never posted again.
func TestOnePageSearchSeesTheAPIsNextLink(t *testing.T) {
	data := mutate(t, readExample(t, "github_comments.yaml"),
		"      next_link: true\n", "",
		"&per_page={{page_size}}", "&per_page=100",
		"      page_size: 100      # GitHub's largest page\n", "")
	w, api, i := lostBehindAPage(t, data)
	ts := w.types(i)
	if api.Effects() != 1 || api.Writes() != 1 || countTypes(ts, events.WriteStarted) != 1 {
		t.Fatalf("%d effects, %d writes: a lost comment was posted again; history %v", api.Effects(), api.Writes(), ts)
	}
	if i.State == fsm.Confirmed || countTypes(ts, events.SearchWindowElapsed) != 0 {
		t.Fatalf("state %s; history %v: a listing cut at its first page proved the comment absent", i.State, ts)
	}
}

// TestMarkerReadElsewhereIsRefused: a write that sends {{marker}} inside
// the compared body while correlation.read looks at another field leaves
// the marker in what every read compares: the comment could never be
// matched, and a lost response was posted again. Such a route is refused
// at load, naming correlation.read.
func TestMarkerReadElsewhereIsRefused(t *testing.T) {
	data := mutate(t, readExample(t, "github_comments.yaml"), "      read: $.body\n", "      read: $.body_text\n")
	errs := httproute.Check(data, envOf(exampleEnv("http://127.0.0.1:1")))
	if len(errs) == 0 {
		// What loading it would do.
		clock := testharness.NewManualClock(rt0)
		api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now))
		w := newE2EData(t, data, githubEnv(api), clock)
		api.Next(fakeapi.CommitThenDrop())
		res := w.execute("deploy-1", api.UserID(), "7", `{"body":"Build #42 passed"}`)
		i := w.settle(res.IntentID)
		t.Fatalf("the route loaded; after a lost response it ended %s (%s) with %d effects; history %v", i.State, i.ManualReason, api.Effects(), w.types(i))
	}
	oneError(t, data, exampleEnv("http://127.0.0.1:1"), "github_issue_comment", "correlation.read", "$.body_text", "write.body.body", "{{marker}}")
}

// TestKeyRetentionThatCannotCoverARetryIsRefused: a key whose retention,
// the route's only dedup proof, is shorter than retention_margin +
// attempt_deadline + 2 × clock_skew is refused by serve
// (adapter.ValidateRoute); Check (settle routes check) and Load refuse it
// too, naming the field, rather than passing a route serve will not run.
func TestKeyRetentionThatCannotCoverARetryIsRefused(t *testing.T) {
	env := exampleEnv("http://127.0.0.1:1")
	data := mutate(t, readExample(t, "stripe_payment_intent.yaml"), "key_retention: 24h ", "key_retention: 1h0m20s ")
	if errs := httproute.Check(data, envOf(env)); len(errs) == 0 {
		cfgs, err := httproute.Parse(data, envOf(env))
		if err != nil {
			t.Fatal(err)
		}
		r, err := httproute.Build(cfgs[0])
		t.Fatalf("Check passed a route serve refuses (build: %v; ValidateRoute: %v)", err, adapter.ValidateRoute(r))
	}
	oneError(t, data, env, "stripe_payment_intent", "capabilities.key_retention", "cannot cover one retry", "retention_margin (1h0m0s)")
}

// TestMarkedCommentIsKeptWhateverTheAPIsClock: GitHub's since= filters by
// updated_at, so settle drops the comments created outside the intent's
// window itself. A comment whose marker names an intent is kept whatever
// its creation time: with GitHub's clock 11 minutes ahead (past
// search_after + clock_skew) the lost comment was dropped, the window
// closed empty, and it was posted again.
func TestMarkedCommentIsKeptWhateverTheAPIsClock(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now), fakeapi.WithGitHubClockOffset(11*time.Minute))
	w := newE2E(t, "github_comments.yaml", githubEnv(api), clock)
	api.Next(fakeapi.CommitThenDrop())
	res := w.execute("deploy-1", api.UserID(), "7", `{"body":"Build #42 passed"}`)
	postedOnceAndConfirmed(t, w, api, res.IntentID)
}

// TestMarkerBeforeTheTextIsReadFirst: a write that puts {{marker}} before
// the text, whose text quotes a comment settle posted (its raw body, the
// other intent's marker included): reads took the last marker, the quoted
// one, for the comment's, never saw their own write, and posted it again.
// Ours is the first marker when the write puts it first.
func TestMarkerBeforeTheTextIsReadFirst(t *testing.T) {
	data := mutate(t, readExample(t, "github_comments.yaml"),
		`marker: "\n\n<!-- settle:{{intent_id}} -->"`, `marker: "<!-- settle:{{intent_id}} -->\n\n"`,
		`body: "{{payload.body}}{{marker}}"`, `body: "{{marker}}{{payload.body}}"`)
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now))
	w := newE2EData(t, data, githubEnv(api), clock)
	api.Next(fakeapi.CommitThenDrop())
	quoted := events.ScopedIntentID("default", "github_issue_comment", "acct_1", "earlier")
	res := w.execute("deploy-1", api.UserID(), "7", `{"body":"Quoting the last report:\n<!-- settle:`+quoted+` -->\n\nBuild #41 failed. Fixed now."}`)
	postedOnceAndConfirmed(t, w, api, res.IntentID)
}

// TestVisibilityProbeOf5xxIsAReadFailure: with visibility: {probe: true}
// a readback probes the live URL; a page answering 500 (its web server in
// trouble) proves nothing about the object, so it is a failed read, looked
// at again — as the reconciler's own url probe treats it — never a failed
// visibility check, which handed a good write to a human for good.
func TestVisibilityProbeOf5xxIsAReadFailure(t *testing.T) {
	data := mutate(t, readExample(t, "social.yaml"), "        visibility: $.visibility\n", "        visibility: {probe: true}\n")
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialToken(secretToken), fakeapi.WithSocialClock(clock.Now))
	w := newE2EData(t, data, exampleEnv(api.URL()), clock)
	api.FailPages(fakeapi.ReadError500)
	res := w.execute("post-1", "acct_1", "", `{"body":"hello"}`)
	i := w.settle(res.IntentID)
	ts := w.types(i)
	if i.State != fsm.Confirmed || api.Effects() != 1 || countTypes(ts, events.ReadbackFailed) != 0 {
		t.Fatalf("%s (%s), %d effects; history %v", i.State, i.ManualReason, api.Effects(), ts)
	}
}

// TestAbsentCreationTimeIsNotAMatch: search.fields.created_at maps a path
// the API does not fill ($.created for GitHub's created_at). Every
// record had no creation time, so the pre-existing rule never held: a
// comment posted by hand a minute before the intent, with its text, was
// confirmed as the intent's write, and the write never happened. A
// mapped creation time that is absent, on a route that may retry (and so
// must map it), is an item that cannot be mapped: a failed read, never a
// match (the intent is handed off, read_failing).
func TestAbsentCreationTimeIsNotAMatch(t *testing.T) {
	data := mutate(t, readExample(t, "github_comments.yaml"), `    correlation:
      marker: "\n\n<!-- settle:{{intent_id}} -->"
      read: $.body
`, "", `body: "{{payload.body}}{{marker}}"`, `body: "{{payload.body}}"`, "        created_at: $.created_at\n", "        created_at: $.created\n")
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now))
	w := newE2EData(t, data, githubEnv(api), clock)
	byHand := api.Inject(fakeapi.GitHubComment{Issue: 7, Body: "Build #42 passed"})
	clock.Advance(time.Minute)
	api.Next(fakeapi.ResetBeforeCommit())
	res := w.execute("deploy-3", api.UserID(), "7", `{"body":"Build #42 passed"}`)
	i := w.settle(res.IntentID)
	if i.State == fsm.Confirmed || len(i.ConfirmedExternalIDs) != 0 || countTypes(w.types(i), events.CandidateFound) != 0 {
		t.Fatalf("state %s, confirmed as %v (the comment by hand is %d), %d effects; history %v", i.State, i.ConfirmedExternalIDs, byHand.ID, api.Effects(), w.types(i))
	}
}

// postedOnceAndConfirmed settles the intent whose comment's response was
// lost and checks that the search found it: one effect, one write, no
// closed window, confirmed as the comment posted.
func postedOnceAndConfirmed(t *testing.T, w *e2e, api *fakeapi.GitHubAPI, id string) {
	t.Helper()
	i := w.settle(id)
	ts := w.types(i)
	if api.Effects() != 1 || api.Writes() != 1 || countTypes(ts, events.SearchWindowElapsed) != 0 {
		t.Fatalf("%d effects, %d writes: the lost comment was posted again; history %v", api.Effects(), api.Writes(), ts)
	}
	w.confirmedAs(i, itoa(int(api.Comments()[0].ID)))
}
