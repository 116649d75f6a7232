package producer_test

import (
	"time"

	"context"
	"testing"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// An operator's abandonment records effect_possible by the same rule as
// the decider's (fsm.Intent.AnyEffectPossible): a rejection saying the
// idempotency key was already used (an older log, a mistaken adapter) is
// evidence that an earlier request reached the API, never a proven
// rejection. Recorded without effect_possible, the abandonment tells the
// agent (mcp) that nothing was done, inviting a second write under a new
// request id.
func TestOperatorAbandonAfterKeyReusedKeepsEffectPossible(t *testing.T) {
	n := testharness.StartNode(t)
	store := testharness.OpenStore(t, n.JS)
	l := testharness.NewHandLog(t, n.JS, store, t0)
	x := l.RecordStarted("order-1")
	x.Next(x.Attempt(1), &events.WriteRejectedData{Code: events.CodeKeyReused, StatusCode: 400,
		Message: "the key was used with other parameters"})
	pc := producer.DefaultConfig()
	pc.Actor, pc.Now = "writer-1", func() time.Time { return l.Tick() }
	p, err := producer.New(store, pc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h, i, err := p.Load(ctx, x.ID())
	if err != nil {
		t.Fatal(err)
	}
	if i.State != fsm.Rejected || !i.AnyEffectPossible() {
		t.Fatalf("state %s, effect possible %v; want rejected with an effect possible", i.State, i.AnyEffectPossible())
	}
	if err := p.Abandon(ctx, h, i, "op", "the customer cancelled"); err != nil {
		t.Fatal(err)
	}
	// What the log holds, read again.
	_, i, err = p.Load(ctx, x.ID())
	if err != nil {
		t.Fatal(err)
	}
	last := i.LastType
	if i.State != fsm.Abandoned || last != events.Abandoned || !i.EffectPossible {
		t.Fatalf("state %s, last %s, effect possible %v; want abandoned with effect_possible (the key-reused attempt may have executed)", i.State, last, i.EffectPossible)
	}
}
