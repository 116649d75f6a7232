package httproute_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/settle-dev/settle/adapter/booking"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/adapter/payment"
	"github.com/settle-dev/settle/adapter/social"
	"github.com/settle-dev/settle/events"
)

type normalizer func(json.RawMessage) (json.RawMessage, error)

var payloadCorpus = map[string][]string{
	"social.yaml": {
		`{"body":"hi"}`, `{"body":"hi","assets":[]}`, `{"assets":["` + asset1 + `"],"body":"x"}`,
		`{"body":""}`, `{"body":"  "}`, `{"body":null}`, `{"body":1}`, `{}`, `[]`, `"x"`, ``, `{"body":"x","extra":1}`,
		`{"body":"x","Bad Key":1}`, `{"body":"x","assets":null}`, `{"body":"x","assets":"a"}`, `{"body":"x","assets":[1]}`,
		`{"body":"x","assets":["ABC"]}`, `{"body":"x","assets":["` + asset1 + `",2]}`, `{"body":"x","body":"y"}`,
		`{"body":"e\u0301"}`, `{"body":"x"} trailing`, `{"body":"x","n":1e400}`, `{"body":"\ud800"}`,
	},
	"booking.yaml": {
		`{"booking_id":"B-1","expected_version":1,"change":{"seat":"1A"}}`, `{"booking_id":"B.1:x_y-z","expected_version":0,"change":{"a":null}}`,
		`{"booking_id":"","expected_version":1,"change":{"a":1}}`, `{"booking_id":".","expected_version":1,"change":{"a":1}}`,
		`{"booking_id":"..","expected_version":1,"change":{"a":1}}`, `{"booking_id":"...","expected_version":1,"change":{"a":1}}`,
		`{"booking_id":"a b","expected_version":1,"change":{"a":1}}`, `{"booking_id":"` + strings.Repeat("b", 129) + `","expected_version":1,"change":{"a":1}}`,
		`{"booking_id":"` + strings.Repeat("b", 128) + `","expected_version":1,"change":{"a":1}}`,
		`{"booking_id":"B","expected_version":-1,"change":{"a":1}}`, `{"booking_id":"B","expected_version":1.5,"change":{"a":1}}`,
		`{"booking_id":"B","expected_version":"1","change":{"a":1}}`, `{"booking_id":"B","change":{"a":1}}`,
		`{"booking_id":"B","expected_version":1}`, `{"booking_id":"B","expected_version":1,"change":{}}`,
		`{"booking_id":"B","expected_version":1,"change":[1]}`, `{"booking_id":"B","expected_version":1,"change":null}`,
		`{"booking_id":1,"expected_version":1,"change":{"a":1}}`, `{"booking_id":"B","expected_version":1,"change":{"a":1},"x":0}`,
		`{"booking_id":"B","expected_version":1e2,"change":{"b":{"z":1,"a":[2,1]}}}`,
	},
	"payment.yaml": {
		`{"amount":100,"currency":"jpy","customer":"cus_1"}`, `{"amount":100,"currency":"jpy","customer":"cus_1","description":""}`,
		`{"amount":100,"currency":"jpy","customer":"cus_1","description":"d"}`, `{"amount":0,"currency":"jpy","customer":"c"}`,
		`{"amount":-1,"currency":"jpy","customer":"c"}`, `{"amount":1.5,"currency":"jpy","customer":"c"}`, `{"amount":"1","currency":"jpy","customer":"c"}`,
		`{"currency":"jpy","customer":"c"}`, `{"amount":1,"currency":"JPY","customer":"c"}`, `{"amount":1,"currency":"yen!","customer":"c"}`,
		`{"amount":1,"customer":"c"}`, `{"amount":1,"currency":"jpy"}`, `{"amount":1,"currency":"jpy","customer":""}`,
		`{"amount":1,"currency":"jpy","customer":"  "}`, `{"amount":1,"currency":"jpy","customer":"a\u0001b"}`,
		`{"amount":1,"currency":"jpy","customer":"` + strings.Repeat("c", 256) + `"}`, `{"amount":1,"currency":"jpy","customer":"c","description":null}`,
		`{"amount":1,"currency":"jpy","customer":"c","description":"` + strings.Repeat("d", 1001) + `"}`, `{"amount":1,"currency":"jpy","customer":"c","metadata":{}}`,
		`{"amount":1,"currency":null,"customer":"c"}`,
	},
}

var handNormalizers = map[string]normalizer{
	"social.yaml":  social.NormalizePayload,
	"booking.yaml": booking.NormalizePayload,
	"payment.yaml": payment.NormalizePayload,
}

// comparePayload: both accept with the same canonical bytes, or both
// refuse naming the same field.
func comparePayload(t testing.TB, file string, gen *httproute.Adapter, raw []byte) {
	t.Helper()
	g, e1 := gen.NormalizePayload(raw)
	h, e2 := handNormalizers[file](raw)
	if (e1 == nil) != (e2 == nil) {
		t.Fatalf("%s %q: generic %s %v, hand-written %s %v", file, raw, g, e1, h, e2)
	}
	if e1 == nil {
		if !bytes.Equal(g, h) {
			t.Fatalf("%s %q: generic %s, hand-written %s", file, raw, g, h)
		}
		return
	}
	var f1, f2 *events.FieldError
	if !errors.As(e1, &f1) || !errors.As(e2, &f2) || f1.Field != f2.Field {
		t.Fatalf("%s %q: generic %v, hand-written %v", file, raw, e1, e2)
	}
}

// TestPayloadParity: the declared payload schemas validate and
// canonicalise exactly as the hand-written normalizers do.
func TestPayloadParity(t *testing.T) {
	for file, corpus := range payloadCorpus {
		gen := loadExample(t, file, "http://127.0.0.1:9")
		for _, raw := range corpus {
			comparePayload(t, file, gen, []byte(raw))
		}
	}
}

// FuzzPayloadParity fuzzes the comparison (go test runs the corpus).
func FuzzPayloadParity(f *testing.F) {
	files := []string{"social.yaml", "booking.yaml", "payment.yaml"}
	for i, file := range files {
		for _, raw := range payloadCorpus[file] {
			f.Add(uint8(i), []byte(raw))
		}
	}
	gens := make([]*httproute.Adapter, len(files))
	for i, file := range files {
		gens[i] = loadExample(f, file, "http://127.0.0.1:9")
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		i := int(which) % len(files)
		comparePayload(t, files[i], gens[i], raw)
	})
}
