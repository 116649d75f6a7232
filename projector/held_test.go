package projector

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

// A hold marker is not an event: the views record it as the intent's
// hold (quarantine code "held", naming the loss), move their checkpoint
// past it, and open again on it (the checkpoint's message is the marker).
func TestHoldMarkerIsRecordedNotApplied(t *testing.T) {
	l := newTestLog(t)
	h := testharness.NewHandLog(t, l.node.JS, l.store, t0)
	x := h.Record("held").Started(1)
	h.MarkHeld(x.ID(), 3)
	db := filepath.Join(t.TempDir(), "views.db")
	p := openProjector(t, l.node.JS, db, nil)
	catchUp(t, p)
	qs, err := p.Quarantined(context.Background())
	if err != nil || len(qs) != 1 || qs[0].Code != QuarantineHeld || qs[0].IntentID != x.ID() || !strings.Contains(qs[0].Reason, "versions 3") {
		t.Fatalf("quarantine: %+v %v", qs, err)
	}
	v, err := p.Get(context.Background(), x.ID())
	if err != nil || v.Version != 2 {
		t.Fatalf("the held intent's view: %+v %v", v, err)
	}
	if cp, _ := p.Checkpoint(context.Background()); cp != 3 {
		t.Fatalf("checkpoint %d, want 3 (the marker)", cp)
	}
	p.Close()
	p = openProjector(t, l.node.JS, db, nil)
	catchUp(t, p)
	if d, r := dump(t, p), rebuildDump(t, l.node.JS); d != r {
		t.Fatalf("the views differ from a rebuild: %s", firstDiff(d, r))
	}
}

// An intent held after an accepted log loss while its events left it
// reconciling is a human's turn: in the manual-action queue and in the
// list by manual_action (not by reconciling), counted as manual_action,
// and not in the oldest-unknown gauge. Once it is handed off for the
// loss, it is in the queue by its state, once.
func TestHeldIntentIsInTheManualQueue(t *testing.T) {
	l := newTestLog(t)
	h := testharness.NewHandLog(t, l.node.JS, l.store, t0)
	x := h.Record("held-reconciling").Started(1)
	x.Next(x.Attempt(1), &events.OutcomeUnknownData{Code: "timeout_after_send"}).
		Next("", &events.ReconcileStartedData{Worker: "w1", LeaseUntil: h.At.Add(time.Minute), Strategy: "search", Check: 1})
	other := h.Record("other").Started(1)
	other.Next(other.Attempt(1), &events.OutcomeUnknownData{Code: "timeout_after_send"})
	x.MarkHeld(5)
	p := openProjector(t, l.node.JS, filepath.Join(t.TempDir(), "views.db"), nil)
	catchUp(t, p)
	ctx := context.Background()
	ids := func(vs []IntentView) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.IntentID)
		}
		return out
	}
	q, err := p.ManualQueue(ctx, 0)
	if err != nil || len(q) != 1 || q[0].IntentID != x.ID() || !q[0].Held || q[0].State != fsm.Reconciling {
		t.Fatalf("manual queue %v (%+v), %v", ids(q), q, err)
	}
	for state, want := range map[fsm.State]int{fsm.ManualAction: 1, fsm.Reconciling: 0, fsm.Unknown: 1} {
		pg, err := p.List(ctx, Filter{State: state})
		if err != nil || len(pg.Items) != want {
			t.Fatalf("list %s: %v, %v", state, ids(pg.Items), err)
		}
	}
	counts, err := p.CountByState(ctx)
	if err != nil || counts[fsm.ManualAction] != 1 || counts[fsm.Reconciling] != 0 || counts[fsm.Unknown] != 1 {
		t.Fatalf("counts %v, %v", counts, err)
	}
	age, ok, err := p.OldestUnknownAge(ctx, h.At.Add(time.Hour))
	otherView, _ := p.Get(ctx, other.ID())
	if err != nil || !ok || age != h.At.Add(time.Hour).Sub(otherView.UnknownSince) {
		t.Fatalf("oldest unknown %v %v %v: counts the held intent", age, ok, err)
	}
	x.Next("", &events.ManualActionRequiredData{Reason: events.ReasonLogEventsLost, Message: "lost", Owner: "operators"})
	catchUp(t, p)
	q, err = p.ManualQueue(ctx, 0)
	if err != nil || len(q) != 1 || q[0].Held || q[0].State != fsm.ManualAction {
		t.Fatalf("after the hand-off: queue %+v, %v", q, err)
	}
}
