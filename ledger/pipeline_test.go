package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/testharness"
)

// heldCommit holds the first atomic batch's commit until released (its
// messages are on the server, staged, its ack not yet asked for); with
// loseAck that batch then lands but its ack is lost. Later commits pass.
type heldCommit struct {
	jetstream.JetStream
	loseAck  bool
	calls    atomic.Int32
	entered  chan struct{}
	released chan struct{}
}

func newHeldCommit(js jetstream.JetStream, loseAck bool) *heldCommit {
	return &heldCommit{JetStream: js, loseAck: loseAck, entered: make(chan struct{}), released: make(chan struct{})}
}

func (h *heldCommit) RequestMsgWithContext(ctx context.Context, m *nats.Msg) (*nats.Msg, error) {
	first := h.calls.Add(1) == 1
	if first {
		close(h.entered)
		<-h.released
	}
	resp, err := h.Conn().RequestMsgWithContext(ctx, m)
	if first && err == nil && h.loseAck {
		return nil, nats.ErrTimeout
	}
	return resp, err
}

// unitsCall is AppendUnits run in its own goroutine.
type unitsCall struct {
	done chan struct{}
	seqs [][]uint64
	errs []error
}

func appendUnitsAsync(s *ledger.Store, evs [][]events.Event) *unitsCall {
	c := &unitsCall{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.seqs, c.errs = s.AppendUnits(context.Background(), "social_post", evs, make([]uint64, len(evs)))
	}()
	return c
}

func singles(t *testing.T, prefix string, k int) [][]events.Event {
	evs := make([][]events.Event, k)
	for i := range evs {
		evs[i] = []events.Event{recordedEvent(t, fmt.Sprintf("%s-%d", prefix, i))}
	}
	return evs
}

func (c *unitsCall) finished() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// holdFirstBatch opens a store whose batches hold at most 8 messages (so
// a full batch of 8 goes while another is in flight), appends 4 new intents
// named after prefix as its first batch and returns once that batch's
// commit is held.
func holdFirstBatch(t *testing.T, loseAck bool, prefix string) (*ledger.Store, *heldCommit, [][]events.Event, *unitsCall) {
	n := testharness.StartNode(t)
	held := newHeldCommit(n.JS, loseAck)
	s := testharness.OpenStore(t, held, testharness.BatchMin(2), func(c *ledger.StoreConfig) { c.BatchMax = 8 })
	first := singles(t, prefix, 4)
	one := appendUnitsAsync(s, first)
	<-held.entered
	return s, held, first, one
}

// While one batch waits for its commit, a second full one goes and
// commits; a smaller one, and a unit on a subject of the batch in
// flight (a competitor's version 1 of an intent being recorded), wait.
// The competitor then goes after the first batch landed and is told
// ErrConflict; the log holds each intent's one event, the first batch's.
func TestGroupCommitPipelinesALargeSecondBatch(t *testing.T) {
	s, held, first, one := holdFirstBatch(t, false, "first")
	rival := recordedEvent(t, "first-0")
	rival.Actor = "rival" // same version of the same intent, other bytes
	competitor := appendUnitsAsync(s, [][]events.Event{{rival}})
	waitFor(t, func() bool { return s.QueuedUnits() == 1 })
	// Too small to pipeline (1 message of the 8 a second batch needs).
	time.Sleep(50 * time.Millisecond)
	if s.QueuedUnits() != 1 || competitor.finished() {
		t.Fatalf("a small flush went while a batch was in flight (%d queued)", s.QueuedUnits())
	}

	second := singles(t, "second", 8)
	two := appendUnitsAsync(s, second)
	select {
	case <-two.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the second batch did not commit while the first was held")
	}
	for i, err := range two.errs {
		if err != nil {
			t.Fatalf("second batch append %d: %v", i, err)
		}
	}
	if one.finished() || competitor.finished() || s.QueuedUnits() != 1 {
		t.Fatalf("first done %v, competitor done %v, %d queued: want the competitor to wait for the first batch",
			one.finished(), competitor.finished(), s.QueuedUnits())
	}

	close(held.released)
	<-one.done
	<-competitor.done
	for i, err := range one.errs {
		if err != nil {
			t.Fatalf("first batch append %d: %v", i, err)
		}
	}
	if !errors.Is(competitor.errs[0], ledger.ErrConflict) {
		t.Fatalf("competitor: %v, want ErrConflict", competitor.errs[0])
	}
	for i, evs := range append(first, second...) {
		msgs := testharness.RawHistory(t, s, "social_post", evs[0].IntentID)
		if len(msgs) != 1 {
			t.Fatalf("intent %d: %d messages on the log, want 1", i, len(msgs))
		}
	}
	if h, err := s.Load(context.Background(), "social_post", first[0][0].IntentID); err != nil || h.Events[0].Actor != "test" {
		t.Fatalf("the first batch's event is not the one on the log: %v %v", h, err)
	}
	// Staged first, committed second: the log orders batches by commit.
	if one.seqs[0][0] < two.seqs[7][0] {
		t.Fatalf("the first batch, committed after the second, holds seq %d before the second's %d", one.seqs[0][0], two.seqs[7][0])
	}
	if st := s.BatchStats(); st.Batches != 2 || st.Messages != 12 {
		t.Fatalf("stats %+v, want batches of 4 and 8", st)
	}
}

// A batch whose ack is lost while a second one commits: the second is not
// touched, and each append of the first is resolved alone by reading the
// log (its event landed once, under its append id).
func TestGroupCommitLostAckWhileAnotherBatchIsInFlight(t *testing.T) {
	s, held, first, one := holdFirstBatch(t, true, "lost")
	second := singles(t, "beside", 8)
	two := appendUnitsAsync(s, second)
	<-two.done
	close(held.released)
	<-one.done
	for i, c := range []*unitsCall{one, two} {
		for j, err := range c.errs {
			if err != nil {
				t.Fatalf("batch %d append %d: %v", i+1, j, err)
			}
		}
	}
	for i, evs := range append(first, second...) {
		msgs := testharness.RawHistory(t, s, "social_post", evs[0].IntentID)
		if len(msgs) != 1 {
			t.Fatalf("intent %d: %d messages on the log, want 1", i, len(msgs))
		}
		seqs := one.seqs
		if i >= len(first) {
			seqs, i = two.seqs, i-len(first)
		}
		if msgs[0].Sequence != seqs[i][0] {
			t.Fatalf("intent %d: log seq %d, append said %d", i, msgs[0].Sequence, seqs[i][0])
		}
	}
	if st := s.BatchStats(); st.Lost != 1 || st.Batches != 1 || st.Alone != 4 {
		t.Fatalf("stats %+v: want the second batch committed and the lost one's 4 appends resolved alone", st)
	}
}
