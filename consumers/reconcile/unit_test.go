package reconcile

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// logged is one message of an intent's subject as the stream holds it.
type logged struct {
	seq      uint64
	appendID string
	e        events.Event
}

// logOf reads the intent's messages from the stream itself, with their
// sequences and append ids.
func (w *world) logOf(intentID string) []logged {
	w.t.Helper()
	ctx := context.Background()
	subject := events.Subject("social_post", intentID)
	info, err := w.store.Stream().Info(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []logged
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := w.store.Stream().GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			w.t.Fatal(err)
		}
		if m.Subject != subject {
			continue
		}
		e, err := events.Decode(m.Data)
		if err != nil {
			w.t.Fatal(err)
		}
		out = append(out, logged{seq: m.Sequence, appendID: m.Header.Get(ledger.AppendIDHeader), e: e})
	}
	return out
}

func loggedTypes(l []logged) []events.Type {
	out := make([]events.Type, len(l))
	for k, m := range l {
		out[k] = m.e.Type
	}
	return out
}

// A check that confirms appends its three events as one unit: one append
// (one append id), contiguous on the stream, CAS'd on the event the step
// read; nothing of it is on the log before the reads are done.
func TestACheckAppendsItsEventsAsOneUnit(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.CommitThenDrop())
	res := w.execute("task:1", "hello")
	before := len(w.logOf(res.IntentID))
	r := w.reconciler("w1", nil)
	var seen []int // the intent's messages on the log when each read step began
	r.hookStep = func(i *fsm.Intent, st fsm.Step) error {
		if st.Kind == fsm.StepReconcile || st.Kind == fsm.StepVerify {
			seen = append(seen, len(w.logOf(res.IntentID)))
		}
		return nil
	}
	sr, err := r.Step(context.Background(), "social_post", res.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	want := []events.Type{events.ReconcileStarted, events.CandidateFound, events.ReadbackPassed}
	if !sr.Done || sr.State != fsm.Confirmed || !slices.Equal(sr.Appended, want) {
		t.Fatalf("step %+v, want done, confirmed, appended %v", sr, want)
	}
	if !slices.Equal(seen, []int{before, before}) {
		t.Fatalf("the log held %v messages of the intent when the search and the readback began, want %d both times (nothing appended before the reads)", seen, before)
	}
	l := w.logOf(res.IntentID)
	if len(l) != before+3 || !slices.Equal(loggedTypes(l[before:]), want) {
		t.Fatalf("log %v", loggedTypes(l))
	}
	unit := l[before:]
	for k, m := range unit {
		if m.appendID == "" || m.appendID != unit[0].appendID {
			t.Errorf("event %s has append id %q, want the unit's %q", m.e.Type, m.appendID, unit[0].appendID)
		}
		if m.seq != unit[0].seq+uint64(k) {
			t.Errorf("event %s at sequence %d, want %d (the unit contiguous)", m.e.Type, m.seq, unit[0].seq+uint64(k))
		}
		if m.e.Actor != "w1" {
			t.Errorf("event %s by %q", m.e.Type, m.e.Actor)
		}
	}
	if unit[0].appendID == l[before-1].appendID {
		t.Fatal("the unit shares the writer's append id")
	}
	if w.api.Effects() != 1 || w.api.Writes() != 1 {
		t.Fatalf("effects %d writes %d", w.api.Effects(), w.api.Writes())
	}
}

// Two workers check one intent at once: the one whose unit lands second
// finds its CAS lost and appends none of its events (no ReconcileStarted
// of its own is left behind), and the intent is settled once.
func TestACheckLostToAnotherWorkerAppendsNothing(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.CommitThenDrop())
	res := w.execute("task:1", "hello")
	before := len(w.logOf(res.IntentID))
	slow, fast := w.reconciler("slow", nil), w.reconciler("fast", nil)
	ran := false
	slow.hookStep = func(i *fsm.Intent, st fsm.Step) error {
		if st.Kind != fsm.StepVerify || ran {
			return nil
		}
		// slow has searched and is about to read back: fast settles the
		// intent meanwhile.
		ran = true
		fr, err := fast.Step(context.Background(), "social_post", res.IntentID)
		if err != nil || fr.State != fsm.Confirmed {
			t.Errorf("fast: %+v %v", fr, err)
		}
		return nil
	}
	sr, err := slow.Step(context.Background(), "social_post", res.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	if !ran || !sr.Done || sr.State != fsm.Confirmed || len(sr.Appended) != 0 {
		t.Fatalf("slow: %+v (fast ran: %t)", sr, ran)
	}
	l := w.logOf(res.IntentID)
	want := []events.Type{events.ReconcileStarted, events.CandidateFound, events.ReadbackPassed}
	if !slices.Equal(loggedTypes(l[before:]), want) {
		t.Fatalf("log %v", loggedTypes(l))
	}
	for _, m := range l[before:] {
		if m.e.Actor != "fast" {
			t.Fatalf("event %s by %s: the lost unit left an event", m.e.Type, m.e.Actor)
		}
	}
	if w.api.Effects() != 1 || w.api.Writes() != 1 {
		t.Fatalf("effects %d writes %d", w.api.Effects(), w.api.Writes())
	}
}

