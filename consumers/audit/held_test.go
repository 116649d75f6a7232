package audit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

// Held intents are findings, each saying whether what is left of it
// folds — not "not checked further", and not violations: what a broken
// history seems to break (here a version gap) is the accepted loss. A
// held intent recorded anew, or written for before an operator released
// it, is a violation (held_written).
func TestAuditReportsHeldIntentsAsFindings(t *testing.T) {
	node := testharness.StartNode(t)
	ctx := context.Background()
	l := testharness.NewHandLog(t, node.JS, nil, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	prefix := l.Record("prefix").Started(1)
	prefix.MarkHeld(3)

	broken := l.Record("broken")
	gap := events.New(broken.ID(), 3, l.Tick(), "writer", "", &events.ApprovalRequiredData{For: "first_write", Reason: "after the gap"})
	if _, err := l.Store.Append(ctx, l.Route, gap, broken.H.LastSeq); err != nil {
		t.Fatal(err)
	}
	l.MarkHeld(broken.ID(), 2)

	whole := events.ScopedIntentID("default", l.Route, "acct_1", "whole")
	l.MarkHeld(whole, 1, 2, 3)

	again := testharness.RecordedEvent(l.Route, "again", adapter.DefaultPolicy(), l.Tick())
	l.MarkHeld(again.IntentID, 1, 2)
	marker, err := l.Store.Stream().GetLastMsgForSubject(ctx, events.Subject(l.Route, again.IntentID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Store.Append(ctx, l.Route, again, marker.Sequence); err != nil {
		t.Fatal(err)
	}

	released := l.Record("released")
	released.MarkHeld(2).Next("", &events.ManualActionRequiredData{Reason: events.ReasonLogEventsLost, Message: "lost", Owner: "operators"}).
		Next("", &events.OperatorReleasedData{Operator: "ops", Reason: "checked: never written"}).Started(1)

	unreleased := l.Record("unreleased")
	unreleased.MarkHeld(2).Started(1)

	rep := runAudit(t, node.JS, AuditConfig{Now: func() time.Time { return l.At }, Grace: time.Hour, StuckAfter: time.Hour})
	held := map[string]HeldIntent{}
	for _, h := range rep.Held {
		held[h.IntentID] = h
	}
	for _, c := range []struct {
		id    string
		folds bool
		state fsm.State
	}{
		{prefix.ID(), true, fsm.WriteStarted},
		{broken.ID(), false, ""},
		{whole, false, ""},
		{again.IntentID, true, fsm.Recorded}, // what the log holds folds: the new record
		{released.ID(), true, fsm.WriteStarted},
		{unreleased.ID(), true, fsm.WriteStarted},
	} {
		h, ok := held[c.id]
		if !ok || !h.Marked || h.Folds != c.folds || h.State != c.state || h.Lost == "" || (!h.Folds && h.Why == "") {
			t.Errorf("held %s: %+v (found %v), want folds %v state %q", c.id, h, ok, c.folds, c.state)
		}
	}
	if len(rep.Held) != 6 || rep.HeldUnfoldable != 2 {
		t.Errorf("held %d, unfoldable %d", len(rep.Held), rep.HeldUnfoldable)
	}
	byIntent := auditByIntent(rep)
	for _, id := range []string{prefix.ID(), broken.ID(), whole, released.ID()} {
		if len(byIntent[id]) != 0 {
			t.Errorf("held %s: violations %+v", id, byIntent[id])
		}
	}
	for _, id := range []string{again.IntentID, unreleased.ID()} {
		if kinds := auditKinds(byIntent[id]); !slices.Equal(kinds, []string{ViolationHeldWritten}) {
			t.Errorf("written after its hold, %s: %v", id, byIntent[id])
		}
	}
}

// A held intent that its events left reconciling: the views list it as
// held (a human's turn) and the audit, folding the log, agrees — no
// projection mismatch, handed off false. Once the log holds its hand-off
// for the loss, wherever it stands against the marker, the audit says
// handed off, as the log does.
func TestAuditAgreesWithTheViewsOnHeldIntents(t *testing.T) {
	node := testharness.StartNode(t)
	ctx := context.Background()
	l := testharness.NewHandLog(t, node.JS, nil, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	x := l.Record("held-reconciling").Started(1)
	x.Next(x.Attempt(1), &events.OutcomeUnknownData{Code: "timeout_after_send"}).
		Next("", &events.ReconcileStartedData{Worker: "w1", LeaseUntil: l.At.Add(time.Minute), Strategy: "search", Check: 1}).
		MarkHeld(5)
	before := l.Record("handed-before-marker").Started(1)
	before.Next(before.Attempt(1), &events.OutcomeUnknownData{Code: "timeout_after_send"}).
		Next("", &events.ManualActionRequiredData{Reason: events.ReasonLogEventsLost, Message: "lost", Owner: "operators"}).
		MarkHeld(5)
	proj, _ := openProjection(t, node.JS)
	if v, err := proj.Get(ctx, x.ID()); err != nil || !v.Held {
		t.Fatalf("the view of the held intent: %+v %v", v, err)
	}
	now := func() time.Time { return l.At }
	rep := runAudit(t, node.JS, AuditConfig{Now: now, Projection: proj, Grace: time.Hour, StuckAfter: time.Hour})
	if n := auditByIntent(rep)[x.ID()]; len(n) != 0 || rep.Projection.Compared != 2 {
		t.Fatalf("violations %v, projection %+v", n, rep.Projection)
	}
	held := map[string]HeldIntent{}
	for _, h := range rep.Held {
		held[h.IntentID] = h
	}
	if held[x.ID()].HandedOff || !held[before.ID()].HandedOff {
		t.Fatalf("held %+v", rep.Held)
	}
	x.Next("", &events.ManualActionRequiredData{Reason: events.ReasonLogEventsLost, Message: "lost", Owner: "operators"})
	if err := proj.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	rep = runAudit(t, node.JS, AuditConfig{Now: now, Projection: proj, Grace: time.Hour, StuckAfter: time.Hour})
	for _, h := range rep.Held {
		if !h.HandedOff {
			t.Fatalf("after the hand-off: %+v", h)
		}
	}
	if n := auditByIntent(rep)[x.ID()]; len(n) != 0 {
		t.Fatalf("violations after the hand-off: %v", n)
	}
}
