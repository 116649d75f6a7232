package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// refMarshal is Event.MarshalJSON by encoding/json alone: the body
// marshalled by reflection, then the wire struct; its error, if any.
func refMarshal(e Event) ([]byte, error) {
	data, err := json.Marshal(e.Data)
	if err != nil {
		return nil, err
	}
	return json.Marshal(wire{Schema: e.Schema, EventID: e.EventID, IntentID: e.IntentID, Version: e.Version,
		Type: e.Type, At: e.At, Actor: e.Actor, AttemptID: e.AttemptID, Data: data})
}

// sameResult: the same bytes, and both err or neither, with the same message.
func sameResult(got []byte, gerr error, want []byte, werr error) bool {
	if gerr != nil || werr != nil {
		return gerr != nil && werr != nil && gerr.Error() == werr.Error()
	}
	return bytes.Equal(got, want)
}

// nesting is the deepest nesting of arrays and objects in b, counted
// outside strings (b need not be valid JSON).
func nesting(b []byte) int {
	depth, deepest, in := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case in:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// hostile builds random values for the agreement tests: strings with HTML
// characters, controls, U+2028/U+2029 and invalid UTF-8; zero, far and
// zoned times (years outside RFC 3339 and zone offsets of 24 hours
// included); payloads valid and compact, valid with white space, with
// HTML characters, deeply nested, empty, nil and invalid.
type hostile struct{ rng *rand.Rand }

var (
	hostileRunes = []string{"a", "Z", "0", " ", "/", "'", "<", ">", "&", `"`, `\`, "\n", "\t", "\b", "\f", "\r",
		"\x00", "\x1f", "\x7f", "é", "µ", "\u2028", "\u2029", "\xe2\x80", "\xe2\x80\xa7", "\xff", "\xc3",
		"\xed\xa0\x80", "💥", "\ufffd", "\u00ad"}
	// jsonStringParts are pieces of a valid JSON string's contents.
	jsonStringParts = []string{"a", "hi there", "<", ">", "&", "\u2028", "\u2029", "\xe2\x80", "\xe2", "\xff", "é", "💥",
		"\x7f", `\"`, `\\`, `\/`, `\n`, `\b`, `\u0041`, `\uD800`, `\u003c`, `\u2028`, "'"}
	jsonNumbers = []string{"0", "-0", "1", "-12", "3.25", "1e5", "1E-5", "-0.0e+0", "12345678901234567890123", "9007199254740993"}
	jsonSpaces  = []string{" ", "\t", "\n", "\r", "  \r\n"}
)

func (h hostile) str() string {
	if h.rng.IntN(4) == 0 {
		return ""
	}
	var b strings.Builder
	for range 1 + h.rng.IntN(10) {
		b.WriteString(hostileRunes[h.rng.IntN(len(hostileRunes))])
	}
	return b.String()
}

func (h hostile) time() time.Time {
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("", 5400), time.FixedZone("X", -(23*3600 + 59*60)),
		time.FixedZone("", 3661), time.FixedZone("", 23*3600+59*60+59)}
	zone := zones[h.rng.IntN(len(zones))]
	nsec := []int64{0, 0, 1, 999999999, 120000000, h.rng.Int64N(1e9)}[h.rng.IntN(6)]
	switch h.rng.IntN(10) {
	case 0:
		return time.Time{}
	case 1: // a year outside 0..9999
		return time.Date([]int{-1, 10000, 12345, -400}[h.rng.IntN(4)], 3, 1, 0, 0, 0, int(nsec), zone)
	case 2: // a zone offset RFC 3339 cannot write
		return time.Unix(h.rng.Int64N(1<<33), nsec).In(time.FixedZone("", 24*3600+h.rng.IntN(3600)))
	case 3: // the edges of RFC 3339
		return []time.Time{time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
			time.Date(0, 1, 1, 0, 0, 0, 0, time.FixedZone("", -3600)), time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", 7200))}[h.rng.IntN(4)]
	case 4:
		return time.Now() // with a monotonic reading
	}
	return time.Unix(h.rng.Int64N(1<<36)-1<<35, nsec).In(zone)
}

func (h hostile) duration() Duration {
	return []Duration{0, 0, 1, -1, 1500, Duration(time.Minute), Duration(90 * time.Second), Duration(time.Hour + time.Nanosecond),
		1<<63 - 1, -1 << 63, Duration(h.rng.Int64())}[h.rng.IntN(11)]
}

func (h hostile) int() int64 {
	return []int64{0, 0, 1, -1, 201, 1 << 40, -1 << 63, 1<<63 - 1, h.rng.Int64() - 1<<62}[h.rng.IntN(9)]
}

// json appends a random valid JSON value, white space between its tokens
// if spaces.
func (h hostile) json(b []byte, depth int, spaces bool) []byte {
	ws := func(b []byte) []byte {
		if spaces && h.rng.IntN(2) == 0 {
			b = append(b, jsonSpaces[h.rng.IntN(len(jsonSpaces))]...)
		}
		return b
	}
	str := func(b []byte) []byte {
		b = append(b, '"')
		for range h.rng.IntN(5) {
			b = append(b, jsonStringParts[h.rng.IntN(len(jsonStringParts))]...)
		}
		return append(b, '"')
	}
	k := h.rng.IntN(8)
	if depth >= 4 {
		k = h.rng.IntN(4)
	}
	switch k {
	case 0:
		return str(b)
	case 1:
		return append(b, jsonNumbers[h.rng.IntN(len(jsonNumbers))]...)
	case 2:
		return append(b, []string{"true", "false", "null"}[h.rng.IntN(3)]...)
	case 3, 4, 5:
		b = append(b, '{')
		for i := range h.rng.IntN(4) {
			if i > 0 {
				b = append(ws(b), ',')
			}
			b = str(ws(b))
			b = append(ws(b), ':')
			b = h.json(ws(b), depth+1, spaces)
		}
		return append(ws(b), '}')
	default:
		b = append(b, '[')
		for i := range h.rng.IntN(4) {
			if i > 0 {
				b = append(ws(b), ',')
			}
			b = h.json(ws(b), depth+1, spaces)
		}
		return append(ws(b), ']')
	}
}

func (h hostile) payload() json.RawMessage {
	switch h.rng.IntN(12) {
	case 0:
		return nil
	case 1:
		return json.RawMessage{}
	case 2: // white space around and inside
		return h.json([]byte(jsonSpaces[h.rng.IntN(len(jsonSpaces))]), 0, true)
	case 3, 4: // one byte changed, dropped or added: mostly invalid
		p := h.json(nil, 0, h.rng.IntN(2) == 0)
		i := h.rng.IntN(len(p))
		c := byte(h.rng.IntN(256))
		if h.rng.IntN(2) == 0 {
			c = "{}[]\",:\\ x0-.e\x00\x1f<\xe2"[h.rng.IntN(17)]
		}
		switch h.rng.IntN(3) {
		case 0:
			p[i] = c
		case 1:
			p = append(p[:i], p[i+1:]...)
		default:
			p = slices.Insert(p, i, c)
		}
		return p
	case 5: // around the appender's depth limit
		d := maxCompactDepth - 2 + h.rng.IntN(5)
		return []byte(strings.Repeat("[", d) + strings.Repeat("]", d))
	case 6: // a payload as settle freezes it
		p, err := Canonicalize(h.json(nil, 0, false))
		if err != nil {
			return json.RawMessage(`{"assets":[],"body":"Q&A <b> at 5\u2028pm"}`)
		}
		return p
	}
	return h.json(nil, 0, false)
}

// fill sets v, a body or a part of one, to random values: every field,
// so that a field added to a body and not to its appender shows.
func (h hostile) fill(v reflect.Value) {
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(h.time()))
		return
	case reflect.TypeFor[Duration]():
		v.SetInt(int64(h.duration()))
		return
	case reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(h.payload()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(h.str())
	case reflect.Int:
		v.SetInt(h.int())
	case reflect.Bool:
		v.SetBool(h.rng.IntN(2) == 0)
	case reflect.Struct:
		for i := range v.NumField() {
			h.fill(v.Field(i))
		}
	case reflect.Pointer:
		if h.rng.IntN(3) > 0 {
			v.Set(reflect.New(v.Type().Elem()))
			h.fill(v.Elem())
		}
	case reflect.Slice:
		switch k := h.rng.IntN(5); k {
		case 0: // nil
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			s := reflect.MakeSlice(v.Type(), k-1, k-1)
			for i := range k - 1 {
				h.fill(s.Index(i))
			}
			v.Set(s)
		}
	default:
		panic("hostile: " + v.Type().String())
	}
}

// The hand-written bodies are the ones written on every Execute.
func TestAppendJSONTypes(t *testing.T) {
	var got []Type
	for _, typ := range AllTypes() {
		if _, ok := NewData(typ).(jsonAppender); ok {
			got = append(got, typ)
		}
	}
	want := []Type{IntentRecorded, IntentStarted, OutcomeUnknown, WriteConfirmed, WriteRejected, WriteStarted, WriteSucceeded}
	if !slices.Equal(got, want) {
		t.Fatalf("hand-written bodies %v, want %v", got, want)
	}
}

// Every hand-written body, and every event holding one, is byte for byte
// what encoding/json writes, and errs where it errs, whatever its fields
// hold. The appender gives up only where encoding/json errs or a payload
// nests deeper than it takes.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	h := hostile{rng}
	for _, typ := range AllTypes() {
		if _, ok := NewData(typ).(jsonAppender); !ok {
			continue
		}
		taken := 0
		const n = 4000
		for i := range n {
			d := NewData(typ)
			h.fill(reflect.ValueOf(d).Elem())
			want, werr := json.Marshal(d)
			prefix := []byte(h.str())
			got, ok := d.(jsonAppender).appendJSON(slices.Clip(prefix))
			deep := false
			if r, isRec := d.(*IntentRecordedData); isRec {
				deep = nesting(r.Payload) > maxCompactDepth
			}
			if r, isStarted := d.(*IntentStartedData); isStarted {
				deep = nesting(r.Recorded.Payload) > maxCompactDepth
			}
			switch {
			case ok && werr != nil:
				t.Fatalf("%s %d: appended %s, encoding/json errs: %v\nbody %#v", typ, i, got, werr, d)
			case ok && (!bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want)):
				t.Fatalf("%s %d:\n got %s\nwant %s\nbody %#v", typ, i, got, want, d)
			case !ok && werr == nil && !deep:
				t.Fatalf("%s %d: the appender gave up, encoding/json writes %s\nbody %#v", typ, i, want, d)
			}
			if ok {
				taken++
			}
			// In an event, envelope and all.
			e := Event{Schema: h.str(), EventID: h.str(), IntentID: h.str(), Version: rng.Uint64(), Type: Type(h.str()),
				At: h.time(), Actor: h.str(), AttemptID: h.str(), Data: d}
			eg, egerr := e.MarshalJSON()
			ew, ewerr := refMarshal(e)
			if !sameResult(eg, egerr, ew, ewerr) {
				t.Fatalf("%s %d event:\n got %s, %v\nwant %s, %v", typ, i, eg, egerr, ew, ewerr)
			}
		}
		if taken < n/3 {
			t.Errorf("%s: the appender took %d of %d bodies", typ, taken, n)
		}
	}
}

