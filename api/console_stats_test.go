package api

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/projector"
)

// unknownEpisode is, from an intent's history, when it first became
// unknown and when it was next settled (fsm.Settled): the reference the
// stats' settle times are checked against.
func unknownEpisode(t *testing.T, e *env, route, id string) (from, to time.Time) {
	t.Helper()
	i := &fsm.Intent{State: fsm.None}
	for _, ev := range e.history(route, id) {
		if err := i.Apply(ev); err != nil {
			t.Fatal(err)
		}
		if from.IsZero() && i.State == fsm.Unknown {
			from = ev.At
		} else if !from.IsZero() && fsm.Settled(i.State) {
			return from, ev.At
		}
	}
	return from, time.Time{}
}

// GET /v1/stats counts the last hour's intents per route and state, and
// times each unknown outcome from the event that made it unknown to the
// one that settled it; the list filters by request id and finds an intent
// by its id or request id.
func TestStatsAndListSearch(t *testing.T) {
	e := newEnv(t, envOptions{})
	f := newConsoleFixture(t, e)

	r := e.do("GET", "/v1/stats", secretAdmin, "")
	if r.code != 200 {
		t.Fatalf("stats: %d %s", r.code, r.body)
	}
	var st projector.Flow
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatal(err)
	}
	if !st.To.Equal(e.Clock.Now()) || st.To.Sub(st.From) != time.Hour || st.BucketSeconds != 300 {
		t.Fatalf("window %s..%s, buckets of %vs", st.From, st.To, st.BucketSeconds)
	}
	want := map[string]map[fsm.State]int{
		"social_approval": {fsm.AwaitingApproval: 1, fsm.Abandoned: 1},
		"social_other":    {},
		"social_post":     {fsm.Confirmed: 2, fsm.Rejected: 1, fsm.Unknown: 1, fsm.ManualAction: 2},
	}
	if len(st.Routes) != len(want) {
		t.Fatalf("%d routes: %+v", len(st.Routes), st.Routes)
	}
	byRoute := map[string]projector.RouteFlow{}
	for _, rf := range st.Routes {
		byRoute[rf.Route] = rf
		w, ok := want[rf.Route]
		if !ok {
			t.Fatalf("route %s", rf.Route)
		}
		inBuckets := map[fsm.State]int{}
		if len(rf.Buckets) != 12 {
			t.Fatalf("%s: %d buckets", rf.Route, len(rf.Buckets))
		}
		for _, b := range rf.Buckets {
			for s, n := range b.Counts {
				inBuckets[s] += n
			}
		}
		for _, s := range fsm.AllStates()[1:] {
			if rf.ByState[s] != w[s] || inBuckets[s] != w[s] {
				t.Fatalf("%s %s: %d (buckets %d), want %d", rf.Route, s, rf.ByState[s], inBuckets[s], w[s])
			}
		}
	}
	post := byRoute["social_post"]
	if len(post.Settles) != 3 || len(post.Unsettled) != 1 {
		t.Fatalf("settles %+v unsettled %+v", post.Settles, post.Unsettled)
	}
	got := map[string]projector.SettleTime{}
	for _, s := range post.Settles {
		got[s.IntentID] = s
	}
	for id, st := range map[string]fsm.State{f.settled: fsm.Confirmed, f.manual: fsm.ManualAction, f.readFailing: fsm.ManualAction} {
		from, to := unknownEpisode(t, e, "social_post", id)
		s, ok := got[id]
		if !ok || !s.UnknownAt.Equal(from) || !s.SettledAt.Equal(to) || s.Seconds != to.Sub(from).Seconds() || s.State != st {
			t.Fatalf("%s: %+v, want %s..%s in %s", id, s, from, to, st)
		}
	}
	from, _ := unknownEpisode(t, e, "social_post", f.unknown)
	if u := post.Unsettled[0]; u.IntentID != f.unknown || !u.UnknownAt.Equal(from) || u.Seconds != e.Clock.Now().Sub(from).Seconds() {
		t.Fatalf("unsettled %+v (unknown at %s)", u, from)
	}
	// The read-failing one waited out the read-failure bound.
	if s := got[f.readFailing]; s.Seconds < (15 * time.Minute).Seconds() {
		t.Fatalf("read failing settled in %vs", s.Seconds)
	}

	// One route, and refusals.
	r = e.do("GET", "/v1/stats?route=social_approval&window=15m", secretAdmin, "")
	if err := json.Unmarshal(r.body, &st); err != nil || r.code != 200 || len(st.Routes) != 1 || st.BucketSeconds != 75 {
		t.Fatalf("one route: %d %s", r.code, r.body)
	}
	for q, field := range map[string]string{"window=0s": "window", "window=25h": "window", "window=90s": "window",
		"route=Bad%20Route": "route", "x=1": "x"} {
		e.do("GET", "/v1/stats?"+q, secretAdmin, "").problem(t, 400, field)
	}
	e.do("GET", "/v1/stats?route=social_post", secretRouteLtd, "").problem(t, 403, "route")
	e.do("GET", "/v1/stats", secretSubmitter, "").problem(t, 403, "")

	// Search by request id, intent id, and the request_id filter.
	list := func(q string) []string {
		t.Helper()
		r := e.do("GET", "/v1/intents?"+q, secretAdmin, "")
		if r.code != 200 {
			t.Fatalf("list %s: %d %s", q, r.code, r.body)
		}
		var pg projector.Page
		if err := json.Unmarshal(r.body, &pg); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, v := range pg.Items {
			ids = append(ids, v.IntentID)
		}
		return ids
	}
	for q, ids := range map[string][]string{
		"q=fx-rejected":                                 {f.rejected},
		"q=" + url.QueryEscape(f.approval):              {f.approval},
		"q=nothing-like-it":                             nil,
		"request_id=fx-manual":                          {f.manual},
		"request_id=fx-manual&state=confirmed":          nil,
		"request_id=fx-abandoned&route=social_approval": {f.abandoned},
	} {
		if got := list(q); len(got) != len(ids) || (len(ids) == 1 && got[0] != ids[0]) {
			t.Fatalf("%s: %v, want %v", q, got, ids)
		}
	}
	e.do("GET", "/v1/intents?q=", secretAdmin, "").problem(t, 400, "q")
}
