package projector

import (
	"context"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
)

// batchWait bounds the wait for the next message of a batch the server
// says has more pending (between half of it and it: readerNext).
const batchWait = 500 * time.Millisecond

// errSlow: the next message of a batch did not come within batchWait.
var errSlow = errors.New("projector: the next message of a batch is slow to come")

// readBatch is a run of consecutive messages read and decoded ahead of
// the applier, and the error that ended the run, if any.
type readBatch struct {
	msgs []rawMsg
	err  error
}

// nexter is what readAhead needs of a reader: the next message, waiting
// until ctx ends (wait 0) or at most wait (errSlow).
type nexter interface {
	next(ctx context.Context, wait time.Duration) (ledger.StreamMsg, error)
}

// readerNext is a ledger.Reader as a nexter. A wait is bounded by a
// deadline context made again only when less than half of wait is left
// on it (not one per message), so a wait for the rest of a batch lasts
// between wait/2 and wait.
type readerNext struct {
	rd       *ledger.Reader
	wctx     context.Context
	cancel   context.CancelFunc
	deadline time.Time
	parent   context.Context
}

func (r *readerNext) next(ctx context.Context, wait time.Duration) (ledger.StreamMsg, error) {
	if wait <= 0 {
		return r.rd.Next(ctx)
	}
	if now := time.Now(); r.wctx == nil || r.parent != ctx || r.deadline.Sub(now) < wait/2 {
		r.stop()
		r.deadline = now.Add(wait)
		r.parent = ctx
		r.wctx, r.cancel = context.WithDeadline(ctx, r.deadline)
	}
	m, err := r.rd.Next(r.wctx)
	if err != nil && r.wctx.Err() != nil && ctx.Err() == nil {
		r.stop()
		return ledger.StreamMsg{}, errSlow
	}
	return m, err
}

// stop releases the deadline context, if any.
func (r *readerNext) stop() {
	if r.cancel != nil {
		r.cancel()
	}
	r.wctx, r.cancel, r.parent = nil, nil, nil
}

// readAhead reads the stream with rd on its own goroutine, decodes the
// messages there, and hands them on in batches of up to cfg.Batch (during
// an unsynced catch-up, unsyncedBatchFactor times that; a batch ends early
// when nothing more is pending, or when the next message is slow to come),
// in stream order: decoding the next batch overlaps with applying this
// one. wait ends the reader (after ctx is cancelled) and waits for it.
func (p *Projector) readAhead(ctx context.Context, rd *ledger.Reader) (<-chan readBatch, func()) {
	rn := &readerNext{rd: rd}
	out, wait := p.readAheadFrom(ctx, rn)
	return out, func() {
		wait()
		rn.stop()
		rd.Close()
	}
}

func (p *Projector) readAheadFrom(ctx context.Context, it nexter) (<-chan readBatch, func()) {
	out := make(chan readBatch, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(out)
		next := func(wait time.Duration) (rawMsg, error) {
			m, err := it.next(ctx, wait)
			if err != nil {
				return rawMsg{}, err
			}
			r := rawMsg{seq: m.Seq, subject: m.Subject, data: m.Data, pending: m.Pending,
				held: m.Header.Get(events.HoldHeader) != ""}
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
			batch := append(p.batchSlice(int(min(uint64(limit), m.pending+1))), m)
			for m.pending > 0 && len(batch) < limit && ctx.Err() == nil {
				// The rest of a batch is what the server says is pending;
				// a damaged store can count messages it never delivers, so
				// the batch is handed on when the next one is slow to come
				// (it then starts the next batch).
				if m, err = next(batchWait); err != nil {
					if errors.Is(err, errSlow) {
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
	})
	return out, func() {
		// The applier has returned: stop the reader and wait for it.
		for range out {
		}
		wg.Wait()
	}
}

// batchSlice returns an empty slice for a batch of up to n messages: one
// the applier is done with (recycle), or a new one. A spare far larger
// than n is let go: a projector that caught up and follows the
// stream in small batches does not keep a catch-up's.
func (p *Projector) batchSlice(n int) []rawMsg {
	select {
	case b := <-p.spare:
		if cap(b) >= n && cap(b) <= max(4*n, 1024) {
			return b
		}
	default:
	}
	return make([]rawMsg, 0, n)
}

// recycle hands a batch the applier is done with back to the read-ahead,
// without what its messages referenced.
func (p *Projector) recycle(b []rawMsg) {
	clear(b)
	select {
	case p.spare <- b[:0]:
	default:
	}
}
