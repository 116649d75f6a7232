package ledger

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/settle-dev/settle/events"
)

// AppendAs is Append under a given append id: a test plays a writer whose
// earlier publish (with that id) landed but whose ack was lost.
func (s *Store) AppendAs(ctx context.Context, route string, e events.Event, expectedLastSeq uint64, appendID string) (uint64, error) {
	return s.appendAs(ctx, route, e, expectedLastSeq, appendID)
}

// AppendUnits submits appends to the group commit in one go (an idle
// flusher takes them together) and waits for each: one entry of evs per
// Append call, with its expected last subject sequence.
func (s *Store) AppendUnits(ctx context.Context, route string, evs [][]events.Event, expected []uint64) ([][]uint64, []error) {
	units := make([]*unit, len(evs))
	seqs, errs := make([][]uint64, len(evs)), make([]error, len(evs))
	for i := range evs {
		units[i], errs[i] = s.newUnit(route, evs[i], expected[i], s.newAppendID())
		if errs[i] != nil {
			return seqs, errs
		}
	}
	s.batch.submit(units...)
	var wg sync.WaitGroup
	for i, u := range units {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seqs[i], errs[i] = s.await(ctx, u)
		}()
	}
	wg.Wait()
	return seqs, errs
}

// Append ids are what tells one Append call's message from another's with
// the same bytes: they must not repeat.
func TestAppendIDsAreUniqueAndHeaderSafe(t *testing.T) {
	seen := map[string]bool{}
	s := &Store{}
	for k := 0; k < 10000; k++ {
		id := s.newAppendID()
		if len(id) != 24 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("append id %q is not 24 hex characters", id)
		}
		if seen[id] {
			t.Fatalf("append id %q repeated after %d", id, k)
		}
		seen[id] = true
	}
	w := &Store{cfg: StoreConfig{Writer: "p123-4f2a"}}
	id := w.newAppendID()
	if !strings.HasPrefix(id, "p123-4f2a.") || WriterOf(id) != "p123-4f2a" || WriterOf(s.newAppendID()) != "" {
		t.Fatalf("a writer's append id %q names %q", id, WriterOf(id))
	}
	for _, bad := range []string{"a.b", "a b", strings.Repeat("w", 65)} {
		c := DefaultStoreConfig()
		c.Writer = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Writer") {
			t.Errorf("Writer %q: %v", bad, err)
		}
	}
}

// Flushers is StoreConfig.flushers, for tests.
func Flushers(c StoreConfig) int { return c.flushers() }

// HoldFlusherPlace takes the flusher's place as a lone append on an idle
// batcher does while it publishes; ReleaseFlusherPlace gives it back.
func (s *Store) HoldFlusherPlace() bool { return s.batch.takeIdle() }
func (s *Store) ReleaseFlusherPlace()   { s.batch.releaseIdle() }

// QueuedUnits is how many units wait for a flush.
func (s *Store) QueuedUnits() int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.queue)
}

// FlushersRunning is how many flushers (or lone appends holding a
// flusher's place) are at work.
func (s *Store) FlushersRunning() int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return s.batch.running
}

// DuplicatesInProcess counts publishes answered "duplicate message id is
// in process" (10158) and resolved like lost acks.
func (s *Store) DuplicatesInProcess() int64 { return s.dupInProcess.Load() }

// Last is the sequence of the last message delivered (From-1 before any).
func (r *Reader) Last() uint64 { return r.last }
