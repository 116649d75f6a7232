package projector

import (
	"context"
	"sync"

	"github.com/cockroachdb/errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
)

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
	out := make(chan readBatch, 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		next := func() (rawMsg, error) {
			m, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				return rawMsg{}, err
			}
			meta, err := m.Metadata()
			if err != nil {
				return rawMsg{}, errors.Errorf("message metadata: %w", err)
			}
			r := rawMsg{seq: meta.Sequence.Stream, subject: m.Subject(), data: m.Data(), pending: meta.NumPending,
				held: m.Headers().Get(events.HoldHeader) != ""}
			r.decode()
			return r, nil
		}
		for {
			m, err := next()
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
			for m.pending > 0 && len(batch) < limit {
				if m, err = next(); err != nil {
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
