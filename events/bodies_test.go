package events

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// jsonNames lists a struct's json member names in field order.
func jsonNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// Every body type has a plan, and every plan's keys are its struct's json
// names, in field order: a renamed or added field cannot be read under its
// old name or missed.
func TestReadBodyKeysMatchStructs(t *testing.T) {
	for _, typ := range AllTypes() {
		if _, ok := bodyPlans[reflect.TypeOf(NewData(typ))]; !ok {
			t.Errorf("%s: no plan", typ)
		}
	}
	var check func(rt reflect.Type, p *plan)
	check = func(rt reflect.Type, p *plan) {
		if want := jsonNames(rt); !reflect.DeepEqual(p.keys, want) {
			t.Errorf("%s: keys %q, struct has %q", rt, p.keys, want)
		}
		for _, pf := range p.fields {
			ft := pf.typ
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() {
				check(ft, planOf(ft))
			}
		}
	}
	for pt, p := range bodyPlans {
		check(pt.Elem(), p)
	}
}

// bodyFiller fills a body's fields by reflection. plain: only values
// settle writes without an escape (readBody must then take the body);
// otherwise any value, zero ones included.
type bodyFiller struct {
	rng   *rand.Rand
	plain bool
}

var (
	plainStrings = []string{"a", "social_post", "acct_1", "task:1", "p_7", "https://x.test/p/7", "readback", "é ü 💥", "\x7f", "in_abc:0000000001"}
	wildStrings  = []string{"", " ", "<&>", `"`, `\`, "\n", "\x00", "\xff", "\u2028", "a\tb", "\xed\xa0\x80", "\ufffd"}
	durations    = []Duration{Duration(time.Second), Duration(90 * time.Second), Duration(time.Hour + time.Nanosecond), Duration(1)}
	payloads     = []string{`{"assets":[],"body":"hi"}`, `[1,2.5e3,"x",null,true,{"a":{}}]`, `{"s":"q\"}{\\","n":-0.1}`, `{}`, `[]`}
)

func (f *bodyFiller) fill(v reflect.Value, depth int) {
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		if f.plain || f.rng.IntN(4) > 0 {
			loc := []*time.Location{time.UTC, time.FixedZone("", 5400), time.FixedZone("", -3600)}[f.rng.IntN(3)]
			v.Set(reflect.ValueOf(time.Unix(f.rng.Int64N(1<<34), f.rng.Int64N(1e9)*int64(f.rng.IntN(2))).In(loc)))
		}
		return
	case reflect.TypeFor[Duration]():
		if f.plain || f.rng.IntN(4) > 0 {
			v.Set(reflect.ValueOf(durations[f.rng.IntN(len(durations))]))
		}
		return
	case reflect.TypeFor[json.RawMessage]():
		v.SetBytes([]byte(payloads[f.rng.IntN(len(payloads))]))
		return
	}
	if !f.plain && f.rng.IntN(4) == 0 {
		return // left zero (and so, with omitempty, out)
	}
	switch v.Kind() {
	case reflect.String:
		s := plainStrings[f.rng.IntN(len(plainStrings))]
		if !f.plain && f.rng.IntN(3) == 0 {
			s += wildStrings[f.rng.IntN(len(wildStrings))]
		}
		v.SetString(s)
	case reflect.Int:
		n := []int64{0, 1, 7, 201, -3, 1 << 40, -(1 << 62), 999999999999999999, 1<<63 - 1, -1 << 63, 1000000000000000000}[f.rng.IntN(11)]
		v.SetInt(n)
	case reflect.Bool:
		v.SetBool(f.plain || f.rng.IntN(2) == 0)
	case reflect.Struct:
		for i := range v.NumField() {
			f.fill(v.Field(i), depth+1)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem(), depth+1)
	case reflect.Slice:
		n := 1 + f.rng.IntN(3)
		if !f.plain {
			n = f.rng.IntN(3) // 0: an empty, non-nil slice, written []
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			f.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	default:
		panic("bodyFiller: " + v.Type().String())
	}
}

// readBody and strict encoding/json agree on json.Marshal of any body: a
// body with only values settle writes plainly is always taken; any body
// taken decodes to what encoding/json decodes.
func TestReadBodyAgreesWithEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	taken := 0
	for _, typ := range AllTypes() {
		for i := range 400 {
			f := bodyFiller{rng: rng, plain: i%2 == 0}
			d := NewData(typ)
			f.fill(reflect.ValueOf(d).Elem(), 0)
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			fast := NewData(typ)
			ok := readBody(b, fast)
			if f.plain && !ok {
				t.Fatalf("%s: readBody refused a plain body %s", typ, b)
			}
			if !ok {
				continue
			}
			taken++
			slow := NewData(typ)
			if err := strictUnmarshal(b, slow); err != nil {
				t.Fatalf("%s: readBody took %s, encoding/json refuses it: %v", typ, b, err)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("%s: %s\nreadBody %#v\nencoding/json %#v", typ, b, fast, slow)
			}
		}
	}
	t.Logf("%d bodies taken", taken)
}

// The body layouts readBody leaves to encoding/json (which accepts some
// and refuses others): each is refused by readBody, and Decode of an
// event holding it gives what the careful path gives.
func TestReadBodyLeavesToEncodingJSON(t *testing.T) {
	good := `{"attempt":1,"idempotency_key":"sk_x","deadline":"2026-07-22T00:00:00Z","claim_owner":"w"}`
	if !readBody([]byte(good), NewData(WriteStarted)) {
		t.Fatal("the good body is refused")
	}
	rep := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("%q not in the good body", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	cases := map[string]string{
		"unknown field":          rep(`"claim_owner"`, `"claim_owner2"`),
		"unknown field first":    rep(`{`, `{"x":1,`),
		"duplicate key":          rep(`"claim_owner":"w"`, `"claim_owner":"w","claim_owner":"v"`),
		"duplicate earlier key":  rep(`"claim_owner":"w"`, `"claim_owner":"w","attempt":2`),
		"members reordered":      `{"idempotency_key":"sk_x","attempt":1,"deadline":"2026-07-22T00:00:00Z"}`,
		"upper-case key":         rep(`"attempt"`, `"Attempt"`),
		"escaped key":            rep(`"attempt"`, `"attem\u0070t"`),
		"escape in a string":     rep(`"sk_x"`, `"sk\u005fx"`),
		"escaped quote":          rep(`"w"`, `"w\""`),
		"escaped slash":          rep(`"w"`, `"w\/"`),
		"control byte":           rep(`"w"`, "\"w\x01\""),
		"tab in a string":        rep(`"w"`, "\"w\t\""),
		"invalid UTF-8":          rep(`"w"`, "\"w\xff\""),
		"surrogate in UTF-8":     rep(`"w"`, "\"w\xed\xa0\x80\""),
		"space after colon":      rep(`"attempt":1`, `"attempt": 1`),
		"space before colon":     rep(`"attempt":1`, `"attempt" :1`),
		"space after comma":      rep(`1,"idem`, `1, "idem`),
		"leading space":          " " + good,
		"trailing space":         good + " ",
		"newline inside":         rep(`{`, "{\n"),
		"null string":            rep(`"w"`, `null`),
		"null int":               rep(`"attempt":1`, `"attempt":null`),
		"null time":              rep(`"2026-07-22T00:00:00Z"`, `null`),
		"null body":              `null`,
		"number for a string":    rep(`"w"`, `7`),
		"string for an int":      rep(`"attempt":1`, `"attempt":"1"`),
		"bool for an int":        rep(`"attempt":1`, `"attempt":true`),
		"object for a string":    rep(`"w"`, `{}`),
		"array body":             `[` + good + `]`,
		"exponent":               rep(`"attempt":1`, `"attempt":1e0`),
		"upper exponent":         rep(`"attempt":1`, `"attempt":1E2`),
		"fraction":               rep(`"attempt":1`, `"attempt":1.0`),
		"plus sign":              rep(`"attempt":1`, `"attempt":+1`),
		"leading zero":           rep(`"attempt":1`, `"attempt":01`),
		"minus alone":            rep(`"attempt":1`, `"attempt":-`),
		"int64 overflow":         rep(`"attempt":1`, `"attempt":9223372036854775808`),
		"20 digits":              rep(`"attempt":1`, `"attempt":10000000000000000000`),
		"int64 underflow":        rep(`"attempt":1`, `"attempt":-9223372036854775809`),
		"trailing data":          good + `{}`,
		"trailing garbage":       good + `x`,
		"trailing comma":         rep(`"w"}`, `"w",}`),
		"missing comma":          rep(`1,"idem`, `1"idem`),
		"missing colon":          rep(`"attempt":1`, `"attempt"1`),
		"unterminated":           good[:len(good)-1],
		"unterminated string":    `{"attempt":1,"idempotency_key":"sk_x`,
		"single quotes":          rep(`"w"`, `'w'`),
		"bad time":               rep(`"2026-07-22T00:00:00Z"`, `"2026-07-22"`),
		"time with an escape":    rep(`"2026-07-22T00:00:00Z"`, `"2026-07-22T00:00:00\u005a"`),
		"true for a string":      rep(`"w"`, `true`),
		"truncated literal":      `{"attempt":1,"idempotency_key":"sk_x","deadline":"2026-07-22T00:00:00Z","claim_owner":tru}`,
		"empty key":              rep(`{`, `{"":1,`),
		"comment":                rep(`{`, `{/**/`),
		"nested unknown":         `{"receipt":{"external_id":"p","x":1}}`,
		"nested duplicate":       `{"receipt":{"external_id":"p","external_id":"q"}}`,
		"nested upper-case":      `{"receipt":{"External_id":"p"}}`,
		"array trailing comma":   `{"receipt":{"external_id":"p","checks":[{"name":"url","ok":true},]}}`,
		"array leading comma":    `{"receipt":{"external_id":"p","checks":[,{"name":"url","ok":true}]}}`,
		"array null element":     `{"receipt":{"external_id":"p","checks":[null]}}`,
		"null array":             `{"receipt":{"external_id":"p","checks":null}}`,
		"bool as string":         `{"receipt":{"external_id":"p","checks":[{"name":"url","ok":"true"}]}}`,
		"bool capitalised":       `{"receipt":{"external_id":"p","checks":[{"name":"url","ok":True}]}}`,
		"unclosed array":         `{"receipt":{"external_id":"p","checks":[{"name":"url","ok":true}}}`,
		"null nested struct":     `{"receipt":null}`,
		"duration as a number":   `{"reflection_delay":90,"queried":"q"}`,
		"duration with escape":   `{"reflection_delay":"9\u00300s","queried":"q"}`,
		"negative duration":      `{"reflection_delay":"-1s","queried":"q"}`,
		"bad duration":           `{"reflection_delay":"soon","queried":"q"}`,
		"payload invalid":        `{"tenant":"a","payload":{"a":},"payload_sha256":"x"}`,
		"payload unclosed str":   `{"tenant":"a","payload":{"a":"}},"payload_sha256":"x"}`,
		"payload null":           `{"tenant":"a","payload":null}`,
		"payload string":         `{"tenant":"a","payload":"x"}`,
		"payload number":         `{"tenant":"a","payload":1}`,
		"payload extra bracket":  `{"tenant":"a","payload":{"a":1}}}`,
		"payload bad number":     `{"tenant":"a","payload":{"a":01}}`,
		"caps null":              `{"tenant":"a","caps":null}`,
		"caps strings null item": `{"tenant":"a","caps":{"checks":[null]}}`,
		"strings with number":    `{"tenant":"a","caps":{"checks":["url",1]}}`,
	}
	types := map[string]Type{}
	for name, b := range cases {
		switch {
		case strings.HasPrefix(b, `{"receipt"`):
			types[name] = ReadbackPassed
		case strings.HasPrefix(b, `{"reflection_delay"`):
			types[name] = StatusNotFound
		case strings.HasPrefix(b, `{"tenant"`):
			types[name] = IntentRecorded
		default:
			types[name] = WriteStarted
		}
	}
	rec := sampleRecorded()
	for name, b := range cases {
		typ := types[name]
		if b == good {
			t.Fatalf("%s: the case did not change the body", name)
		}
		if readBody([]byte(b), NewData(typ)) {
			t.Errorf("%s: readBody took %s", name, b)
		}
		// In an event, Decode agrees with the careful path.
		attempt := ""
		if typ == WriteStarted {
			attempt = `"attempt_id":"` + AttemptID(rec.IntentID, 1) + `",`
		}
		ev := []byte(`{"schema":"settle.event/v1","event_id":"` + MsgID(rec.IntentID, 2) + `","intent_id":"` + rec.IntentID +
			`","version":2,"type":"` + string(typ) + `","at":"2026-07-22T00:00:00Z","actor":"a",` + attempt + `"data":` + b + `}`)
		got, gerr := Decode(ev)
		want, werr := decodeCareful(ev)
		if !reflect.DeepEqual(got, want) || !sameError(gerr, werr) {
			t.Errorf("%s: Decode %+v, %v; careful %+v, %v", name, got, gerr, want, werr)
		}
	}
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.TypeOf(a) == reflect.TypeOf(b) && a.Error() == b.Error() && reflect.DeepEqual(a, b)
}

// fullEvent is an event of typ as settle writes it, every field of its
// body set (for the fuzz corpus).
func fullEvent(t testing.TB, typ Type, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, uint64(len(typ))))
	d := NewData(typ)
	(&bodyFiller{rng: rng, plain: true}).fill(reflect.ValueOf(d).Elem(), 0)
	id := ScopedIntentID("acme", "social_post", "acct_1", "task:"+strconv.FormatUint(seed, 10))
	attempt := ""
	if typ.StartsWrite() || seed%2 == 0 {
		attempt = AttemptID(id, 1)
	}
	b, err := New(id, 3, at, "test", attempt, d).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A WriteStarted recording its request reads back the same on both
// decoding paths; one without it (as written before) reads as before.
func TestWriteStartedRequestRoundTrips(t *testing.T) {
	at := time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)
	id := ScopedIntentID("t", "r", "acct_1", "q")
	for _, req := range []*SentRequest{nil, {Method: "POST", Path: "/v1/x?a=1&b=<2>", Headers: []HeaderField{{"Stripe-Version", "2024-06-20"}},
		ContentType: "application/json", Body: `{"text":"<http://x> & \u2028 \"q\""}`}} {
		e := New(id, 2, at, "w", AttemptID(id, 1), &WriteStartedData{Attempt: 1, IdempotencyKey: IdempotencyKey(id), Deadline: at, Request: req})
		raw, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		d := got.Data.(*WriteStartedData)
		if !d.Request.Equal(req) {
			t.Fatalf("decoded %+v, want %+v", d.Request, req)
		}
		var strict WriteStartedData
		body, _ := json.Marshal(e.Data)
		if err := strictUnmarshal(body, &strict); err != nil || !strict.Request.Equal(req) {
			t.Fatalf("strict: %+v %v", strict.Request, err)
		}
		if req == nil && strings.Contains(string(raw), `"request"`) {
			t.Fatalf("an attempt without a recorded request writes %s", raw)
		}
	}
}
