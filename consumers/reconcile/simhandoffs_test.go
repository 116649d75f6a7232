package reconcile

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
)

// Hand-offs in the seeded world. The world knows the truth of every
// intent; for each hand-off it decides whether the answers the route
// received were enough to decide. They were when the hand-off's evidence
// holds the intent's one effect, carrying its marker, and that object
// differs from the intent only by what the API does to every object of
// its kind — a rewriting it documents (Slack's links and entities), a
// field it leaves empty (a pull-request comment's issue_url) — and not by
// a person's edit: one object carrying the intent's marker whose payload
// differs only by a transformation the route can declare is the write.
// Such a hand-off is needless (the world line's needless=N). Every other
// hand-off is needed: without a marker, an object identical to the write
// may be anyone's; an edit by a person or a removed object is for a
// human.
//
// The world also holds each hand-off to its message: "executed more than
// once" only when settle made more than one attempt that could have
// written.

// personEdit is the text the world's edits put in (simroutes_test.go).
const personEdit = "a person fixed a typo"

// handoffBehaviours are the observed cases of hand-offs, in the world.
var handoffBehaviours = []behaviour{
	// A comment on a pull request: the API leaves issue_url, which the
	// route reads the parent from, empty.
	{name: "y_github_pull_request_ok", route: "github_issue_comment", weight: 1, want: confirmedOnly(), arm: onPullRequest},
	{name: "y_github_pull_request_response_lost", route: "github_issue_comment", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { onPullRequest(s, in); s.y.github.Next(fakeapi.CommitThenDrop()) }},
	// A comment identical to the write made by hand 30 s after it, on a
	// route without a marker, the write's response lost: two objects
	// match; a human decides which is the write.
	{name: "v_gh_page_nomarker_duplicate_by_hand_response_lost", route: "gh_page_nomarker", weight: 1,
		want: []outcome{{fsm.ManualAction, events.ReasonDuplicateExactMatches}},
		arm: func(s *sim, in *simIntent) {
			s.y.ghv["gh_page_nomarker"].Inject(fakeapi.GitHubComment{Issue: 1 + in.k%20, Body: in.body, CreatedAt: s.clock.Now().Add(30 * time.Second)})
			s.y.ghv["gh_page_nomarker"].Next(fakeapi.CommitThenDrop())
			s.y.count("duplicate_by_hand", 1)
		}},
	// A look-alike made by hand 3.5 s before the write (inside the 5 s
	// skew for one writer's clock, beyond it for the other's), on a
	// route without a marker, the write's request lost: never confirmed
	// as the write; ambiguous, or (beyond the skew) not ours, and the
	// write is retried.
	{name: "v_gh_page_nomarker_lookalike_inside_skew_request_lost", route: "gh_page_nomarker", weight: 1,
		want: []outcome{{fsm.ManualAction, events.ReasonAmbiguousMatch}, {fsm.Confirmed, ""}},
		arm: func(s *sim, in *simIntent) {
			s.y.ghv["gh_page_nomarker"].Inject(fakeapi.GitHubComment{Issue: 1 + in.k%20, Body: in.body, CreatedAt: s.clock.Now().Add(-3500 * time.Millisecond)})
			s.y.ghv["gh_page_nomarker"].Next(fakeapi.ResetBeforeCommit())
			s.y.count("lookalike_inside_skew", 1)
		}},
}

// onPullRequest makes the intent's parent a pull request.
func onPullRequest(s *sim, in *simIntent) {
	n := 90 + in.k%5
	in.parent = strconv.Itoa(n)
	s.y.github.MarkPullRequests(n)
	s.y.count("pull_request_parent", 1)
}

// handoffTally counts one world's hand-offs.
type handoffTally struct {
	byReason map[string]int
	needless int
	// ambiguousOwn counts ambiguous_match hand-offs whose object was the
	// intent's own write (the world's clocks differ within the skew).
	ambiguousOwn int
}

