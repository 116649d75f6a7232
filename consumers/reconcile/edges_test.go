package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// The decision rules at the edges of exactly once, end to end:
// a real embedded nats-server, the producer and a reconciler, the shipped
// example route files (or a route wrapped to show one API habit), and the
// providers' fakes over real HTTP, on one manual clock. The fakes count
// effects.

// edge is one route's world.
type edge struct {
	t     *testing.T
	node  *testharness.Node
	clock *testharness.ManualClock
	route adapter.Route
	store *ledger.Store
	prod  *producer.Producer
	rec   *Reconciler
}

// exampleRoute builds the only route of a shipped example file.
func exampleRoute(t *testing.T, file string, env map[string]string, now func() time.Time) adapter.Route {
	t.Helper()
	return editedRoute(t, file, env, now, nil, nil)
}

// editedRoute builds the only route of a shipped example file with its
// text edited by edit (nil: as shipped), sending through client (nil:
// the route's own).
func editedRoute(t *testing.T, file string, env map[string]string, now func() time.Time, edit func(string) string, client *http.Client) adapter.Route {
	t.Helper()
	raw, err := os.ReadFile("../../examples/routes/" + file)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		raw = []byte(edit(string(raw)))
	}
	cfgs, err := httproute.Parse(raw, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	cfgs[0].Now, cfgs[0].Client = now, client
	route, err := httproute.Build(cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	return route
}

func newEdge(t *testing.T, clock *testharness.ManualClock, route adapter.Route) *edge {
	t.Helper()
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
	w := &edge{t: t, node: n, clock: clock, route: route, store: store, prod: prod}
	w.rec = w.reconciler(route)
	return w
}

// reconciler returns a worker over the edge's log serving route (the
// edge's own, or an edited one of the same name).
func (w *edge) reconciler(route adapter.Route) *Reconciler {
	w.t.Helper()
	rc := DefaultConfig()
	rc.Worker, rc.Now = "worker-1", w.clock.Now
	rc.Recheck, rc.MaxRecheck = 30*time.Second, 4*time.Minute
	rc.Rand = rand.New(rand.NewPCG(25, 25))
	rc.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := NewReconciler(w.store, rc, route)
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

func (w *edge) execute(requestID, account, parent, payload string) *producer.Result {
	w.t.Helper()
	res, err := w.prod.Execute(context.Background(), producer.Request{Route: w.route.Name, Account: account,
		RequestID: requestID, ParentExternalID: parent, Payload: json.RawMessage(payload)})
	if err != nil {
		w.t.Fatal(err)
	}
	return res
}

// settle steps the intent with r until it is done, moving the clock over
// every wait.
func (w *edge) settle(r *Reconciler, intentID string) *fsm.Intent {
	w.t.Helper()
	for k := 0; k < 300; k++ {
		res, err := r.Step(context.Background(), w.route.Name, intentID)
		if err != nil {
			w.t.Fatalf("step %d: %v; history %v", k, err, w.types(intentID))
		}
		if res.Done {
			return w.intent(intentID)
		}
		if res.Wait > 0 {
			w.clock.Advance(res.Wait)
		}
	}
	w.t.Fatalf("intent %s did not settle in 300 steps: %v", intentID, w.types(intentID))
	return nil
}

func (w *edge) history(intentID string) []events.Event {
	w.t.Helper()
	h, err := w.store.Load(context.Background(), w.route.Name, intentID)
	if err != nil {
		w.t.Fatal(err)
	}
	return h.Events
}

func (w *edge) intent(intentID string) *fsm.Intent {
	w.t.Helper()
	i, err := fsm.Fold(w.history(intentID))
	if err != nil {
		w.t.Fatal(err)
	}
	return i
}

func (w *edge) types(intentID string) []events.Type {
	var out []events.Type
	for _, e := range w.history(intentID) {
		out = append(out, e.Type)
	}
	return out
}

func githubEdge(t *testing.T, apiClock func() time.Time) (*edge, *fakeapi.GitHubAPI) {
	t.Helper()
	clock := testharness.NewManualClock(t0)
	if apiClock == nil {
		apiClock = clock.Now
	}
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubClock(func() time.Time { return apiClock() }))
	env := map[string]string{"GITHUB_API_URL": api.URL(), "GITHUB_REPOSITORY": "octo-org/hello-world", "GITHUB_TOKEN": api.Token()}
	return newEdge(t, clock, exampleRoute(t, "github_comments.yaml", env, clock.Now)), api
}

// Our own comment, edited (a typo fixed) after the write whose
// response was lost and before the first search, keeps its marker: it is
// an effect of this intent, never written again; the drift is handed to a
// human (written_modified) with the comment as evidence.
func TestEdgeOwnWriteEditedIsNeverWrittenAgain(t *testing.T) {
	w, api := githubEdge(t, nil)
	api.Next(fakeapi.CommitThenDrop())
	res := w.execute("deploy-1", api.UserID(), "7", `{"body":"Build #42 pased"}`)
	if res.State != fsm.Unknown || api.Effects() != 1 {
		t.Fatalf("after the write: %s, %d effects", res.State, api.Effects())
	}
	c := api.Comments()[0]
	w.clock.Advance(5 * time.Second)
	if !api.Edit(c.ID, "Build #42 passed"+"\n\n<!-- settle:"+res.IntentID+" -->") {
		t.Fatal("edit")
	}
	i := w.settle(w.rec, res.IntentID)
	if api.Effects() != 1 || api.Writes() != 1 {
		t.Fatalf("%d effects, %d writes: our edited comment was written again; history %v", api.Effects(), api.Writes(), w.types(res.IntentID))
	}
	if i.State != fsm.ManualAction || i.ManualReason != events.ReasonWrittenModified || i.Evidence == nil ||
		len(i.Evidence.Candidates) != 1 || i.Evidence.Candidates[0].ExternalID != strconv.FormatInt(c.ID, 10) {
		t.Fatalf("state %s (%s), evidence %+v; history %v", i.State, i.ManualReason, i.Evidence, w.types(res.IntentID))
	}
}

// The API's clock is 10 s behind settle's (beyond the 5 s skew
// allowance): our marked comment looks created before our WriteStarted.
// The marker names the intent, so the pre-existing rule does not apply:
// confirmed by its own comment, never written again.
func TestEdgeMarkedCommentFromABehindClockIsOurs(t *testing.T) {
	var w *edge
	w, api := githubEdge(t, func() time.Time { return w.clock.Now().Add(-10 * time.Second) })
	api.Next(fakeapi.CommitThenDrop())
	res := w.execute("deploy-2", api.UserID(), "7", `{"body":"Build #43 passed"}`)
	i := w.settle(w.rec, res.IntentID)
	if api.Effects() != 1 || api.Writes() != 1 {
		t.Fatalf("%d effects, %d writes: our comment was taken for an older one; history %v", api.Effects(), api.Writes(), w.types(res.IntentID))
	}
	if i.State != fsm.Confirmed || i.Receipt == nil || i.Receipt.ExternalID != strconv.FormatInt(api.Comments()[0].ID, 10) {
		t.Fatalf("state %s (%s), receipt %+v; history %v", i.State, i.ManualReason, i.Receipt, w.types(res.IntentID))
	}
}

// habit wraps a route's adapter to show an API habit the wrapped adapter
// does not: other capabilities, a status answer changed on its way, a
// listing that takes time. The wrapped adapter still talks to its fake
// over real HTTP.
type habit struct {
	adapter.Adapter
	caps   func(*adapter.Capabilities)
	status func(adapter.StatusResult) adapter.StatusResult
	search func(ctx context.Context, q adapter.SearchQuery, inner func() ([]adapter.Record, error)) ([]adapter.Record, error)
	write  func(ctx context.Context, req adapter.WriteRequest, inner func() (adapter.WriteResult, error)) (adapter.WriteResult, error)
}

func (h *habit) Capabilities() adapter.Capabilities {
	c := h.Adapter.Capabilities()
	if h.caps != nil {
		h.caps(&c)
	}
	return c
}

func (h *habit) Status(ctx context.Context, q adapter.StatusQuery) (adapter.StatusResult, error) {
	st, err := h.Adapter.(adapter.StatusQuerier).Status(ctx, q)
	if err == nil && h.status != nil {
		st = h.status(st)
	}
	return st, err
}

func (h *habit) Search(ctx context.Context, q adapter.SearchQuery) ([]adapter.Record, error) {
	inner := func() ([]adapter.Record, error) { return h.Adapter.Search(ctx, q) }
	if h.search != nil {
		return h.search(ctx, q, inner)
	}
	return inner()
}

func (h *habit) Write(ctx context.Context, req adapter.WriteRequest) (adapter.WriteResult, error) {
	inner := func() (adapter.WriteResult, error) { return h.Adapter.Write(ctx, req) }
	if h.write != nil {
		return h.write(ctx, req, inner)
	}
	return inner()
}

func (h *habit) NormalizePayload(p json.RawMessage) (json.RawMessage, error) {
	if n, ok := h.Adapter.(adapter.PayloadNormalizer); ok {
		return n.NormalizePayload(p)
	}
	return events.Canonicalize(p)
}

// bookingEdge is the booking fake behind the route of
// examples/routes/booking.yaml, wrapped by h.
func bookingEdge(t *testing.T, h *habit) (*edge, *fakeapi.BookingAPI) {
	t.Helper()
	clock := testharness.NewManualClock(t0)
	bk := fakeapi.NewBookingAPI(t, fakeapi.WithBookingClock(clock.Now), fakeapi.WithBookingReflectionDelay(5*time.Second))
	h.Adapter = testharness.ExampleRoute(t, "booking.yaml", bk, testharness.RouteTimeout(2*time.Second)).Adapter
	pol := adapter.DefaultPolicy()
	pol.ClockSkew, pol.RetentionMargin = events.Duration(time.Second), events.Duration(time.Hour)
	return newEdge(t, clock, adapter.Route{Name: "booking_update", Adapter: h, Policy: pol}), bk
}

// stepUntilQuiet steps the intent n times (errors allowed: they are what a
// looping step gives), then returns how many events the log holds and
// how many steps failed.
func (w *edge) stepUntilQuiet(intentID string, n int) (size, failed int) {
	w.t.Helper()
	for k := 0; k < n; k++ {
		res, err := w.rec.Step(context.Background(), w.route.Name, intentID)
		switch {
		case err != nil:
			failed++
			w.clock.Advance(time.Minute) // a failed step is looked at again
		case res.Wait > 0:
			w.clock.Advance(res.Wait)
		}
	}
	return len(w.history(intentID)), failed
}

// A status answer without the marker the route writes cannot be
// checked: the intent is handed off once, and every later step appends
// nothing (never two events a check: ReconcileStarted, then a refused
// conclusion, a lease expiry, ...).
func TestEdgeStatusWithoutMarkerHandsOffAndTheLogStopsGrowing(t *testing.T) {
	w, bk := bookingEdge(t, &habit{caps: func(c *adapter.Capabilities) { c.Correlation = true }})
	bk.Seed("B-1", 8, map[string]any{"seat": "3C"})
	bk.Next(fakeapi.CommitThenDrop())
	res := w.execute("trip-1:change-seat", "acct_1", "", `{"booking_id":"B-1","expected_version":8,"change":{"seat":"12A"}}`)
	if res.State != fsm.Unknown {
		t.Fatalf("after the write: %s", res.State)
	}
	size, failed := w.stepUntilQuiet(res.IntentID, 20)
	again, failedAgain := w.stepUntilQuiet(res.IntentID, 20)
	i := w.intent(res.IntentID)
	if failed+failedAgain != 0 || again != size {
		t.Fatalf("%d and %d steps failed; the log grew from %d to %d events: %v", failed, failedAgain, size, again, w.types(res.IntentID))
	}
	if i.State != fsm.ManualAction || i.ManualReason != events.ReasonStatusUnverifiable || bk.Effects() != 1 {
		t.Fatalf("state %s (%s), %d effects: %v", i.State, i.ManualReason, bk.Effects(), w.types(res.IntentID))
	}
}

// A status answer the API says belongs to another account (a
// request id reused by another account) is never this intent's: handed
// off, not confirmed, and the log stops growing.
func TestEdgeStatusOfAnotherAccountIsNotOurs(t *testing.T) {
	w, bk := bookingEdge(t, &habit{status: func(st adapter.StatusResult) adapter.StatusResult { st.Account = "acct_2"; return st }})
	bk.Seed("B-1", 8, map[string]any{"seat": "3C"})
	bk.Next(fakeapi.CommitThenDrop())
	res := w.execute("trip-1:change-seat", "acct_1", "", `{"booking_id":"B-1","expected_version":8,"change":{"seat":"12A"}}`)
	size, failed := w.stepUntilQuiet(res.IntentID, 20)
	again, _ := w.stepUntilQuiet(res.IntentID, 10)
	i := w.intent(res.IntentID)
	if failed != 0 || again != size || i.State != fsm.ManualAction || i.ManualReason != events.ReasonStatusNotOurs || len(i.ConfirmedExternalIDs) != 0 {
		t.Fatalf("state %s (%s), confirmed %v, %d failed steps, log %d then %d: %v", i.State, i.ManualReason, i.ConfirmedExternalIDs, failed, size, again, w.types(res.IntentID))
	}
}

// socialEdge is the social fake behind the route of
// examples/routes/social.yaml, wrapped by h.
func socialEdge(t *testing.T, h *habit, opts ...fakeapi.SocialOption) (*edge, *fakeapi.SocialAPI) {
	t.Helper()
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewSocialAPI(t, append([]fakeapi.SocialOption{fakeapi.WithSocialClock(clock.Now)}, opts...)...)
	ad := testharness.ExampleRoute(t, "social.yaml", api).Adapter
	h.Adapter = ad
	pol := adapter.DefaultPolicy()
	pol.ClockSkew = events.Duration(time.Second)
	return newEdge(t, clock, adapter.Route{Name: "social_post", Adapter: h, Policy: pol}), api
}

// A listing that takes 20 s starts 15 s before the window's end and
// returns 5 s after it; the post, written inside the window, showed only
// 6 s before the end — after the listing had read its page. The window is
// not closed for that listing: the next one, started after the end, finds
// the post. Never written twice.
func TestEdgeListingStraddlingTheWindowEnd(t *testing.T) {
	var w *edge
	slow := 0
	h := &habit{search: func(ctx context.Context, q adapter.SearchQuery, inner func() ([]adapter.Record, error)) ([]adapter.Record, error) {
		recs, err := inner()
		if slow == 0 {
			w.clock.Advance(20 * time.Second) // the listing's pages took 20 s
		}
		slow++
		return recs, err
	}}
	w, api := socialEdge(t, h)
	window := 30*time.Minute + time.Second // search_after + clock_skew after the attempt
	api.Next(fakeapi.VisibilityDelay(window - 7*time.Second).Dropped())
	res := w.execute("task:straddle", "acct_1", "", `{"body":"inside the window"}`)
	if res.State != fsm.Unknown || api.Effects() != 1 {
		t.Fatalf("after the write: %s, %d effects", res.State, api.Effects())
	}
	to := res.Intent.Attempts[0].StartedAt.Add(window)
	w.clock.Set(to.Add(-15 * time.Second)) // the first check starts here
	i := w.settle(w.rec, res.IntentID)
	if api.Effects() != 1 || api.Writes() != 1 {
		t.Fatalf("%d effects, %d writes: the straddling listing closed the window; history %v", api.Effects(), api.Writes(), w.types(res.IntentID))
	}
	if i.State != fsm.Confirmed || slow < 2 {
		t.Fatalf("state %s (%s), %d listings: %v", i.State, i.ManualReason, slow, w.types(res.IntentID))
	}
}

// A shared listing (the search cache of one fetched batch) keeps its
// start: an intent that uses it later judges its window by when the
// listing began, not by when it reads the result.
func TestSearchCacheSharedListingKeepsItsStart(t *testing.T) {
	w, _ := socialEdge(t, &habit{})
	sc := newSearchCache()
	from, to := t0.Add(-time.Hour), t0.Add(time.Hour)
	sc.plan("social_post", "", "acct_1", from, to)
	_, first, err := sc.get(context.Background(), w.rec, "social_post", w.route.Adapter, "", "acct_1", from, to)
	if err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Minute)
	_, second, err := sc.get(context.Background(), w.rec, "social_post", w.route.Adapter, "", "acct_1", from.Add(time.Minute), to)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Equal(t0) || !second.Equal(first) || w.rec.ReadCalls() != 1 {
		t.Fatalf("listing started %s, the second intent sees %s, %d listings; want %s twice, 1 listing", first, second, w.rec.ReadCalls(), t0)
	}
}

