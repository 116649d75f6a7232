package projector

import (
	"context"
	"sync"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
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
func (p *Projector) readAhead(ctx context.Context, rd *ledger.Reader) (<-chan readBatch, func()) {
	out := make(chan readBatch, 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		defer rd.Close()
		next := func() (rawMsg, error) {
			m, err := rd.Next(ctx)
			if err != nil {
				return rawMsg{}, err
			}
			r := rawMsg{seq: m.Seq, subject: m.Subject, data: m.Data, pending: m.Pending,
				held: m.Header.Get(events.HoldHeader) != ""}
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
