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

// take counts one fault down: whether one was due.
func take(c *atomic.Int32) bool { return c.Add(-1) >= 0 }

// LaggingCopy is a JetStream whose ordered consumers sit on a copy of the
// stream that lags: consumer number n (from 0, in the order they are
// made) holds nothing after sequence cut(n) (0: no lag). A reader opened
// over it must notice and make its consumer again.
type LaggingCopy struct {
	jetstream.JetStream
	cut func(n int) uint64
	n   atomic.Int32
}

// NewLaggingCopy wraps js.
func NewLaggingCopy(js jetstream.JetStream, cut func(n int) uint64) *LaggingCopy {
	return &LaggingCopy{JetStream: js, cut: cut}
}

// OrderedConsumer makes the next consumer, lagging as cut says.
func (l *LaggingCopy) OrderedConsumer(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	c, err := l.JetStream.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, err
	}
	if cut := l.cut(int(l.n.Add(1) - 1)); cut > 0 {
		return &laggingConsumer{Consumer: c, cut: cut}, nil
	}
	return c, nil
}

type laggingConsumer struct {
	jetstream.Consumer
	cut uint64
}

func (c *laggingConsumer) Messages(opts ...jetstream.PullMessagesOpt) (jetstream.MessagesContext, error) {
	it, err := c.Consumer.Messages(opts...)
	if err != nil {
		return nil, err
	}
	return &laggingMessages{MessagesContext: it, cut: c.cut}, nil
}

type laggingMessages struct {
	jetstream.MessagesContext
	cut uint64
}

// Next gives the messages up to the copy's end; after it, nothing comes
// (what the stream holds beyond is passed over until the wait ends).
func (it *laggingMessages) Next(opts ...jetstream.NextOpt) (jetstream.Msg, error) {
	for {
		m, err := it.MessagesContext.Next(opts...)
		if err != nil {
			return nil, err
		}
		md, err := m.Metadata()
		if err != nil || md.Sequence.Stream <= it.cut {
			return m, err
		}
	}
}
