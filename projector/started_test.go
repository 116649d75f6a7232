package projector

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
)

// An IntentStarted (a new intent recorded and started in one message) is
// projected as its intent's version 1 in write_started with its attempt;
// one on another route's subject than the route it records is
// quarantined, as an IntentRecorded would be.
func TestIntentStartedProjectsAndItsRouteIsChecked(t *testing.T) {
	ctx := context.Background()
	lg := newTestLog(t)
	p := openProjector(t, lg.node.JS, "", nil)
	g := newGenerator(3)
	start := func(k int) (string, events.Event) {
		for {
			route, rec := g.recorded(k)
			d := rec.Data.(*events.IntentRecordedData)
			if d.Policy.FirstWrite != events.PolicyAuto {
				continue
			}
			e, ok := events.Join(rec, events.New(rec.IntentID, 2, rec.At, rec.Actor, events.AttemptID(rec.IntentID, 1),
				&events.WriteStartedData{Attempt: 1, IdempotencyKey: d.IdempotencyKey, Deadline: rec.At.Add(time.Minute)}))
			if !ok {
				t.Fatal("join")
			}
			return route, e
		}
	}
	rA, a := start(1)
	seqA := lg.append(rA, a)
	rB, b := start(2)
	other := genRoutes[0]
	if other == rB {
		other = genRoutes[1]
	}
	raw, err := events.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	seqB := lg.publishRaw(events.Subject(other, b.IntentID), raw)
	catchUp(t, p)
	v, err := p.Get(ctx, a.IntentID)
	if err != nil || v.State != fsm.WriteStarted || v.Version != 1 || v.Attempts != 1 || v.LastEventType != events.IntentStarted ||
		v.LastSeq != seqA || !v.CreatedAt.Equal(a.At) {
		t.Fatalf("view %+v, %v", v, err)
	}
	qs, err := p.Quarantined(ctx)
	if err != nil || len(qs) != 1 || qs[0].Seq != seqB || qs[0].Code != QuarantineRouteMismatch {
		t.Fatalf("quarantined %+v, %v", qs, err)
	}
}
