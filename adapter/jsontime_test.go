package adapter

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// A timestamp is read whatever escapes its server's encoder used, and
// exactly as time.Time reads it when there are none.
func TestJSONTimeReadsEscapedTimestamps(t *testing.T) {
	want := time.Date(2026, 12, 1, 9, 0, 0, 500000000, time.FixedZone("", 3600))
	for _, raw := range []string{
		`"2026-12-01T09:00:00.5+01:00"`,
		`"2026-12-01T09:00:00.5\u002B01:00"`, // System.Text.Json's '+'
		`"2026-12-01\u005409:00:00.5\u002b01:00"`,
		`"\u0032026-12-01T09:00:00.5+01:00"`,
	} {
		var got JSONTime
		if err := json.Unmarshal([]byte(raw), &got); err != nil || !got.Equal(want) {
			t.Fatalf("%s: %v %v", raw, got, err)
		}
	}
	var std time.Time
	if json.Unmarshal([]byte(`"2026-12-01T09:00:00.5\u002B01:00"`), &std) == nil {
		t.Fatal("time.Time now reads escapes (golang/go#47353 fixed?): JSONTime may be retired")
	}
	var null JSONTime
	if err := json.Unmarshal([]byte(`null`), &null); err != nil || !null.IsZero() {
		t.Fatalf("null: %v %v", null, err)
	}
	for _, bad := range []string{`"2026-12-01"`, `"yesterday"`, `12`, `"2026-12-01T09:00:00\u002"`, `true`} {
		var got JSONTime
		if json.Unmarshal([]byte(bad), &got) == nil {
			t.Fatalf("%s read as %v", bad, got)
		}
	}
	b, err := json.Marshal(struct{ At JSONTime }{JSONTime{want}})
	if err != nil || string(b) != `{"At":"2026-12-01T09:00:00.5+01:00"}` {
		t.Fatalf("marshal: %s %v", b, err)
	}
}

// Without escapes, JSONTime accepts and reads exactly what time.Time does.
func TestJSONTimeAgreesWithTimeWithoutEscapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	parts := []string{"2026", "-", "12", "01", "T", "t", ":", "09", "00", ".", "5", "123456789", "Z", "z", "+", "-",
		"01:00", "24:00", " ", "9999", "0000", "13", "32", "60", "x"}
	for range 50000 {
		var sb strings.Builder
		for range 1 + rng.IntN(10) {
			sb.WriteString(parts[rng.IntN(len(parts))])
		}
		if rng.IntN(4) == 0 {
			sb.Reset()
			sb.WriteString(time.Unix(rng.Int64N(1<<36)-1<<35, rng.Int64N(1e9)).In(time.FixedZone("", 60*(rng.IntN(2000)-1000))).Format(time.RFC3339Nano))
		}
		raw := []byte(`"` + sb.String() + `"`)
		var a time.Time
		var b JSONTime
		ea, eb := json.Unmarshal(raw, &a), json.Unmarshal(raw, &b)
		if (ea == nil) != (eb == nil) || (ea == nil && !a.Equal(b.Time)) || a.Location().String() != b.Location().String() {
			t.Fatalf("%s: time.Time %v %v, JSONTime %v %v", raw, a, ea, b, eb)
		}
	}
}