// judge counts i's hand-off, if it ended in one, and reports a message
// that names a cause the world did not see.
func (s *sim) judge(in *simIntent, i *fsm.Intent, created map[string]bool, t *handoffTally) {
	if i.State != fsm.ManualAction {
		return
	}
	t.byReason[string(i.ManualReason)]++
	if i.ManualReason == events.ReasonAmbiguousMatch && i.Evidence != nil {
		for _, c := range i.Evidence.Candidates {
			if created[c.ExternalID] {
				t.ambiguousOwn++
				break
			}
		}
	}
	if s.answersSufficed(in, i, created) {
		t.needless++
		if t.needless <= 5 {
			s.t.Logf("seed %d: %s (%s): a needless hand-off (%s)%s", s.seed, in.id, in.b.name, i.ManualReason, s.history(in))
		}
	}
	if n := i.WritingAttempts(); n < 2 {
		for _, m := range s.handoffMessages(in) {
			if strings.Contains(m, "more than once") {
				s.t.Errorf("seed %d: %s (%s): settle made %d attempt(s) that could have written, yet the hand-off says %q", s.seed, in.id, in.b.name, n, m)
			}
		}
	}
}

// answersSufficed: the hand-off's evidence holds the intent's one effect,
// the route writes a marker, and the world changed that object only as
// its API changes every object (no person edited it, it still exists).
func (s *sim) answersSufficed(in *simIntent, i *fsm.Intent, created map[string]bool) bool {
	if !i.Caps().Correlation || len(created) != 1 || i.Evidence == nil {
		return false
	}
	for _, c := range i.Evidence.Candidates {
		if created[c.ExternalID] {
			text, ok := s.objectText(in, c.ExternalID)
			return ok && !strings.Contains(text, personEdit)
		}
	}
	return false
}

// objectText is the stored text of the object ext at the intent's fake
// (ok false: gone, or a fake the world does not read).
func (s *sim) objectText(in *simIntent, ext string) (string, bool) {
	gh := s.y.ghv[in.route]
	if in.route == "github_issue_comment" {
		gh = s.y.github
	}
	if gh != nil {
		for _, c := range gh.Comments() {
			if strconv.FormatInt(c.ID, 10) == ext {
				return c.Body, true
			}
		}
		return "", false
	}
	if in.route == "slack_message" {
		for _, m := range s.y.slack.Messages() {
			if m.TS == ext {
				return m.Text, true
			}
		}
	}
	return "", false
}

// handoffMessages are the messages of the intent's hand-offs.
func (s *sim) handoffMessages(in *simIntent) []string {
	h, err := s.store.Load(s.t.Context(), in.route, in.id)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range h.Events {
		if m, ok := e.Data.(*events.ManualActionRequiredData); ok {
			out = append(out, m.Message)
		}
	}
	return out
}

// line renders the tally for the world line.
func (t *handoffTally) line() string {
	n := 0
	for _, v := range t.byReason {
		n += v
	}
	return fmt.Sprintf("handoffs=%d {%s} needless=%d ambiguous_own=%d", n, counts(t.byReason), t.needless, t.ambiguousOwn)
}

// ambiguousAllowed: on a route without a marker, a behaviour that wants
// its write confirmed may end ambiguous_match instead — when the one
// object the search saw was created inside the clock-skew allowance
// before the first attempt (the world's clocks differ by up to it: the
// write itself can look older than its attempt, and nothing the API
// shows tells it from a look-alike made just before).
func ambiguousAllowed(in *simIntent, i *fsm.Intent) bool {
	if i.ManualReason != events.ReasonAmbiguousMatch || i.Caps().Correlation || i.Evidence == nil || len(i.Attempts) == 0 {
		return false
	}
	wanted := false
	for _, o := range in.b.want {
		wanted = wanted || o.state == fsm.Confirmed
	}
	for _, c := range i.Evidence.Candidates {
		if slices.Contains(c.Mismatch, "inside_skew") && i.InsideSkewBefore(c.CreatedAt) {
			return wanted
		}
	}
	return false
}
