package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

// A held intent (its hold marker on the log, this process told nothing)
// is never written for: one that looks recorded (its WriteStarted lost) is
// handed to a human where an unheld one would be written; one whose
// WriteStarted stands is first made unknown, then handed off; one whose
// history cannot be folded is left, done, with nothing appended.
func TestHeldIntentsAreHandedOffNeverWritten(t *testing.T) {
	w := newWorld(t, nil)
	l := testharness.NewHandLog(t, w.node.JS, w.store, t0.Add(-time.Hour))
	recorded := l.Record("held:recorded")
	l.MarkHeld(recorded.ID(), 2, 3)
	started := l.Record("held:started").Started(1)
	l.MarkHeld(started.ID(), 3)
	broken := l.Record("held:broken")
	ev := events.New(broken.ID(), 3, l.Tick(), "writer", "", &events.ApprovalRequiredData{For: "first_write", Reason: "after a gap"})
	if _, err := w.store.Append(context.Background(), "social_post", ev, broken.H.LastSeq); err != nil {
		t.Fatal(err)
	}
	l.MarkHeld(broken.ID(), 2)
	control := l.Record("unheld:recorded")

	r := w.reconciler("w1", nil)
	for _, x := range []*testharness.HandHistory{recorded, started} {
		i := w.settle(r, x.ID())
		if i.State != fsm.ManualAction || i.ManualReason != events.ReasonLogEventsLost {
			t.Fatalf("held %s ended %s (%s)", x.ID(), i.State, i.ManualReason)
		}
	}
	if got := w.intent(started.ID()); got.Version != 4 || w.history(started.ID())[2].Type != events.OutcomeUnknown {
		t.Fatalf("held write_started: %v", typesOf(w.history(started.ID())))
	}
	res, err := r.Step(context.Background(), "social_post", broken.ID())
	if err != nil || !res.Done || len(res.Appended) != 0 {
		t.Fatalf("held, unfoldable: %+v %v", res, err)
	}
	if w.api.Writes() != 0 {
		t.Fatalf("%d writes for held intents", w.api.Writes())
	}
	// The contrast: the same history without a hold is written.
	if w.settle(r, control.ID()); w.api.Writes() != 1 {
		t.Fatalf("the unheld recorded intent: %d writes", w.api.Writes())
	}
}