// The payload alone, many more of them.
func TestAppendPayloadMatchesEncodingJSON(t *testing.T) {
	h := hostile{rand.New(rand.NewPCG(7, 8))}
	taken := 0
	const n = 50000
	for range n {
		p := h.payload()
		got, ok := appendJSONRaw(nil, p)
		want, werr := json.Marshal(p)
		switch {
		case ok && werr != nil:
			t.Fatalf("%q: appended %s, encoding/json errs: %v", p, got, werr)
		case ok && !bytes.Equal(got, want):
			t.Fatalf("%q:\n got %s\nwant %s", p, got, want)
		case !ok && werr == nil && nesting(p) <= maxCompactDepth:
			t.Fatalf("%q: the appender gave up, encoding/json writes %s", p, want)
		}
		if ok {
			taken++
		}
	}
	if taken < n/2 {
		t.Errorf("the appender took %d of %d payloads", taken, n)
	}
}

// Cases the random values may miss: a nil body, a nil or empty payload,
// the canonical payloads settle writes.
func TestAppendJSONEdgeCases(t *testing.T) {
	rec := sampleRecorded()
	bodies := []Data{(*IntentRecordedData)(nil), (*WriteStartedData)(nil), (*WriteSucceededData)(nil),
		(*WriteConfirmedData)(nil), (*WriteRejectedData)(nil), (*OutcomeUnknownData)(nil)}
	for _, p := range []string{"", "null", " null ", `{"assets":[],"body":"hi"}`, `{"body":"<script>&amp;\u2028</script>"}`,
		"\ufeff{}", `{"a":1}x`, `{"a":1} `, `"\u2028"`, "[" + strings.Repeat(`{"a":[`, 200) + strings.Repeat("]}", 200) + "]"} {
		d := *rec.Data.(*IntentRecordedData)
		d.Payload = json.RawMessage(p)
		bodies = append(bodies, &d)
	}
	d := *rec.Data.(*IntentRecordedData)
	d.Payload = nil
	bodies = append(bodies, &d)
	for _, e := range writeEvents(t, 3) {
		bodies = append(bodies, e.Data)
	}
	for i, d := range bodies {
		e := rec
		e.Data = d
		got, gerr := e.MarshalJSON()
		want, werr := refMarshal(e)
		if !sameResult(got, gerr, want, werr) {
			t.Errorf("case %d, %#v:\n got %s, %v\nwant %s, %v", i, d, got, gerr, want, werr)
		}
	}
}

