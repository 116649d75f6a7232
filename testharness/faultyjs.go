package testharness

import (
	"context"
	"sync/atomic"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BatchFaults is a JetStream whose stores lose atomic batches on demand:
// a store opened over it sends each batch's commit through it (ledger's
// committer), and it drops the next commits or loses the next acks it is
// told to. Everything else is the wrapped JetStream's.
type BatchFaults struct {
	jetstream.JetStream
	dropCommit, loseAck atomic.Int32
}

// NewBatchFaults wraps js.
func NewBatchFaults(js jetstream.JetStream) *BatchFaults { return &BatchFaults{JetStream: js} }

// DropCommits makes the next n atomic batches never send their commit (the
// batch does not land; its ack never comes), as a connection lost
// mid-batch would.
func (f *BatchFaults) DropCommits(n int32) { f.dropCommit.Store(n) }

// LoseAcks makes the next n committed atomic batches lose their ack (the
// batch landed; its caller cannot know).
func (f *BatchFaults) LoseAcks(n int32) { f.loseAck.Store(n) }

// RequestMsgWithContext sends a batch's commit and waits for its ack,
// unless a fault is due.
func (f *BatchFaults) RequestMsgWithContext(ctx context.Context, m *nats.Msg) (*nats.Msg, error) {
	if take(&f.dropCommit) {
		return nil, errors.New("commit dropped")
	}
	resp, err := f.Conn().RequestMsgWithContext(ctx, m)
	if err == nil && take(&f.loseAck) {
		return nil, nats.ErrTimeout
	}
	return resp, err
}

// take counts one fault down, if one is due.
func take(c *atomic.Int32) bool {
	for {
		n := c.Load()
		if n <= 0 {
			return false
		}
		if c.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
