package reconcile

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

// Hand-offs for what the API shows, end to end on the shipped example
// routes: what can be decided is decided, and a hand-off names what was
// seen, never a cause that was not.

// githubPullEdge is githubEdge with number 7 a pull request (its
// comments shown with issue_url empty); edit changes the route file.
func githubPullEdge(t *testing.T, edit func(string) string) (*edge, *fakeapi.GitHubAPI) {
	t.Helper()
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubClock(clock.Now), fakeapi.WithGitHubPullRequests(7))
	env := map[string]string{"GITHUB_API_URL": api.URL(), "GITHUB_REPOSITORY": "octo-org/hello-world", "GITHUB_TOKEN": api.Token()}
	return newEdge(t, clock, editedRoute(t, "github_comments.yaml", env, clock.Now, edit, nil)), api
}

// A comment on a pull request, with no fault and with a lost response:
// the API leaves issue_url, which the route reads the parent from, empty.
// The marker names the intent: confirmed, the parent check saying what
// was read; never "edited after the write".
func TestEdgePullRequestCommentIsDecided(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(map[bool]string{false: "no fault", true: "response lost"}[lost], func(t *testing.T) {
			w, api := githubPullEdge(t, nil)
			if lost {
				api.Next(fakeapi.CommitThenDrop())
			}
			res := w.execute("pr-1", api.UserID(), "7", `{"body":"Build #44 passed"}`)
			i := w.settle(w.rec, res.IntentID)
			if api.Effects() != 1 || api.Writes() != 1 {
				t.Fatalf("%d effects, %d writes", api.Effects(), api.Writes())
			}
			if i.State != fsm.Confirmed || i.Receipt == nil || i.Receipt.ExternalID != strconv.FormatInt(api.Comments()[0].ID, 10) {
				t.Fatalf("state %s (%s), evidence %+v; history %v", i.State, i.ManualReason, i.Evidence, w.types(res.IntentID))
			}
			for _, c := range i.Receipt.Checks {
				if c.Name == "parent" && !strings.Contains(c.Detail, "parent read as empty from $.issue_url") {
					t.Fatalf("parent check %q does not say what was read", c.Detail)
				}
			}
		})
	}
}

// withoutMarker is github_comments.yaml without its correlation marker.
func withoutMarker(s string) string {
	s = strings.Replace(s, "    correlation:\n      marker: \"\\n\\n<!-- settle:{{intent_id}} -->\"\n      read: $.body\n", "", 1)
	return strings.Replace(s, `body: "{{payload.body}}{{marker}}"`, `body: "{{payload.body}}"`, 1)
}

// On a route without a marker, a look-alike made by hand 2 s before the
// first attempt (inside the 5 s clock_skew) and a request that was lost:
// the look-alike is never confirmed as the write; the hand-off says when
// it was created against the first attempt, and nothing is written again.
func TestEdgeLookalikeInsideTheSkewIsAmbiguous(t *testing.T) {
	w, api := githubPullEdge(t, withoutMarker)
	if w.route.Adapter.Capabilities().Correlation {
		t.Fatal("the route still writes a marker")
	}
	api.Inject(fakeapi.GitHubComment{Issue: 3, Body: "Build #45 passed", UserID: 4242, UserLogin: "settle-bot", CreatedAt: w.clock.Now().Add(-2 * time.Second)})
	api.Next(fakeapi.ResetBeforeCommit())
	res := w.execute("lookalike-1", api.UserID(), "3", `{"body":"Build #45 passed"}`)
	i := w.settle(w.rec, res.IntentID)
	if api.Effects() != 0 || api.Writes() != 1 {
		t.Fatalf("%d effects, %d writes", api.Effects(), api.Writes())
	}
	if i.State != fsm.ManualAction || i.ManualReason != events.ReasonAmbiguousMatch {
		t.Fatalf("state %s (%s): the look-alike was taken for the write; history %v", i.State, i.ManualReason, w.types(res.IntentID))
	}
	c := i.Evidence.Candidates[0]
	if c.FromFirstAttempt != "-2s" || c.Author != "4242" || c.Parent != "3" || len(c.Why) == 0 || !strings.Contains(c.Why[0], "inside clock_skew") {
		t.Fatalf("candidate evidence %+v", c)
	}
}

// A comment made by hand beside settle's own, identical, after the write
// whose response was lost, on a route without a marker: two objects
// match and a human decides which is the write — but settle made one
// attempt, and the hand-off never says the write executed more than once.
func TestEdgeHandMadeDuplicateIsNotCalledADoubleWrite(t *testing.T) {
	w, api := githubPullEdge(t, withoutMarker)
	api.Next(fakeapi.CommitThenDrop())
	res := w.execute("dup-1", api.UserID(), "3", `{"body":"Build #46 passed"}`)
	w.clock.Advance(30 * time.Second)
	api.Inject(fakeapi.GitHubComment{Issue: 3, Body: "Build #46 passed", UserID: 4242, UserLogin: "settle-bot", CreatedAt: w.clock.Now()})
	i := w.settle(w.rec, res.IntentID)
	if api.Effects() != 1 || api.Writes() != 1 {
		t.Fatalf("%d effects, %d writes", api.Effects(), api.Writes())
	}
	m := lastHandoff(t, w, res.IntentID)
	if i.State != fsm.ManualAction || m.Reason != events.ReasonDuplicateExactMatches {
		t.Fatalf("state %s (%s); history %v", i.State, i.ManualReason, w.types(res.IntentID))
	}
	if strings.Contains(m.Message, "more than once") || !strings.Contains(m.Message, "one attempt") {
		t.Fatalf("the hand-off names a cause it did not see: %q", m.Message)
	}
	for _, c := range m.Evidence.Candidates {
		if c.FromFirstAttempt == "" || c.Author != "4242" || c.Parent != "3" || c.ParentFrom != "$.issue_url" {
			t.Fatalf("candidate evidence %+v", c)
		}
	}
}

func lastHandoff(t *testing.T, w *edge, intentID string) *events.ManualActionRequiredData {
	t.Helper()
	h := w.history(intentID)
	for k := len(h) - 1; k >= 0; k-- {
		if m, ok := h[k].Data.(*events.ManualActionRequiredData); ok {
			return m
		}
	}
	t.Fatalf("no hand-off: %v", w.types(intentID))
	return nil
}