// The payload as the appender writes it is what encoding/json writes for a
// json.RawMessage, for any bytes; it gives up only where encoding/json
// errs or on a nesting deeper than it takes.
func FuzzAppendPayloadMatchesEncodingJSON(f *testing.F) {
	for _, e := range writeEvents(f, 1) {
		if d, ok := e.Data.(*IntentRecordedData); ok {
			f.Add([]byte(d.Payload))
		}
	}
	for _, p := range []string{"", "null", `{"assets":[],"body":"hi"}`, ` { "a" : [ 1 , 2.5e-3 , true ] } `,
		`{"b":"<&>\u2028\u2029"}`, `{"b":"\xff\xe2\x80"}`, `{"b":"\u003c\"\\\/\b"}`, `{"a":1}x`, `{"a":01}`, `[1,]`,
		`"\x01"`, `-`, `1.`, `1e`, `tru`, strings.Repeat("[", maxCompactDepth+1) + strings.Repeat("]", maxCompactDepth+1)} {
		f.Add([]byte(p))
	}
	rec := sampleRecorded()
	f.Fuzz(func(t *testing.T, p []byte) {
		got, ok := appendJSONRaw([]byte("x"), p)
		want, werr := json.Marshal(json.RawMessage(p))
		switch {
		case ok && werr != nil:
			t.Fatalf("%q: appended %s, encoding/json errs: %v", p, got, werr)
		case ok && (got[0] != 'x' || !bytes.Equal(got[1:], want)):
			t.Fatalf("%q:\n got %s\nwant %s", p, got[1:], want)
		case !ok && werr == nil && nesting(p) <= maxCompactDepth:
			t.Fatalf("%q: the appender gave up, encoding/json writes %s", p, want)
		}
		d := *rec.Data.(*IntentRecordedData)
		d.Payload = p
		e := rec
		e.Data = &d
		eg, egerr := e.MarshalJSON()
		ew, ewerr := refMarshal(e)
		if !sameResult(eg, egerr, ew, ewerr) {
			t.Fatalf("%q event:\n got %s, %v\nwant %s, %v", p, eg, egerr, ew, ewerr)
		}
	})
}

