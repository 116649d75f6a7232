package events

import (
	"strings"
	"testing"
	"time"
)

func TestHoldRoundTripsAndNamesTheLoss(t *testing.T) {
	id := ScopedIntentID("default", "social_post", "acct_1", "r1")
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	h := NewHold(id, []uint64{2, 3, 5}, []uint64{40, 41, 57}, [][2]uint64{{30, 60}}, at, "serve", "lost.")
	b, err := EncodeHold(h)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeHold(b)
	if err != nil || got.IntentID != id || got.Named() != "versions 2, 3, 5 (sequences 40..41, 57) in the loss of sequences 30..60, accepted at 2026-03-04T05:06:07Z" {
		t.Fatalf("%+v %v: %s", got, err, got.Named())
	}
	if n := (Hold{At: at}).Named(); !strings.HasPrefix(n, "events the views did not know") {
		t.Fatalf("a hold without versions: %s", n)
	}
}

func TestDecodeHoldRefusesWhatIsNotAHold(t *testing.T) {
	id := ScopedIntentID("default", "social_post", "acct_1", "r1")
	for name, body := range map[string]string{
		"empty":         ``,
		"not json":      `hold`,
		"unknown field": `{"schema":"settle.hold/v1","intent_id":"` + id + `","reason":"log_events_lost","at":"2026-01-01T00:00:00Z","by":"x","message":"m","extra":1}`,
		"other schema":  `{"schema":"settle.event/v1","intent_id":"` + id + `","reason":"log_events_lost","at":"2026-01-01T00:00:00Z","by":"x","message":"m"}`,
		"other reason":  `{"schema":"settle.hold/v1","intent_id":"` + id + `","reason":"whim","at":"2026-01-01T00:00:00Z","by":"x","message":"m"}`,
		"bad id":        `{"schema":"settle.hold/v1","intent_id":"in_x","reason":"log_events_lost","at":"2026-01-01T00:00:00Z","by":"x","message":"m"}`,
		"no time":       `{"schema":"settle.hold/v1","intent_id":"` + id + `","reason":"log_events_lost","by":"x","message":"m"}`,
		"bad range":     `{"schema":"settle.hold/v1","intent_id":"` + id + `","reason":"log_events_lost","accepted":[[5,2]],"at":"2026-01-01T00:00:00Z","by":"x","message":"m"}`,
		"trailing data": `{"schema":"settle.hold/v1","intent_id":"` + id + `","reason":"log_events_lost","at":"2026-01-01T00:00:00Z","by":"x","message":"m"} {}`,
	} {
		if _, err := DecodeHold([]byte(body)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := EncodeHold(Hold{}); err == nil {
		t.Fatal("an empty hold encoded")
	}
}

// A hold marker's body is read from the log: never a panic, and what
// decodes encodes to what decodes the same.
func FuzzDecodeHold(f *testing.F) {
	b, _ := EncodeHold(NewHold(ScopedIntentID("default", "r", "acct_1", "k"), []uint64{1}, []uint64{9}, [][2]uint64{{9, 9}}, time.Unix(1, 0), "s", "m"))
	f.Add(b)
	f.Add([]byte(`{"schema":"settle.hold/v1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeHold(data)
		if err != nil {
			return
		}
		again, err := EncodeHold(h)
		if err != nil {
			t.Fatalf("decoded but does not encode: %v", err)
		}
		if _, err := DecodeHold(again); err != nil {
			t.Fatalf("re-encoded does not decode: %v", err)
		}
		_ = h.Named()
	})
}
