package ledger

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pubAck is what JetStream answers a publish or an atomic batch's commit:
// the stream and sequence of the (last) message stored, whether it was a
// duplicate, the batch and its count, or the server's refusal.
type pubAck struct {
	Stream    string              `json:"stream"`
	Sequence  uint64              `json:"seq"`
	Duplicate bool                `json:"duplicate,omitempty"`
	BatchID   string              `json:"batch,omitempty"`
	Count     int                 `json:"count,omitempty"`
	Error     *jetstream.APIError `json:"error,omitempty"`
}

// parseAck reads an ack.
func parseAck(data []byte) (pubAck, error) {
	var a pubAck
	if err := json.Unmarshal(data, &a); err != nil {
		return pubAck{}, err
	}
	return a, nil
}

// publishAcked publishes m and waits for its ack, as jetstream's PublishMsg
// does (a "no responders" answer, seen while a stream's leader moves, is
// retried twice a quarter of a second apart), and returns the ack or the
// server's refusal (a jetstream.JetStreamError).
func (s *Store) publishAcked(ctx context.Context, m *nats.Msg) (pubAck, error) {
	nc := s.js.Conn()
	resp, err := nc.RequestMsgWithContext(ctx, m)
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < jetstream.DefaultPubRetryAttempts; r++ {
		select {
		case <-ctx.Done():
		case <-time.After(jetstream.DefaultPubRetryWait):
		}
		resp, err = nc.RequestMsgWithContext(ctx, m)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		// No stream on the subject, or no leader, after the retries.
		return pubAck{}, jetstream.ErrNoStreamResponse
	}
	if err != nil {
		return pubAck{}, err
	}
	a, err := parseAck(resp.Data)
	if err != nil {
		return pubAck{}, errors.Wrapf(jetstream.ErrInvalidJSAck, "ack %q", resp.Data)
	}
	if a.Error != nil {
		return pubAck{}, errors.Errorf("nats: %w", a.Error)
	}
	if a.Stream == "" {
		return pubAck{}, errors.Wrapf(jetstream.ErrInvalidJSAck, "ack %q", resp.Data)
	}
	return a, nil
}
