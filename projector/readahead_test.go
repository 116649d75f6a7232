package projector

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ledger"
)

// fakeMsg is a stream message with what readAhead reads of it.
func fakeMsg(seq, pending uint64) ledger.StreamMsg {
	return ledger.StreamMsg{Seq: seq, Subject: "settle.intents.r.x", Data: []byte("{}"), Pending: pending}
}

// lyingIterator delivers its messages, then none: as a damaged store's
// consumer that counts messages it never delivers.
type lyingIterator struct{ msgs chan ledger.StreamMsg }

func (l lyingIterator) next(ctx context.Context, wait time.Duration) (ledger.StreamMsg, error) {
	var timeout <-chan time.Time
	if wait > 0 {
		timeout = time.After(wait)
	}
	select {
	case m := <-l.msgs:
		return m, nil
	case <-timeout:
		return ledger.StreamMsg{}, errSlow
	case <-ctx.Done():
		return ledger.StreamMsg{}, ctx.Err()
	}
}

// A consumer that says more messages are pending and delivers none (a
// damaged store counting records it cannot read) does not hold back the
// batch it has: the views once stayed about 1,800 events behind the
// stream for minutes, their batch waiting for messages that never came.
func TestReadAheadHandsOnABatchWhosePendingNeverComes(t *testing.T) {
	p := &Projector{cfg: Config{Batch: 100}}
	it := lyingIterator{msgs: make(chan ledger.StreamMsg, 10)}
	for seq := uint64(1); seq <= 3; seq++ {
		it.msgs <- fakeMsg(seq, 10-seq) // "7 more" after the last
	}
	ctx, cancel := context.WithCancel(t.Context())
	batches, wait := p.readAheadFrom(ctx, it)
	defer func() { cancel(); wait() }()
	select {
	case b := <-batches:
		if b.err != nil || len(b.msgs) != 3 || b.msgs[2].seq != 3 {
			t.Fatalf("batch: %d messages, err %v", len(b.msgs), b.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the batch of 3 delivered messages was held back waiting for the 7 the consumer said were pending")
	}
	it.msgs <- fakeMsg(4, 0)
	select {
	case b := <-batches:
		if b.err != nil || len(b.msgs) != 1 || b.msgs[0].seq != 4 {
			t.Fatalf("the next batch: %+v", b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reader stopped after handing on a short batch")
	}
}
