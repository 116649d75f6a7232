package projector

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

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