// A listing whose end was not proven (max_pages reached, a short
// page without an end proof) is a failed read, never "0 candidates": the
// window closes, nothing is written again, and reads that keep failing
// are handed off read_failing. What such a listing did read still proves
// a write present.
func TestEdgeIncompleteListingNeverProvesAbsence(t *testing.T) {
	cut := func(keep bool) *habit {
		return &habit{search: func(ctx context.Context, q adapter.SearchQuery, inner func() ([]adapter.Record, error)) ([]adapter.Record, error) {
			recs, err := inner()
			if err != nil {
				return nil, err
			}
			if !keep {
				recs = nil // our post was on a page never read
			}
			return recs, fmt.Errorf("social: search: max_pages reached: %w", adapter.ErrListingIncomplete)
		}}
	}
	t.Run("absent_from_what_was_read", func(t *testing.T) {
		w, api := socialEdge(t, cut(false))
		api.Next(fakeapi.CommitThenDrop())
		res := w.execute("task:cut", "acct_1", "", `{"body":"on page 2"}`)
		i := w.settle(w.rec, res.IntentID)
		ts := w.types(res.IntentID)
		if api.Effects() != 1 || api.Writes() != 1 || slices.Contains(ts, events.SearchWindowElapsed) {
			t.Fatalf("%d effects, %d writes: an incomplete listing proved absence; history %v", api.Effects(), api.Writes(), ts)
		}
		if i.State != fsm.ManualAction || i.ManualReason != events.ReasonReadFailing || i.Evidence == nil ||
			!slices.Contains(i.Evidence.Errors, "search: listing_incomplete") {
			t.Fatalf("state %s (%s), evidence %+v", i.State, i.ManualReason, i.Evidence)
		}
	})
	t.Run("present_in_what_was_read", func(t *testing.T) {
		w, api := socialEdge(t, cut(true))
		api.Next(fakeapi.CommitThenDrop())
		res := w.execute("task:found", "acct_1", "", `{"body":"on page 1"}`)
		i := w.settle(w.rec, res.IntentID)
		if i.State != fsm.Confirmed || api.Effects() != 1 || api.Writes() != 1 {
			t.Fatalf("state %s (%s), %d effects: %v", i.State, i.ManualReason, api.Effects(), w.types(res.IntentID))
		}
	})
}

