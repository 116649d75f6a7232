package httproute_test

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzNormalizeIsIdempotent: a payload the booking route normalized is
// normalized to itself, and normalizing a payload again (its result then
// remembered) gives what the first call gave, or the same error: the
// remembered payloads change no answer.
func FuzzNormalizeIsIdempotent(f *testing.F) {
	for _, s := range []string{
		`{"booking_id":"bk-1","expected_version":2,"change":{"nights":3}}`,
		`{"change": {"guest": "Ana\u0301", "notes": [], "room": "<b>&</b>"}, "expected_version": 2.0, "booking_id": "bk-1"}`,
		`{"booking_id":"..","expected_version":-1,"change":{}}`,
		`{"booking_id":"bk-1","expected_version":0,"change":{"a":1},"extra":true}`,
		`[1,2]`,
		`not json`,
	} {
		f.Add(s)
	}
	a := loadExample(f, "booking.yaml", "http://127.0.0.1:1")
	f.Fuzz(func(t *testing.T, in string) {
		out1, err1 := a.NormalizePayload(json.RawMessage(in))
		out2, err2 := a.NormalizePayload(json.RawMessage(in))
		if (err1 == nil) != (err2 == nil) || !bytes.Equal(out1, out2) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("%q: first %s %v, again %s %v", in, out1, err1, out2, err2)
		}
		if err1 != nil {
			return
		}
		again, err := a.NormalizePayload(out1)
		if err != nil || !bytes.Equal(again, out1) {
			t.Fatalf("%q normalized to %s, which normalizes to %s (%v)", in, out1, again, err)
		}
	})
}
