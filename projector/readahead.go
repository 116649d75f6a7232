package projector

import (
	"context"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// batchWait bounds the wait for the next message of a batch the server
// says has more pending.
const batchWait = 500 * time.Millisecond

// readBatch is a run of consecutive messages read and decoded ahead of
// the applier, and the error that ended the run, if any.
type readBatch struct {
	msgs []rawMsg
	err  error
}

// readAhead reads the consumer's messages on its own goroutine, decodes
// them there, and hands them on in batches of up to cfg.Batch (during an
// unsynced catch-up, unsyncedBatchFactor times that; a batch ends early
// when nothing more is pending), in stream order: decoding the
// next batch overlaps with applying this one. wait ends the reader (after
// ctx is cancelled) and waits for it.
func (p *Projector) readAhead(ctx context.Context, it jetstream.MessagesContext) (<-chan readBatch, func()) {
	return p.readAheadFrom(ctx, iterNext{it})
}

// nexter is what readAhead needs of a message iterator: the next message,
// waiting until ctx ends (wait 0) or at most wait (nats.ErrTimeout).
type nexter interface {
	next(ctx context.Context, wait time.Duration) (jetstream.Msg, error)
}

// iterNext is a consumer's message iterator as a nexter.
type iterNext struct{ it jetstream.MessagesContext }

func (i iterNext) next(ctx context.Context, wait time.Duration) (jetstream.Msg, error) {
	if wait > 0 {
		return i.it.Next(jetstream.NextMaxWait(wait))
	}
	return i.it.Next(jetstream.NextContext(ctx))
}

func (p *Projector) readAheadFrom(ctx context.Context, it nexter) (<-chan readBatch, func()) {
	out := make(chan readBatch, 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		next := func(wait time.Duration) (rawMsg, error) {
			m, err := it.next(ctx, wait)
			if err != nil {
				return rawMsg{}, err
			}
			meta, err := m.Metadata()
			if err != nil {
				return rawMsg{}, errors.Errorf("message metadata: %w", err)
			}
			r := rawMsg{seq: meta.Sequence.Stream, subject: m.Subject(), data: m.Data(), pending: meta.NumPending}
			r.decode()
			return r, nil
		}
		for {
			m, err := next(0)
			if err != nil {
				select {
				case out <- readBatch{err: err}:
				case <-ctx.Done():
				}
				return
			}
			limit := p.batchLimit()
			batch := make([]rawMsg, 1, min(uint64(limit), m.pending+1))
			batch[0] = m
			for m.pending > 0 && len(batch) < limit && ctx.Err() == nil {
				// The rest of a batch is what the server says is pending;
				// a damaged store can count messages it never delivers, so
				// the batch is handed on when the next one is slow to come
				// (it then starts the next batch) instead of waiting for
				// it (the views once stayed 1,800 events behind).
				if m, err = next(batchWait); err != nil {
					if errors.Is(err, nats.ErrTimeout) {
						err = nil
					}
					break
				}
				batch = append(batch, m)
			}
			select {
			case out <- readBatch{msgs: batch, err: err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out, func() {
		// The applier has returned: stop the reader and wait for it.
		for range out {
		}
		wg.Wait()
	}
}
