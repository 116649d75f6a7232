package reconcile

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/testharness"
)

// The answer to a reconciler's request to make its consumer is lost (its
// server restarted under it: seen on a 3-node cluster while the meta
// leader restarted). Run is given a context with a long deadline, as a
// caller may; it asks again after its own request timeout, makes the
// consumer and settles the dropped write, instead of waiting for an
// answer until that deadline with nothing settled (it waited 3 minutes
// before).
func TestRunAsksAgainWhenTheConsumersAnswerIsLost(t *testing.T) {
	w := newWorld(t, nil)
	id := func() string {
		w.api.Next(fakeapi.CommitThenDrop())
		res := w.execute("lost-answer", "the consumer's answer is lost")
		if res.State != fsm.Unknown {
			t.Fatalf("execute: %s, want %s", res.State, fsm.Unknown)
		}
		return res.IntentID
	}()

	nc, _ := w.node.Connect()
	var creates atomic.Int64
	lost := testharness.LossyAPI(t, nc, func(subject string) bool {
		// The first request to make the route's consumer.
		return strings.HasPrefix(subject, "$JS.API.CONSUMER.CREATE.") && creates.Add(1) == 1
	})
	js, err := jetstream.NewWithAPIPrefix(nc, testharness.LossyAPIPrefix)
	if err != nil {
		t.Fatal(err)
	}
	store, err := ledger.OpenStore(context.Background(), js, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := w.reconciler("lossy-worker", store)
	r.cfg.MaxWait = 100 * time.Millisecond

	// A caller's long deadline; the test ends long before it unless the
	// reconciler waits on the lost answer.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for !w.allIn([]string{id}, fsm.Confirmed)() {
		if ctx.Err() != nil {
			t.Fatalf("the intent was not settled before the caller's deadline (requests to make the consumer: %d, lost: %d)", creates.Load(), lost.Load())
		}
		time.Sleep(20 * time.Millisecond)
		w.clock.Advance(10 * time.Second)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if lost.Load() != 1 || creates.Load() < 2 {
		t.Fatalf("requests to make the consumer: %d, lost %d; want the first lost and another made", creates.Load(), lost.Load())
	}
	if w.api.Effects() != 1 || w.api.Writes() != 1 {
		t.Fatalf("effects %d, writes %d; want 1 and 1", w.api.Effects(), w.api.Writes())
	}
	i := w.intent(id)
	if i.ExternalID == "" {
		t.Fatalf("confirmed without the external id: %+v", i)
	}
}
