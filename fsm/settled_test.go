package fsm

import (
	"testing"

	"github.com/settle-dev/settle/events"
)

func TestSettledAndReconciled(t *testing.T) {
	settled := map[State]bool{Confirmed: true, Abandoned: true, Rejected: true, Failed: true, ManualAction: true, AwaitingApproval: true}
	for _, s := range AllStates() {
		if Settled(s) != settled[s] {
			t.Errorf("Settled(%s) = %v", s, Settled(s))
		}
		if want := settled[s] && s != Rejected && s != Failed; Reconciled(s) != want {
			t.Errorf("Reconciled(%s) = %v", s, Reconciled(s))
		}
	}
	// An intent whose last event is one of these needs no reconciler: the
	// start-up sweep skips it without loading it.
	quiet := map[events.Type]bool{events.ReadbackPassed: true, events.WriteConfirmed: true, events.OperatorConfirmed: true,
		events.Abandoned: true, events.ManualActionRequired: true, events.ReadbackFailed: true, events.ApprovalRequired: true}
	for _, tr := range Transitions {
		if got := Reconciled(StateAfter(tr.Type)); got != quiet[tr.Type] {
			t.Errorf("Reconciled(StateAfter(%s)) = %v", tr.Type, got)
		}
	}
	if StateAfter("NoSuchEvent") != None {
		t.Error("an unknown type leads somewhere")
	}
}

// The log-loss hold: held until handed off for the loss; the hand-off
// names the loss and is offered only where the state allows one.
func TestLossHeld(t *testing.T) {
	rec := events.New("in_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 1, t0, "w", "", &events.IntentRecordedData{})
	handoff := events.New("in_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 2, t0, "w", "", &events.ManualActionRequiredData{Reason: events.ReasonLogEventsLost})
	other := events.New("in_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 2, t0, "w", "", &events.ManualActionRequiredData{Reason: events.ReasonNoQueryNoDedup})
	switch {
	case LossHeld(false, []events.Event{rec}):
		t.Error("held without a loss")
	case !LossHeld(true, []events.Event{rec}), !LossHeld(true, []events.Event{rec, other}):
		t.Error("a lost intent not held")
	case LossHeld(true, []events.Event{rec, handoff}):
		t.Error("held after its hand-off")
	}
	i := &Intent{State: Recorded}
	d, ok := LossHandoff(i, "lost v2")
	if !ok || d.Reason != events.ReasonLogEventsLost || d.Message != "lost v2" {
		t.Fatalf("hand-off of a recorded intent: %+v %v", d, ok)
	}
	if _, ok := LossHandoff(&Intent{State: WriteStarted}, "x"); ok {
		t.Fatal("a hand-off from write_started")
	}
	h := events.NewHold("in_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", []uint64{2}, nil, nil, t0, "s", "Lost.")
	if m := LossMessage(&h, "told"); m != "Lost. Lost: "+h.Named()+"." {
		t.Fatalf("message %q", m)
	}
	if LossMessage(nil, "told") != "told" || LossMessage(nil, "") == "" {
		t.Fatal("message without a marker")
	}
}
