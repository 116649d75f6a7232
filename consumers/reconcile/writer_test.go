package reconcile

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

// The reconciler decides with the default decider, changed only where its
// config says: nothing of the decision function is its own.
func TestReconcilerUsesTheDefaultDecider(t *testing.T) {
	w := newWorld(t, nil)
	r := w.reconciler("w1", nil)
	got := r.dec
	if got.Jitter == nil {
		t.Fatal("no jitter")
	}
	got.Jitter = nil
	c := r.cfg
	want := fsm.DefaultDecider(c.Worker)
	want.Lease, want.RecordedGrace, want.Recheck, want.MaxRecheck = c.Lease, c.RecordedGrace, c.Recheck, c.MaxRecheck
	want.PollBase, want.ProcessingDeadline, want.ResendBase, want.ResendCap = c.PollBase, c.ProcessingDeadline, c.ResendBase, c.ResendCap
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decider %+v, want %+v", got, want)
	}
}

// A reconciler's writes are made by its own producer.Writer, under its
// worker's name, and counted through Config.OnCall like the API's.
func TestReconcilerWritesAreItsOwnAndCounted(t *testing.T) {
	w := newWorld(t, nil)
	l := testharness.NewHandLog(t, w.node.JS, w.store, t0.Add(-time.Hour))
	x := l.Record("never-started") // its writer died before WriteStarted
	var mu sync.Mutex
	var calls []events.Type
	cfg := w.reconcilerConfig("w1")
	cfg.OnCall = func(route string, o events.Type) { mu.Lock(); calls = append(calls, o); mu.Unlock() }
	r, err := NewReconciler(w.store, cfg, w.route)
	if err != nil {
		t.Fatal(err)
	}
	w.settle(r, x.ID())
	h := w.history(x.ID())
	var started *events.Event
	for k := range h {
		if h[k].Type.StartsWrite() {
			started = &h[k]
		}
	}
	if w.api.Writes() != 1 || started == nil || started.Actor != "w1" {
		t.Fatalf("%d writes; WriteStarted %+v", w.api.Writes(), started)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 {
		t.Fatalf("OnCall told of %v", calls)
	}
}
