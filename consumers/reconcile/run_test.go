package reconcile

import (
	"context"
	"fmt"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/testharness"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// runWorkers starts n reconcilers with Run (half of them on their own
// connection, like separate processes) and a driver that moves the clock
// until done() holds. It fails the test if that takes too long.
func (w *world) runWorkers(n int, step time.Duration, done func() bool) []*Reconciler {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var rs []*Reconciler
	for k := 0; k < n; k++ {
		store := w.store
		if k%2 == 1 {
			_, js := w.node.Connect()
			s, err := ledger.OpenStore(ctx, js, ledger.DefaultStoreConfig())
			if err != nil {
				w.t.Fatal(err)
			}
			store = s
		}
		r := w.reconciler(fmt.Sprintf("worker-%d", k), store)
		// The driver jumps the clock; waking every waiting intent more
		// often than this only burns CPU.
		r.cfg.MaxWait = 100 * time.Millisecond
		rs = append(rs, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(ctx); err != nil {
				w.t.Error(err)
			}
		}()
	}
	// A liveness bound, not a speed assertion (make bench measures speed).
	deadline := time.Now().Add(*simBound)
	for !done() {
		if time.Now().After(deadline) {
			cancel()
			wg.Wait()
			w.t.Fatalf("workers did not settle the intents in %s", *simBound)
		}
		time.Sleep(5 * time.Millisecond)
		w.clock.Advance(step)
	}
	cancel()
	wg.Wait()
	return rs
}

func (w *world) allIn(ids []string, states ...fsm.State) func() bool {
	return func() bool {
		for _, id := range ids {
			h, err := w.store.Load(context.Background(), "social_post", id)
			if err != nil {
				return false
			}
			i, err := h.Fold()
			if err != nil {
				w.t.Errorf("fold %s: %v", id, err)
				return true
			}
			ok := false
			for _, s := range states {
				ok = ok || i.State == s
			}
			if !ok {
				return false
			}
		}
		return true
	}
}

func TestEightWorkersFiftyNotFoundIntentsExactlyOneRetryEach(t *testing.T) {
	w := newWorld(t, func(p *events.Policy) {
		p.SearchAfter = events.Duration(10 * time.Minute)
	})
	var ids []string
	for k := 0; k < 50; k++ {
		w.api.Next(fakeapi.ResetBeforeCommit())
		res := w.execute(fmt.Sprintf("task:%d", k), fmt.Sprintf("post %d", k))
		if res.State != fsm.Unknown {
			t.Fatalf("intent %d: %s", k, res.State)
		}
		ids = append(ids, res.IntentID)
	}
	if w.api.Effects() != 0 {
		t.Fatal("setup created effects")
	}
	w.runWorkers(8, 5*time.Second, w.allIn(ids, fsm.Confirmed, fsm.ManualAction))
	for _, id := range ids {
		i := w.intent(id)
		h := w.history(id)
		if i.State != fsm.Confirmed {
			t.Errorf("%s: %s (%s)", id, i.State, i.ManualReason)
		}
		if got := w.api.EffectsForKey(i.Recorded.IdempotencyKey); got != 1 {
			t.Errorf("%s: %d effects", id, got)
		}
		if count(h, events.WriteStarted) != 2 || count(h, events.SearchWindowElapsed) < 1 {
			t.Errorf("%s: history %v", id, typesOf(h))
		}
		// A claim may expire under the fast clock, but only one claim is
		// ever followed by a write.
		if i.Attempts[1].ClaimOwner == "" {
			t.Errorf("%s: retry without claim owner", id)
		}
	}
	if w.api.Effects() != 50 || w.api.Writes() != 100 {
		t.Fatalf("effects %d writes %d, want 50 and 100", w.api.Effects(), w.api.Writes())
	}
}

func TestBatchedSearchSharesListCalls(t *testing.T) {
	w := newWorld(t, nil)
	var ids []string
	for k := 0; k < 10; k++ {
		w.api.Next(fakeapi.CommitThenDrop())
		ids = append(ids, w.execute(fmt.Sprintf("task:%d", k), fmt.Sprintf("post %d", k)).IntentID)
		w.clock.Advance(time.Second) // overlapping windows
	}
	r := w.reconciler("w1", nil)
	ctx := context.Background()
	cons, err := w.store.Stream().CreateOrUpdateConsumer(ctx, r.consumerConfig("social_post"))
	if err != nil {
		t.Fatal(err)
	}
	// Step 1: one fetch wakes all ten unknown intents; ReconcileStarted.
	// Step 2: the next fetch holds their ReconcileStarted messages: the
	// searches of all ten are planned together.
	before := w.api.ListCalls()
	for round := 0; round < 6; round++ {
		fetchAndHandle(ctx, t, cons, r)
		if w.allIn(ids, fsm.Confirmed)() {
			break
		}
	}
	if !w.allIn(ids, fsm.Confirmed)() {
		t.Fatal("not all confirmed")
	}
	lists := w.api.ListCalls() - before
	if lists >= len(ids) || lists < 1 {
		t.Fatalf("%d list calls for %d intents: the batch did not share searches", lists, len(ids))
	}
	t.Logf("%d intents reconciled with %d list calls", len(ids), lists)
}

func TestRunSurvivesWorkerRestartWhileWaiting(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.VisibilityDelay(3 * time.Minute).Dropped())
	res := w.execute("task:1", "hello")
	// A first worker runs while the post is invisible, then stops.
	ctx, cancel := context.WithCancel(context.Background())
	r1 := w.reconciler("first", nil)
	go func() { _ = r1.Run(ctx) }()
	waitUntil(t, func() bool { return count(w.history(res.IntentID), events.CheckDeferred) > 0 })
	cancel()
	// The server restarts too; a new worker on a new connection finishes.
	w.node.Restart()
	store, err := ledger.OpenStore(context.Background(), w.node.JS, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	w.store = store
	w.runWorkers(1, 10*time.Second, w.allIn([]string{res.IntentID}, fsm.Confirmed))
	if w.api.Effects() != 1 || w.api.Writes() != 1 {
		t.Fatalf("effects %d writes %d", w.api.Effects(), w.api.Writes())
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// heldReads is an http.RoundTripper that holds every GET — for hold or,
// with want set, until want of them are in flight at once (at most 10 s,
// so that a test of code that never gets there ends) — and counts the most
// in flight.
type heldReads struct {
	next          http.RoundTripper
	hold          time.Duration
	want          int
	open          chan struct{}
	mu            sync.Mutex
	inFlight, max int
}

func (h *heldReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		h.mu.Lock()
		h.inFlight++
		h.max = max(h.max, h.inFlight)
		if h.want > 0 && h.inFlight == h.want {
			close(h.open)
		}
		h.mu.Unlock()
		defer func() { h.mu.Lock(); h.inFlight--; h.mu.Unlock() }()
		if h.want > 0 {
			select {
			case <-h.open:
			case <-time.After(10 * time.Second):
			}
		} else {
			time.Sleep(h.hold)
		}
	}
	return h.next.RoundTrip(req)
}

// The listings of different accounts in one fetched batch overlap (each is
// a call to the external API), while the intents of one account still
// share one listing. Before, the search cache held its lock across every
// listing, so the accounts of a batch were listed one after the other.
func TestSearchCacheListsAccountsConcurrently(t *testing.T) {
	w := newWorld(t, nil)
	reads := &heldReads{next: http.DefaultTransport, want: 3, open: make(chan struct{})}
	ad := testharness.ExampleRoute(t, "social.yaml", w.api, func(c *httproute.RouteConfig) {
		c.Client = &http.Client{Timeout: 30 * time.Second, Transport: reads}
	}).Adapter
	r := w.reconciler("w1", nil)
	sc := newSearchCache()
	to := time.Now()
	from := to.Add(-time.Hour)
	accounts := []string{"acct_1", "acct_2", "acct_3", "acct_1", "acct_1", "acct_2"}
	for _, a := range accounts {
		sc.plan("social_post", "key", a, from, to)
	}
	var wg sync.WaitGroup
	for _, a := range accounts {
		wg.Go(func() {
			if _, _, err := sc.get(context.Background(), r, "social_post", ad, "key", a, from, to); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if reads.max != 3 || r.ReadCalls() != 3 {
		t.Fatalf("%d listings, at most %d in flight; want 3 and 3 (one per account, all at once)", r.ReadCalls(), reads.max)
	}
}

// The intents of one fetched batch are stepped Config.Steps at a time:
// their reads overlap, never more than Steps of them, and each intent is
// confirmed by its one effect as when they are stepped one by one.
func TestBatchStepsIntentsConcurrentlyUpToSteps(t *testing.T) {
	for _, steps := range []int{1, 4} {
		t.Run(fmt.Sprintf("steps=%d", steps), func(t *testing.T) {
			w := newWorld(t, nil)
			var ids []string
			for k := 0; k < 12; k++ {
				w.api.Next(fakeapi.CommitThenDrop())
				ids = append(ids, w.execute(fmt.Sprintf("task:%d", k), fmt.Sprintf("post %d", k)).IntentID)
			}
			reads := &heldReads{next: http.DefaultTransport, hold: 50 * time.Millisecond}
			ad := testharness.ExampleRoute(t, "social.yaml", w.api, func(c *httproute.RouteConfig) {
				c.Client = &http.Client{Timeout: 5 * time.Second, Transport: reads}
			}).Adapter
			route := w.route
			route.Adapter = ad
			cfg := w.reconciler("w1", nil).cfg
			cfg.Steps = steps
			r, err := NewReconciler(w.store, cfg, route)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			cons, err := w.store.Stream().CreateOrUpdateConsumer(ctx, r.consumerConfig("social_post"))
			if err != nil {
				t.Fatal(err)
			}
			for round := 0; round < 8 && !w.allIn(ids, fsm.Confirmed)(); round++ {
				fetchAndHandle(ctx, t, cons, r)
			}
			if !w.allIn(ids, fsm.Confirmed)() {
				t.Fatal("not all confirmed")
			}
			for _, id := range ids {
				if got := w.api.EffectsForKey(w.intent(id).Recorded.IdempotencyKey); got != 1 {
					t.Errorf("%s: %d effects", id, got)
				}
			}
			if w.api.Effects() != len(ids) || w.api.Writes() != len(ids) {
				t.Errorf("effects %d writes %d, want %d each", w.api.Effects(), w.api.Writes(), len(ids))
			}
			if reads.max != steps {
				t.Errorf("at most %d reads in flight, want %d (Steps)", reads.max, steps)
			}
		})
	}
}

// fetchAndHandle fetches what the consumer has (up to 200 messages, half a
// second's wait) and hands it to r as one batch.
func fetchAndHandle(ctx context.Context, t *testing.T, cons jetstream.Consumer, r *Reconciler) {
	t.Helper()
	batch, err := cons.Fetch(200, jetstream.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	r.handleBatch(ctx, msgs, nil)
}
