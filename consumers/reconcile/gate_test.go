package reconcile

import (
	"context"
	"testing"
	"time"
)

func gateIsOpen(g *commitGate) bool {
	select {
	case <-g.open:
		return true
	default:
		return false
	}
}

// The gate opens when the last step of the fetch comes to it (or ends
// without a unit), and lets a step that comes after it opened through.
func TestCommitGateOpensWhenEveryStepCame(t *testing.T) {
	g := newCommitGate(3)
	g.arrive()
	g.arrive()
	if gateIsOpen(g) {
		t.Fatal("open with a step still reading")
	}
	g.arrive()
	if !gateIsOpen(g) {
		t.Fatal("shut after every step came")
	}
	g.arrive() // a late comer (another commit of a step) passes
	g.wait(context.Background())
	if !gateIsOpen(newCommitGate(0)) {
		t.Fatal("a fetch without steps has its gate shut")
	}
}

// A step still reading holds the others at most gateLinger after the
// first came.
func TestCommitGateOpensAfterTheLinger(t *testing.T) {
	g := newCommitGate(2)
	start := time.Now()
	g.arrive()
	g.wait(context.Background())
	if waited := time.Since(start); waited < gateLinger || waited > gateLinger+5*time.Second {
		t.Fatalf("waited %v at the gate, want about %v", waited, gateLinger)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h := newCommitGate(2)
	h.arrive()
	h.wait(ctx) // returns: the worker is stopping
}

// A step gives its place up while it waits at the gate and appends, so
// that another intent is read meanwhile; a step that ends without a unit
// is counted as come.
func TestTicketGivesItsPlaceUpAtTheGate(t *testing.T) {
	ctx := context.Background()
	calls := make(chan struct{}, 1)
	g := newCommitGate(2)
	a, b := &ticket{calls: calls, gate: g}, &ticket{calls: calls, gate: g}
	a.acquire(ctx)
	waited := make(chan struct{})
	go func() { a.ready(ctx); close(waited) }()
	b.acquire(ctx) // only once a gave its place up
	select {
	case <-waited:
		t.Fatal("a passed the gate before b came")
	default:
	}
	b.done() // b ends without a unit
	<-waited
	a.acquire(ctx) // a may read again (a lost CAS)
	a.done()
	if len(calls) != 0 {
		t.Fatalf("%d places still held", len(calls))
	}
	var none *ticket // Step, the sweep: no place to keep, no gate
	none.acquire(ctx)
	none.ready(ctx)
	none.release()
	none.done()
}
