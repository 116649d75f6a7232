package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
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
	cons, err := w.store.Stream().CreateOrUpdateConsumer(ctx, r.consumerConfig("social_post"))
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
			break
		}
	}
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
