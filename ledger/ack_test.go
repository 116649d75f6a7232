package ledger

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// ackSamples are acks as nats-server v2.15 writes them (stream.go,
// jetstream_batching.go), and answers it writes with encoding/json.
var ackSamples = []string{
	`{"stream":"SETTLE_INTENTS","seq":1}`,
	`{"stream":"SETTLE_INTENTS","seq":18446744073709551615}`,
	`{"stream":"SETTLE_INTENTS","domain":"hub","seq":42}`,
	`{"stream":"SETTLE_INTENTS","seq":7,"duplicate": true}`,
	`{"stream":"SETTLE_INTENTS","seq":300,"batch":"Zq8bC3x4y5","count":165}`,
	`{"stream":"SETTLE_INTENTS","seq":300,"duplicate": true,"batch":"Zq8bC3x4y5","count":165}`,
	`{"stream":"SETTLE_INTENTS","domain":"hub","seq":9,"duplicate": true}`,
	`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"}}`,
	`{"error":{"code":400,"err_code":10158,"description":"duplicate message id is in process"},"stream":"S","seq":0}`,
	`{"stream":"S","seq":3,"val":"12"}`,
	`{"stream": "S", "seq": 22}`,
	`{"seq":1,"stream":"S"}`,
	`{"stream":"S\u00e9","seq":1}`,
	`{"stream":"Sé","seq":1}`,
	`{"stream":"S","seq":01}`,
	`{"stream":"S","seq":1.0}`,
	`{"stream":"S","seq":1e3}`,
	`{"stream":"S","seq":18446744073709551616}`,
	`{"stream":"","seq":1}`,
	`{"stream":"S","seq":1}x`,
	`{"stream":"S","seq":1,"batch":"b"}`,
	`{"stream":"S","seq":1,"batch":"b","count":-1}`,
	`{"stream":"S","seq":1,"batch":"b","count":2147483648}`,
	`{"STREAM":"S","seq":1}`,
	``, `{}`, `null`, `+OK`,
}

// Where the direct reading takes an ack, encoding/json reads it the same;
// what it leaves goes to encoding/json.
func TestParseAckAgrees(t *testing.T) {
	fast := 0
	for _, s := range ackSamples {
		if checkAckAgrees(t, []byte(s)) {
			fast++
		}
	}
	// The server's own shapes are all read directly.
	if fast != 7 {
		t.Errorf("%d samples read directly, want the 7 shapes nats-server writes by hand", fast)
	}
	a, err := parseAck([]byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"}}`))
	if err != nil || a.Error == nil || a.Error.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Errorf("refusal: %+v, %v", a, err)
	}
}

func FuzzParseAckAgrees(f *testing.F) {
	for _, s := range ackSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAckAgrees(t, data)
	})
}

// checkAckAgrees reports whether the direct reading took data, failing t
// where it reads data otherwise than encoding/json.
func checkAckAgrees(t *testing.T, data []byte) bool {
	t.Helper()
	got, ok := parseAckFast(data)
	var want pubAck
	werr := json.Unmarshal(data, &want)
	if !ok {
		a, err := parseAck(data)
		if (err == nil) != (werr == nil) || (err == nil && !reflect.DeepEqual(a, want)) {
			t.Errorf("parseAck(%q) = %+v, %v; encoding/json %+v, %v", data, a, err, want, werr)
		}
		return false
	}
	if werr != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parseAckFast(%q) = %+v; encoding/json %+v, %v", data, got, want, werr)
	}
	return true
}