// rateLimited is a habit that says how long the API asked to wait on its
// 429 answers (Retry-After, as the route adapters read it).
func rateLimited(wait time.Duration) func(err error) error {
	return func(err error) error {
		var ce *adapter.CallError
		if errors.As(err, &ce) && ce.StatusCode == http.StatusTooManyRequests {
			c := *ce
			c.RetryAfter = wait
			return &c
		}
		return err
	}
}

// The decider's side of Retry-After: a write answered 429 with
// Retry-After: 2 minutes is recorded with it, and settle does not resend
// before it (its own backoff would resend after about a second).
func TestEdgeRetryAfterOnAWriteIsHonoured(t *testing.T) {
	limit := rateLimited(2 * time.Minute)
	w, api := socialEdge(t, &habit{write: func(ctx context.Context, req adapter.WriteRequest, inner func() (adapter.WriteResult, error)) (adapter.WriteResult, error) {
		res, err := inner()
		return res, limit(err)
	}})
	api.Next(fakeapi.Status(http.StatusTooManyRequests))
	res := w.execute("task:limited", "acct_1", "", `{"body":"slow down"}`)
	rej, ok := res.History[len(res.History)-1].Data.(*events.WriteRejectedData)
	if res.State != fsm.Rejected || !ok || !rej.Retryable || rej.RetryAfter.D() != 2*time.Minute {
		t.Fatalf("state %s, %+v: want a retryable rejection recording retry_after 2m", res.State, res.History[len(res.History)-1].Data)
	}
	rejectedAt := res.History[len(res.History)-1].At
	i := w.settle(w.rec, res.IntentID)
	var second time.Time
	for _, e := range w.history(res.IntentID) {
		if d := events.Started(e); d != nil && d.Attempt == 2 {
			second = e.At
		}
	}
	if i.State != fsm.Confirmed || api.Effects() != 1 || second.IsZero() || second.Before(rejectedAt.Add(2*time.Minute)) {
		t.Fatalf("state %s, %d effects; resent at %s, %s after the 429 (want ≥ 2m): %v", i.State, api.Effects(), second, second.Sub(rejectedAt), w.types(res.IntentID))
	}
}

