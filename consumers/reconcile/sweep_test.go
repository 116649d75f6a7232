package reconcile

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/testharness"
)

// An intent whose wake-up message is gone (acked: its later events lost,
// a consumer recreated past it, an ack by mistake) is never woken by its
// consumer again. Without the sweep it sits unknown forever — the
// consumer holds nothing for it; with the sweep, a restarted reconciler
// finds it by reading every intent's last event and settles it.
func TestSweepWakesAnIntentWhoseMessageIsGone(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.CommitThenDrop())
	res := w.execute("sweep:1", "a post whose wake-up message was acked")
	if res.State != fsm.Unknown {
		t.Fatalf("after the dropped response: %s", res.State)
	}
	plain := w.execute("sweep:2", "a confirmed post")
	w.settle(w.reconciler("w0", nil), plain.IntentID)

	// Every message of the route's consumer is delivered and acked, as if
	// a reconciler had seen the intent's newer event.
	r := w.reconciler("w1", nil)
	ctx := context.Background()
	cons := ackEveryMessage(t, w, r)
	pending := func() (uint64, int) {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.NumPending, info.NumAckPending
	}

	// Without the sweep: the reconciler runs, the consumer holds nothing
	// for the intent, and it stays unknown.
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(rctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if np, nap := pending(); np != 0 || nap != 0 {
			t.Fatalf("the consumer holds %d pending, %d unacked: the test's premise is gone", np, nap)
		}
		if st := w.intent(res.IntentID).State; st != fsm.Unknown {
			t.Fatalf("without the sweep the intent moved to %s", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	<-done

	// With the sweep: found by its last event and settled.
	r2 := w.reconciler("w2", nil)
	r2.cfg.Sweep, r2.cfg.SweepMax = true, 10
	rctx, cancel = context.WithCancel(ctx)
	defer cancel()
	done = make(chan struct{})
	go func() { defer close(done); _ = r2.Run(rctx) }()
	deadline = time.Now().Add(30 * time.Second)
	for w.intent(res.IntentID).State != fsm.Confirmed {
		if time.Now().After(deadline) {
			t.Fatalf("the sweep did not settle the intent: %s; sweep %+v", w.intent(res.IntentID).State, r2.SweepStats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	st := r2.SweepStats()
	if st.Scanned != 2 || st.Stepped < 1 || !st.Done {
		t.Fatalf("sweep stats: %+v (want 2 intents read, the unknown one stepped)", st)
	}
	if w.api.Effects() != 2 {
		t.Fatalf("effects %d, want 2 (one per intent)", w.api.Effects())
	}
}

// ackEveryMessage delivers and acks every message of the route's durable
// consumer (r's), as if a reconciler had seen each intent's newer event:
// the intents' wake-ups are gone.
func ackEveryMessage(t *testing.T, w *world, r *Reconciler) jetstream.Consumer {
	t.Helper()
	cons, err := w.store.Stream().CreateOrUpdateConsumer(context.Background(), r.consumerConfig("social_post"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if err := m.Ack(); err != nil {
				t.Fatal(err)
			}
		}
		if n == 0 {
			return cons
		}
	}
}

// A sweep whose scan ends early reads again. On a replicated stream the
// scan's consumer may be placed on a replica whose copy of the stream lags
// (just back from a partition); its scan ends when that copy does, and the
// intents whose last events are past it were left to their consumer
// messages, which may be gone. Placement cannot be chosen, so the test
// makes the scan's first consumer hold nothing after one intent, as such
// a copy would: the scan (ledger.Reader) must see, asking the stream's
// leader, that more follows, make its consumer again, and the sweep
// settle all three.
func TestSweepReadsAgainAScanThatEndsEarly(t *testing.T) {
	w := newWorld(t, nil)
	var ids []string
	for k := range 3 {
		w.api.Next(fakeapi.CommitThenDrop())
		res := w.execute(fmt.Sprintf("cut:%d", k), fmt.Sprintf("post %d, its response dropped", k))
		if res.State != fsm.Unknown {
			t.Fatalf("after the dropped response: %s", res.State)
		}
		ids = append(ids, res.IntentID)
	}
	ackEveryMessage(t, w, w.reconciler("w1", nil))

	// The scan's first consumer sits on a copy that holds nothing after
	// the first intent's last event.
	var cut uint64
	for _, id := range ids {
		h, err := w.store.Load(context.Background(), "social_post", id)
		if err != nil {
			t.Fatal(err)
		}
		if cut == 0 || h.LastSeq < cut {
			cut = h.LastSeq
		}
	}
	r := w.reconciler("w2", nil)
	r.cfg.Sweep, r.cfg.SweepMax = true, 10
	var scans atomic.Int32
	r.sweepRead = func(js jetstream.JetStream, c *ledger.ReaderConfig) jetstream.JetStream {
		c.StallAfter = 200 * time.Millisecond
		return testharness.NewLaggingCopy(js, func(n int) uint64 {
			scans.Store(int32(n + 1))
			if n == 0 {
				return cut
			}
			return 0
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for w.intent(id).State != fsm.Confirmed {
			if time.Now().After(deadline) {
				t.Fatalf("intent %s not settled: %s; sweep %+v", id, w.intent(id).State, r.SweepStats())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	cancel()
	<-done
	st := r.SweepStats()
	if st.Rescans != 1 || scans.Load() != 2 || st.Scanned != 3 || !st.Done {
		t.Fatalf("sweep stats %+v after %d scans (want one scan read again, 3 intents read by the second)", st, scans.Load())
	}
	if w.api.Effects() != 3 {
		t.Fatalf("effects %d, want 3 (one per intent)", w.api.Effects())
	}
}

// A process that cannot append (here its clock is off the log's; a full
// disk or a log being verified are the same) takes no work from the
// route's consumer: before, it fetched the intent, failed its step and
// put it back with a delay (Recheck, an hour here), so the intent waited
// for it while another process could have settled it at once.
func TestBlockedReconcilerLeavesWorkToOthers(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.CommitThenDrop())
	res := w.execute("blocked:1", "a post whose response was dropped")
	if res.State != fsm.Unknown {
		t.Fatalf("after the dropped response: %s", res.State)
	}
	ctx := context.Background()
	offStore, err := ledger.OpenStore(ctx, w.node.JS, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	offStore.Block("clock", errors.Wrap(ledger.ErrClockOffset, "30s off"))
	off := w.reconciler("clock-off", offStore)
	off.cfg.Recheck, off.cfg.MaxRecheck, off.cfg.MaxWait = time.Hour, time.Hour, time.Hour
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	offDone := make(chan struct{})
	go func() { defer close(offDone); _ = off.Run(rctx) }()

	// The blocked process runs alone for a while: it holds nothing.
	cons, err := w.store.Stream().Consumer(ctx, off.consumerConfig("social_post").Durable)
	for k := 0; err != nil && k < 100; k++ { // Run creates the consumer
		time.Sleep(20 * time.Millisecond)
		cons, err = w.store.Stream().Consumer(ctx, off.consumerConfig("social_post").Durable)
	}
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 10; k++ {
		time.Sleep(100 * time.Millisecond)
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending != 0 || info.NumRedelivered != 0 {
			t.Fatalf("the blocked reconciler took the intent: %d unacked, %d redelivered", info.NumAckPending, info.NumRedelivered)
		}
	}

	// A process that can append settles it.
	on := w.reconciler("clock-on", nil)
	onDone := make(chan struct{})
	go func() { defer close(onDone); _ = on.Run(rctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for w.intent(res.IntentID).State != fsm.Confirmed {
		if time.Now().After(deadline) {
			t.Fatalf("the intent was not settled by the process that can append: %s", w.intent(res.IntentID).State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-offDone
	<-onDone
	for _, e := range w.history(res.IntentID) {
		if strings.Contains(e.Actor, "clock-off") {
			t.Fatalf("the blocked process appended %s", e.Type)
		}
	}
	if w.api.Effects() != 1 {
		t.Fatalf("effects %d, want 1", w.api.Effects())
	}
}

// A reconciler whose route consumer cannot be made when it starts (here
// a consumer of the same name that the server will not update; in
// production a cluster electing its leaders) keeps trying and settles
// once it can. Before, Run returned the error and the process went on
// serving with nothing settling its intents (seen in the R3 cluster test
// under load: every intent left unknown).
func TestReconcilerRetriesItsConsumerUntilItCanMakeIt(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.CommitThenDrop())
	res := w.execute("consumer:1", "a post whose response was dropped")
	if res.State != fsm.Unknown {
		t.Fatalf("after the dropped response: %s", res.State)
	}
	r := w.reconciler("w-consumer", nil)
	ctx := context.Background()
	blocker := r.consumerConfig("social_post")
	blocker.DeliverPolicy = jetstream.DeliverNewPolicy // cannot be updated to DeliverAll
	if _, err := w.store.Stream().CreateConsumer(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(rctx) }()
	select {
	case err := <-runErr:
		t.Fatalf("Run gave up while its consumer could not be made: %v", err)
	case <-time.After(time.Second):
	}
	if err := w.store.Stream().DeleteConsumer(ctx, blocker.Durable); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for w.intent(res.IntentID).State != fsm.Confirmed {
		if time.Now().After(deadline) {
			t.Fatalf("not settled once the consumer could be made: %s", w.intent(res.IntentID).State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if w.api.Effects() != 1 {
		t.Fatalf("effects %d, want 1", w.api.Effects())
	}
}