// writeEvents are the three events of one write as the bench package's
// eventAt builds them: IntentRecorded with a canonical social payload and
// adapter.DefaultPolicy (copied here: events does not import adapter),
// WriteStarted, WriteSucceeded.
func writeEvents(tb testing.TB, i int) [3]Event {
	tb.Helper()
	body := "Benchmark post for settle: the ledger records every external write intent before the write and settles lost responses without a second write. " +
		strings.Repeat("lorem ipsum ", 16)
	raw, err := json.Marshal(map[string]any{"assets": []string{}, "body": body})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := Canonicalize(raw)
	if err != nil {
		tb.Fatal(err)
	}
	sum, err := PayloadSHA256(p)
	if err != nil {
		tb.Fatal(err)
	}
	reqID := fmt.Sprintf("bench:%09d", i)
	id := ScopedIntentID("default", "social_post", "acct_1", reqID)
	t := time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
	key := IdempotencyKey(id)
	policy := Policy{
		FirstWrite: PolicyAuto, Retry: PolicyAuto, RetryBudget: 1, ResendBudget: 5,
		AttemptDeadline: Duration(time.Minute), SearchBefore: Duration(5 * time.Minute),
		SearchAfter: Duration(30 * time.Minute), ClockSkew: Duration(5 * time.Second),
	}
	return [3]Event{
		New(id, 1, t, "bench", "", &IntentRecordedData{
			Tenant: "default", Route: "social_post", Account: "acct_bench", RequestID: reqID,
			IdempotencyKey: key, Payload: p, PayloadSHA256: sum, Canon: CanonV1, PlannedAt: t, Policy: policy,
		}),
		New(id, 2, t, "bench", AttemptID(id, 1),
			&WriteStartedData{Attempt: 1, IdempotencyKey: key, Deadline: t.Add(time.Minute)}),
		New(id, 3, t, "bench", AttemptID(id, 1),
			&WriteSucceededData{ExternalID: fmt.Sprintf("p_%d", i+1), LiveURL: fmt.Sprintf("http://127.0.0.1:8080/p/p_%d", i+1), StatusCode: 201}),
	}
}