// A read answered 429 with Retry-After: 3 minutes is a failed read that
// records it, and the next check is not before it.
func TestEdgeRetryAfterOnAReadIsHonoured(t *testing.T) {
	limit := rateLimited(3 * time.Minute)
	limited := 0
	w, api := socialEdge(t, &habit{search: func(ctx context.Context, q adapter.SearchQuery, inner func() ([]adapter.Record, error)) ([]adapter.Record, error) {
		if limited == 0 {
			limited++
			return nil, limit(&adapter.CallError{Class: adapter.Rejected, Code: "http_retryable", StatusCode: http.StatusTooManyRequests, Retryable: true})
		}
		return inner()
	}})
	api.Next(fakeapi.CommitThenDrop())
	res := w.execute("task:read-limited", "acct_1", "", `{"body":"listed slowly"}`)
	i := w.settle(w.rec, res.IntentID)
	var deferred *events.CheckDeferredData
	var at time.Time
	for _, e := range w.history(res.IntentID) {
		if d, ok := e.Data.(*events.CheckDeferredData); ok && d.Reason == events.DeferReadFailed {
			deferred, at = d, e.At
		}
	}
	if deferred == nil || deferred.RetryAfter.D() != 3*time.Minute || deferred.NextCheckAt.Before(at.Add(3*time.Minute)) {
		t.Fatalf("the failed read: %+v at %s; want retry_after 3m and the next check 3m later", deferred, at)
	}
	if i.State != fsm.Confirmed || api.Effects() != 1 {
		t.Fatalf("state %s (%s), %d effects: %v", i.State, i.ManualReason, api.Effects(), w.types(res.IntentID))
	}
}

