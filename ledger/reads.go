package ledger

import (
	"context"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"
)

// Reads of the log are bounded like appends: each message get waits at
// most AppendTimeout and is tried up to AppendAttempts times. A caller's
// context alone is not enough: on a replicated stream a get goes to the
// stream leader, and a request sent while the leader is being replaced
// (killed, partitioned) is answered by nobody — it would wait for the
// caller's whole deadline (a submit's three minutes) instead of asking
// the new leader a few seconds later.

// getMsg is stream.GetMsg, bounded and retried.
func (s *Store) getMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	return s.boundedRead(ctx, func(rctx context.Context) (*jetstream.RawStreamMsg, error) {
		return s.stream.GetMsg(rctx, seq, opts...)
	})
}

// getLastMsgForSubject is stream.GetLastMsgForSubject, bounded and retried.
func (s *Store) getLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	return s.boundedRead(ctx, func(rctx context.Context) (*jetstream.RawStreamMsg, error) {
		return s.stream.GetLastMsgForSubject(rctx, subject)
	})
}

func (s *Store) boundedRead(ctx context.Context, get func(context.Context) (*jetstream.RawStreamMsg, error)) (*jetstream.RawStreamMsg, error) {
	var err error
	for attempt := 0; attempt < s.cfg.AppendAttempts; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(attempt) * 100 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, errors.CombineErrors(err, ctx.Err())
			case <-t.C:
			}
		}
		if cerr := s.connected(ctx); cerr != nil {
			return nil, errors.CombineErrors(cerr, err)
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.AppendTimeout)
		var m *jetstream.RawStreamMsg
		m, err = get(rctx)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) || ctx.Err() != nil {
			return m, err
		}
		// No answer, no responder, no leader yet: ask again.
	}
	return nil, err
}
