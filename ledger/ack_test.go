package ledger

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// The acks nats-server writes (a publish, a duplicate, an atomic batch's
// commit, a refusal) read as they say; what is not an ack is an error.
func TestParseAck(t *testing.T) {
	for in, want := range map[string]pubAck{
		`{"stream":"SETTLE_INTENTS","seq":1}`:                                    {Stream: "SETTLE_INTENTS", Sequence: 1},
		`{"stream":"SETTLE_INTENTS","domain":"hub","seq":42}`:                    {Stream: "SETTLE_INTENTS", Sequence: 42},
		`{"stream":"SETTLE_INTENTS","seq":7,"duplicate": true}`:                  {Stream: "SETTLE_INTENTS", Sequence: 7, Duplicate: true},
		`{"stream":"SETTLE_INTENTS","seq":300,"batch":"Zq8bC3x4y5","count":165}`: {Stream: "SETTLE_INTENTS", Sequence: 300, BatchID: "Zq8bC3x4y5", Count: 165},
		`{"stream":"SETTLE_INTENTS","seq":18446744073709551615}`:                 {Stream: "SETTLE_INTENTS", Sequence: 1<<64 - 1},
		`{"stream":"S","seq":3,"val":"12"}`:                                      {Stream: "S", Sequence: 3},
	} {
		got, err := parseAck([]byte(in))
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", in, got, err, want)
		}
	}
	a, err := parseAck([]byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"}}`))
	if err != nil || a.Error == nil || a.Error.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Errorf("refusal: %+v, %v", a, err)
	}
	for _, bad := range []string{``, `+OK`, `{"stream":"S","seq":-1}`, `{"stream":"S","seq":1}x`} {
		if _, err := parseAck([]byte(bad)); err == nil {
			t.Errorf("%q read as an ack", bad)
		}
	}
}
