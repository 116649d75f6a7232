package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
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

// parseAck reads an ack. The shapes nats-server writes by hand
// (`{"stream":…,["domain":…,]"seq":N}`, with `,"duplicate": true` and/or
// `,"batch":…,"count":N` before the brace) are read directly; anything
// else (a refusal, another server's spelling) by encoding/json. Both read
// the same (TestParseAckAgrees, FuzzParseAckAgrees): the ack's JSON was a
// tenth of an Execute's own CPU.
func parseAck(data []byte) (pubAck, error) {
	if a, ok := parseAckFast(data); ok {
		return a, nil
	}
	var a pubAck
	if err := json.Unmarshal(data, &a); err != nil {
		return pubAck{}, err
	}
	return a, nil
}

// parseAckFast reads the hand-written shapes only; ok is false on
// anything else.
func parseAckFast(data []byte) (a pubAck, ok bool) {
	rest, ok := bytes.CutPrefix(data, []byte(`{"stream":`))
	if !ok {
		return pubAck{}, false
	}
	if a.Stream, rest, ok = plainString(rest); !ok || a.Stream == "" {
		return pubAck{}, false
	}
	if r, found := bytes.CutPrefix(rest, []byte(`,"domain":`)); found {
		if _, rest, ok = plainString(r); !ok {
			return pubAck{}, false
		}
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"seq":`)); !ok {
		return pubAck{}, false
	}
	if a.Sequence, rest, ok = plainUint(rest); !ok {
		return pubAck{}, false
	}
	if r, found := bytes.CutPrefix(rest, []byte(`,"duplicate": true`)); found {
		a.Duplicate, rest = true, r
	}
	if r, found := bytes.CutPrefix(rest, []byte(`,"batch":`)); found {
		if a.BatchID, rest, ok = plainString(r); !ok {
			return pubAck{}, false
		}
		if rest, ok = bytes.CutPrefix(rest, []byte(`,"count":`)); !ok {
			return pubAck{}, false
		}
		var n uint64
		if n, rest, ok = plainUint(rest); !ok || n > 1<<31-1 {
			return pubAck{}, false
		}
		a.Count = int(n)
	}
	if string(rest) != "}" {
		return pubAck{}, false
	}
	return a, true
}

// plainString reads a JSON string without escapes or control characters
// (as valid UTF-8) from the front of b.
func plainString(b []byte) (string, []byte, bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			s := b[1:i]
			if !isPlainText(s) {
				return "", nil, false
			}
			return string(s), b[i+1:], true
		case c == '\\' || c < 0x20:
			return "", nil, false
		}
	}
	return "", nil, false
}

// isPlainText: ASCII only, so that the string is what encoding/json reads
// (it replaces invalid UTF-8).
func isPlainText(s []byte) bool {
	for _, c := range s {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// plainUint reads a JSON unsigned integer (no sign, no leading zero, no
// fraction or exponent, no overflow) from the front of b.
func plainUint(b []byte) (uint64, []byte, bool) {
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == 0 || (i > 1 && b[0] == '0') || (i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E')) {
		return 0, nil, false
	}
	n, err := strconv.ParseUint(string(b[:i]), 10, 64)
	if err != nil {
		return 0, nil, false
	}
	return n, b[i:], true
}

// errNoResponse: nothing answered the publish (no stream on the subject, or
// no leader), after the retries.
var errNoResponse = jetstream.ErrNoStreamResponse

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
		return pubAck{}, errNoResponse
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