// BenchmarkEncodeBodies: Encode of the three events of one write.
func BenchmarkEncodeBodies(b *testing.B) {
	for _, e := range writeEvents(b, 7) {
		b.Run(string(e.Type), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendPayload: the payload of an IntentRecorded as the appender
// writes it, against what it replaces (encoding/json's validation and
// compaction of a json.RawMessage) and json.Valid alone.
func BenchmarkAppendPayload(b *testing.B) {
	p := writeEvents(b, 7)[0].Data.(*IntentRecordedData).Payload
	buf := make([]byte, 0, 2*len(p))
	b.Run("append", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if _, ok := appendJSONRaw(buf, p); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if _, err := json.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if !json.Valid(p) {
				b.Fatal("invalid")
			}
		}
	})
}

// The hand-written bodies, their strings, ints and times from the fuzzer,
// are what encoding/json writes, in an event, errors included.
func FuzzAppendJSONMatchesEncodingJSON(f *testing.F) {
	f.Add("p_1 <&>", "a\u2028\xff\x00", int64(201), int64(1784678400), int64(5), 3600)
	f.Add("", "", int64(0), int64(-62135596801), int64(0), 0)
	f.Add("\\\"", "\xed\xa0\x80", int64(-1), int64(253402300800), int64(999999999), 86400)
	rec := sampleRecorded()
	f.Fuzz(func(t *testing.T, s1, s2 string, n, sec, nsec int64, off int) {
		tm := time.Unix(sec, nsec).In(time.FixedZone("", off%(100*3600)))
		pol := rec.Data.(*IntentRecordedData).Policy
		pol.FirstWrite, pol.ClockSkew, pol.ResendBudget = s1, Duration(n), int(n)
		for _, d := range []Data{
			&IntentRecordedData{Tenant: s1, Route: s2, Account: s1, RequestID: s2, IdempotencyKey: s1, ParentExternalID: s2,
				Payload: []byte(s2), PayloadSHA256: s1, Canon: s2, PlannedAt: tm, ExpiresAt: tm, Policy: pol,
				Caps: &Capabilities{IdempotencyKey: n%2 == 0, KeyRetention: Duration(n), Checks: []string{s1, s2}}},
			&WriteStartedData{Attempt: int(n), IdempotencyKey: s1, Deadline: tm, ClaimOwner: s2},
			&IntentStartedData{Recorded: IntentRecordedData{Tenant: s1, Route: s2, Payload: []byte(s1), PlannedAt: tm, Policy: pol},
				Started: WriteStartedData{Attempt: int(n), IdempotencyKey: s2, Deadline: tm, Request: &SentRequest{Method: s1, Body: s2}}},
			&WriteSucceededData{ExternalID: s1, LiveURL: s2, StatusCode: int(n)},
			&WriteConfirmedData{StatusCode: int(n), Receipt: Receipt{ExternalID: s1, LiveURL: s2, Checks: []Check{{Name: s1, OK: n%2 == 0, Detail: s2}},
				ReadbackAt: tm, PayloadSHA256: s2, Source: Source(s1), IdempotencyKey: s2, RequestID: s1, AttemptID: s2}},
			&WriteRejectedData{Code: s1, Message: s2, StatusCode: int(n), Retryable: n%2 == 0},
			&OutcomeUnknownData{Code: s1, Message: s2, StatusCode: int(n)},
		} {
			e := Event{Schema: s1, EventID: s2, IntentID: s1, Version: uint64(n), Type: d.EventType(), At: tm, Actor: s2, AttemptID: s1, Data: d}
			got, gerr := e.MarshalJSON()
			want, werr := refMarshal(e)
			if !sameResult(got, gerr, want, werr) {
				t.Fatalf("%s:\n got %s, %v\nwant %s, %v", e.Type, got, gerr, want, werr)
			}
		}
	})
}