// wire records the bodies of the requests a client sends (what the
// server receives), by method and path.
type wire struct {
	mu     sync.Mutex
	bodies map[string][]string
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Method != http.MethodGet {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		_ = r.Body.Close()
		w.mu.Lock()
		w.bodies[r.Method+" "+r.URL.Path] = append(w.bodies[r.Method+" "+r.URL.Path], string(b))
		w.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (w *wire) sent(key string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.bodies[key])
}

// The route is edited (a metadata field added to the body) while
// an intent is unknown. The retry sends the request its first attempt
// recorded, byte for byte — Stripe sees the same parameters under the
// key and replays the first result — never one rendered from the edited
// route (Stripe would answer idempotency_error: the first attempt had
// paid). The recorded request holds no credential.
func TestEdgeRetrySendsTheRecordedRequest(t *testing.T) {
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewStripeAPI(t, fakeapi.WithStripeClock(clock.Now), fakeapi.WithStripeSearchLag(3*time.Minute))
	env := map[string]string{"STRIPE_API_URL": api.URL(), "STRIPE_SECRET_KEY": api.Token()}
	seen := &wire{bodies: map[string][]string{}}
	client := &http.Client{Timeout: 5 * time.Second, Transport: seen,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	v1 := editedRoute(t, "stripe_payment_intent.yaml", env, clock.Now, nil, client)
	const keyLine = `"metadata[settle_key]": "{{idempotency_key}}"`
	v2 := editedRoute(t, "stripe_payment_intent.yaml", env, clock.Now, func(s string) string {
		if !strings.Contains(s, keyLine) {
			t.Fatalf("the example no longer has %s", keyLine)
		}
		return strings.Replace(s, keyLine, keyLine+"\n        \"metadata[route_version]\": \"2\"", 1)
	}, client)
	w := newEdge(t, clock, v1)
	api.Next(fakeapi.CommitThenDrop())
	res := w.execute("order-1", api.AccountID(), "", `{"amount":4200,"currency":"jpy","customer":"cus_K1","payment_method":"pm_card_visa"}`)
	if res.State != fsm.Unknown || api.Effects() != 1 {
		t.Fatalf("after the write: %s, %d effects", res.State, api.Effects())
	}
	i := w.settle(w.reconciler(v2), res.IntentID) // the edited route reconciles
	posts := seen.sent("POST /v1/payment_intents")
	if len(posts) != 2 || posts[0] != posts[1] {
		t.Fatalf("the retry sent other bytes than the first attempt:\n%q", posts)
	}
	if i.State != fsm.Confirmed || api.Effects() != 1 || api.Replays() != 1 {
		t.Fatalf("state %s (%s), %d effects, %d replays: %v", i.State, i.ManualReason, api.Effects(), api.Replays(), w.types(res.IntentID))
	}
	var recorded []*events.SentRequest
	for _, e := range w.history(res.IntentID) {
		if d := events.Started(e); d != nil {
			recorded = append(recorded, d.Request)
		}
		raw, err := e.MarshalJSON()
		if err != nil || bytes.Contains(raw, []byte(api.Token())) {
			t.Fatalf("%s holds the secret key (%v)", e.Type, err)
		}
	}
	if len(recorded) != 2 || recorded[0] == nil || !recorded[0].Equal(recorded[1]) || recorded[0].Body != posts[0] ||
		recorded[0].Method != http.MethodPost || recorded[0].Path != "/v1/payment_intents" {
		t.Fatalf("recorded requests %+v", recorded)
	}
}
