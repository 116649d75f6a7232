package reconcile

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter/social"
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

// slowReads is an http.RoundTripper that holds every GET for a while and
// records how many were in flight at once.
type slowReads struct {
	next          http.RoundTripper
	hold          time.Duration
	mu            sync.Mutex
	inFlight, max int
}

func (s *slowReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		s.mu.Lock()
		s.inFlight++
		s.max = max(s.max, s.inFlight)
		s.mu.Unlock()
		defer func() { s.mu.Lock(); s.inFlight--; s.mu.Unlock() }()
		time.Sleep(s.hold)
	}
	return s.next.RoundTrip(req)
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
			reads := &slowReads{next: http.DefaultTransport, hold: 50 * time.Millisecond}
			ad, err := social.New(social.Config{BaseURL: w.api.URL(), Token: w.api.Token(), Client: &http.Client{Timeout: 5 * time.Second, Transport: reads}})
			if err != nil {
				t.Fatal(err)
			}
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
	r.handleBatch(ctx, msgs)
}