// A worker that dies between its reads leaves nothing on the log: no
// ReconcileStarted whose lease another worker would have to wait out. The
// next worker settles the intent at once, the clock standing still.
func TestAWorkerThatDiesMidCheckLeavesNoLease(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.CommitThenDrop())
	res := w.execute("task:1", "hello")
	before := w.logOf(res.IntentID)
	dying := w.reconciler("dying", nil)
	killed := errors.New("worker killed")
	dying.hookStep = func(i *fsm.Intent, st fsm.Step) error {
		if st.Kind == fsm.StepVerify {
			return killed
		}
		return nil
	}
	if _, err := dying.Step(context.Background(), "social_post", res.IntentID); !errors.Is(err, killed) {
		t.Fatalf("dying: %v", err)
	}
	if l := w.logOf(res.IntentID); len(l) != len(before) {
		t.Fatalf("the dead worker's check left %v", loggedTypes(l[len(before):]))
	}
	sr, err := w.reconciler("survivor", nil).Step(context.Background(), "social_post", res.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	want := []events.Type{events.ReconcileStarted, events.CandidateFound, events.ReadbackPassed}
	if !sr.Done || sr.State != fsm.Confirmed || !slices.Equal(sr.Appended, want) {
		t.Fatalf("survivor: %+v", sr)
	}
	l := w.logOf(res.IntentID)
	if !slices.Equal(loggedTypes(l[len(before):]), want) {
		t.Fatalf("log %v", loggedTypes(l))
	}
	if d := l[len(before)].e.Data.(*events.ReconcileStartedData); d.Worker != "survivor" || d.Check != 1 {
		t.Fatalf("ReconcileStarted %+v", d)
	}
}

// A retry's claim is appended and acknowledged before the write, in the
// unit of the check that allowed it (the search whose window closed
// empty), and the write follows it: never the other way round.
func TestARetryClaimIsOnTheLogBeforeTheWrite(t *testing.T) {
	w := newWorld(t, nil)
	w.api.Next(fakeapi.ResetBeforeCommit())
	res := w.execute("task:1", "hello")
	r := w.reconciler("w1", nil)
	claimed := 0
	r.hookAfterClaim = func(id string) error {
		claimed++
		l := w.logOf(id)
		last := l[len(l)-1]
		d, ok := last.e.Data.(*events.RetryClaimedData)
		if !ok || d.Owner != "w1" || w.api.Writes() != 1 {
			t.Errorf("before the write: last event %s, %d writes", last.e.Type, w.api.Writes())
			return nil
		}
		// The claim came in one unit with the check that concluded
		// not_found.
		n := len(l)
		unit := loggedTypes(l[n-3:])
		if !slices.Equal(unit, []events.Type{events.ReconcileStarted, events.SearchWindowElapsed, events.RetryClaimed}) ||
			l[n-3].appendID != last.appendID || l[n-2].appendID != last.appendID {
			t.Errorf("the claim's unit: %v", unit)
		}
		return nil
	}
	i := w.settle(r, res.IntentID)
	if claimed != 1 || i.State != fsm.Confirmed || w.api.Writes() != 2 || w.api.Effects() != 1 {
		t.Fatalf("claimed %d, state %s, writes %d, effects %d", claimed, i.State, w.api.Writes(), w.api.Effects())
	}
	l := w.logOf(res.IntentID)
	var claim, started uint64
	for _, m := range l {
		switch d := m.e.Data.(type) {
		case *events.RetryClaimedData:
			claim = m.seq
		case *events.WriteStartedData:
			if d.Attempt == 2 {
				started = m.seq
			}
		}
	}
	if claim == 0 || started <= claim {
		t.Fatalf("claim at %d, second WriteStarted at %d: %v", claim, started, loggedTypes(l))
	}
}
