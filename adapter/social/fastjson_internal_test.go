package social

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// The fast paths of fastjson.go against the full way, on generated hostile
// input (TestXAgrees) and under the fuzzer (FuzzXAgrees).

// TestScanString: scanString, eight bytes at a time or one, reads a string
// exactly where encoding/json finds a valid one, and says plain exactly
// when it holds no escape; likewise skipValue for any value.
func TestScanString(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	const alphabet = "ab\"\\/\x00\x1f\x20\x7f\x80\xffu0Fnt"
	for range 200000 {
		b := make([]byte, 1+r.Intn(40))
		b[0] = '"'
		for i := 1; i < len(b); i++ {
			b[i] = alphabet[r.Intn(len(alphabet))]
			if r.Intn(3) > 0 {
				b[i] = 'a'
			}
		}
		if r.Intn(2) == 0 {
			b = append(b, '"')
		}
		end, plain, ok := scanString(b, 0)
		if valid := json.Valid(b); (ok && skipSpace(b, end) == len(b)) != valid {
			t.Fatalf("scanString(%q) = %d, %v; json.Valid: %v", b, end, ok, valid)
		}
		if ok && plain != !bytes.Contains(b[:end], []byte{'\\'}) {
			t.Fatalf("scanString(%q) = %d, plain %v", b, end, plain)
		}
		if end, ok := skipValue(b, 0, 0); (ok && skipSpace(b, end) == len(b)) != json.Valid(b) {
			t.Fatalf("skipValue(%q) = %d, %v", b, end, ok)
		}
	}
}

// --- the POST's response ---

// agreeCreated checks createdPost, and createdPostFast where it takes raw,
// against json.Unmarshal into an apiPost. It reports whether the fast path
// took raw.
func agreeCreated(t *testing.T, raw []byte) (taken bool) {
	t.Helper()
	var full apiPost
	err := json.Unmarshal(raw, &full)
	id, u, ok := createdPost(raw)
	if ok != (err == nil) || (ok && (id != full.ID || u != full.URL)) {
		t.Fatalf("createdPost(%q) = %q, %q, %v; json.Unmarshal: %q, %q, %v", raw, id, u, ok, full.ID, full.URL, err)
	}
	id, u, ok = createdPostFast(raw)
	if !ok {
		return false
	}
	if err != nil || id != full.ID || u != full.URL {
		t.Fatalf("createdPostFast(%q) = %q, %q; json.Unmarshal: %q, %q, %v", raw, id, u, full.ID, full.URL, err)
	}
	return true
}

// sampleResponse is a POST's response as the API (fakeapi) writes it.
func sampleResponse(id, body string, assets []string) []byte {
	if assets == nil {
		assets = []string{}
	}
	p := fakeapi.Post{ID: id, URL: "http://127.0.0.1:8080/p/" + id, AuthorID: "acct_1", Body: body, Assets: assets,
		Visibility: "public", CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)}
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // strings and a time: it cannot fail
	}
	return append(b, '\n')
}

// gen builds hostile JSON-ish text from a seeded source.
type gen struct{ r *rand.Rand }

func (g gen) pick(ss ...string) string { return ss[g.r.Intn(len(ss))] }

// ws is JSON white space, or now and then something that is not.
func (g gen) ws() string {
	switch g.r.Intn(12) {
	case 0:
		return " "
	case 1:
		return "\n\t "
	case 2:
		return "\r\n"
	case 3:
		return g.pick("\u00a0", "\v", "\f", "\x00")
	default:
		return ""
	}
}

// jws is JSON white space only.
func (g gen) jws() string { return g.pick("", "", "", " ", "\t", "\r\n ") }

// str is a JSON string literal, well or badly formed.
func (g gen) str() string {
	return `"` + g.pick(
		"", "x", "post_1", "post 1", "http://h/p/1", "  ", "\u3000",
		"caf\u00e9", "cafe\u0301", "日本語 🎉", "a<b>&c", "\u2028",
		`\u0070ost`, `a\nb`, `\"`, `\\`, `\/`, `\ud800`, `\udc00x`, `\ud83c\udf89`, `\x`, `\u12`, `\u00e9`,
		"\xff", "\xe2\x82", "a\tb", "a\x01", "\x7f",
		"2025-01-02T03:04:05Z", "2025-01-02T03:04:05.123+01:00", "2025-13-02T03:04:05Z",
		"2025-01-02 03:04:05Z", `2025-01-02T03:04:05\u005a`, "2025-01-02T03:04:05z",
		strings.Repeat("ab", 32), strings.Repeat("AB", 32), strings.Repeat("0", 63), strings.Repeat("f", 65),
	) + g.pick(`"`, `"`, `"`, `"`, `"`, `"`, `"`, ``, `\"`)
}

// value is a JSON value of any type, nested up to depth.
func (g gen) value(depth int) string {
	n := 9
	if depth <= 0 {
		n = 7
	}
	switch g.r.Intn(n) {
	case 0, 1, 2:
		return g.str()
	case 3:
		return g.pick("0", "-1", "1.5", "1e3", "-0.0E+2", "01", "1.", "-", "1e", ".5", "1e400", "123456789012345678901234567890")
	case 4:
		return g.pick("null", "true", "false", "nul", "True", "nullx", "n")
	case 5:
		return g.pick("[]", "{}", "[", "{", "]", "}")
	case 6:
		return g.pick("", ",", ":", "'x'")
	case 7:
		var items []string
		for range g.r.Intn(4) {
			items = append(items, g.ws()+g.value(depth-1)+g.ws())
		}
		return "[" + strings.Join(items, g.pick(",", ",", ",", ", ", ",,", "")) + "]"
	default:
		return g.object(depth-1, nil)
	}
}

// object is a JSON object of members with keys from keys (or any key), in
// random order, with repeats.
func (g gen) object(depth int, keys []string, values ...func() string) string {
	var members []string
	for range g.r.Intn(6) {
		var k string
		if len(keys) > 0 && g.r.Intn(5) > 0 {
			k = keys[g.r.Intn(len(keys))]
		} else {
			k = g.str()
		}
		v := g.value(depth)
		if len(values) > 0 && g.r.Intn(2) == 0 {
			v = values[g.r.Intn(len(values))]()
		}
		members = append(members, g.ws()+k+g.ws()+g.pick(":", ":", ":", ":", "", "::")+g.ws()+v+g.ws())
	}
	return "{" + strings.Join(members, g.pick(",", ",", ",", ",", ",,", "")) + "}"
}

// damage is the bytes mutate puts in.
const damage = "\"\\{}[],: \x00\xff\x80a0nN\t\r\n"

// mutate damages b now and then: truncation, a byte changed, inserted or
// deleted, white space around it.
func (g gen) mutate(b []byte) []byte {
	b = bytes.Clone(b)
	switch g.r.Intn(8) {
	case 0:
		if len(b) > 0 {
			b = b[:g.r.Intn(len(b))]
		}
	case 1:
		if len(b) > 0 {
			b[g.r.Intn(len(b))] = damage[g.r.Intn(len(damage))]
		}
	case 2:
		if len(b) > 0 {
			i := g.r.Intn(len(b))
			b = append(b[:i], b[i+1:]...)
		}
	case 3:
		i := g.r.Intn(len(b) + 1)
		b = append(b[:i], append([]byte{damage[g.r.Intn(len(damage))]}, b[i:]...)...)
	case 4:
		b = append(append([]byte(g.ws()), b...), g.ws()...)
	}
	return b
}

// createdKeys are apiPost's keys as sent, and keys that only look like them.
var createdKeys = []string{
	`"id"`, `"url"`, `"author_id"`, `"body"`, `"assets"`, `"parent_id"`, `"visibility"`, `"created_at"`,
	`"ID"`, `"Url"`, `"Id"`, `"iD"`, `"URL"`, `"Body"`, `"CREATED_AT"`, `"ASSETS"`, `"VisiBility"`,
	`"aſſets"`, `"viſibility"`, `"\u0069d"`, `"ur\u006c"`, `"i\u0064"`, `"id "`, `" id"`, `"idx"`, `"ids"`,
	`"x"`, `"next_cursor"`, `"error"`, `"ıd"`, `"\u0130d"`, `""`, `"url\u0000"`,
}

func (g gen) response() []byte {
	if g.r.Intn(4) == 0 {
		// The API's own shape, then damaged.
		return g.mutate(sampleResponse(fmt.Sprintf("post_%d", g.r.Intn(100)), g.pick("hello", "a<b>&c \u2028", "日本"), nil))
	}
	assets := func() string {
		var items []string
		for range g.r.Intn(4) {
			items = append(items, g.pick(g.str(), "null", "1", "[]", `"`+strings.Repeat("ab", 32)+`"`))
		}
		return "[" + strings.Join(items, ",") + "]"
	}
	s := g.object(2, createdKeys, g.str, g.str, g.str, assets, func() string { return "null" })
	return g.mutate([]byte(g.ws() + s + g.ws()))
}

// TestCreatedPostAgrees: on many generated hostile responses, createdPost
// is json.Unmarshal's reading, and so is the fast path wherever it reads
// one; it takes the API's own responses.
func TestCreatedPostAgrees(t *testing.T) {
	for _, assets := range [][]string{nil, {strings.Repeat("ab", 32)}} {
		raw := sampleResponse("post_1", "body <&> \u2028 日本", assets)
		if !agreeCreated(t, raw) {
			t.Fatalf("the fast path did not take the API's response %q", raw)
		}
	}
	for _, raw := range []string{
		`{"id":"p","url":null}`, ` {} `, `{"id":"p","x":{"a":[1,{"b":null}],"c":-1.5e3}}`,
		`{"id":"p","created_at":null,"body":null,"assets":null}`, `{"id":"p","assets":["a",null]}`,
	} {
		if !agreeCreated(t, []byte(raw)) {
			t.Fatalf("the fast path did not take %q", raw)
		}
	}
	g := gen{rand.New(rand.NewSource(11))}
	agreeOnMany(t, 40000, "responses", func() bool { return agreeCreated(t, g.response()) })
}

// agreeOnMany runs agree (one generated input: true when the fast path
// took it) n times and fails when the fast path took fewer than one in 50:
// an agreement that holds only because the fast path never runs proves
// nothing.
func agreeOnMany(t *testing.T, n int, what string, agree func() bool) {
	t.Helper()
	taken := 0
	for range n {
		if agree() {
			taken++
		}
	}
	t.Logf("the fast path took %d of %d", taken, n)
	if taken < n/50 {
		t.Fatalf("the fast path took only %d of %d generated %s", taken, n, what)
	}
}

// FuzzCreatedPostAgrees: whatever the fast path takes, json.Unmarshal reads
// the same; createdPost is json.Unmarshal's reading.
func FuzzCreatedPostAgrees(f *testing.F) {
	f.Add(sampleResponse("post_1", "hello <&>", nil))
	f.Add(sampleResponse("post_2", "x", []string{strings.Repeat("ab", 32)}))
	for _, s := range []string{
		`{"id":"p","url":null}`, `{"ID":"p"}`, `{"id":"p","id":"q"}`, `{"\u0069d":"p"}`, `{"id":"\u0070"}`,
		`{"id":"p","created_at":"2025-01-02T03:04:05Z"}`, `{"id":"p","created_at":"x"}`, `{"id":1}`,
		`{"id":"p","aſſets":[1]}`, `{"id":"p","x":[{"y":[]}]}`, `{"id":"p"} x`, `{"id":"p",}`, "{\"id\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		agreeCreated(t, raw)
	})
}

// --- the caller's payload ---

// agreeNormalize checks NormalizePayload, and normalizeFast where it takes
// raw, against normalizeFull: the same value and the same error. It
// reports whether the fast path took raw.
func agreeNormalize(t *testing.T, raw []byte) (taken bool) {
	t.Helper()
	want, werr := normalizeFull(bytes.Clone(raw))
	got, gerr := NormalizePayload(bytes.Clone(raw))
	if !bytes.Equal(got, want) || !reflect.DeepEqual(gerr, werr) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("NormalizePayload(%q) = %q, %v; the full way: %q, %v", raw, got, gerr, want, werr)
	}
	fast, ok := normalizeFast(raw)
	if !ok {
		return false
	}
	if werr != nil || !bytes.Equal(fast, want) {
		t.Fatalf("normalizeFast(%q) = %q; the full way: %q, %v", raw, fast, want, werr)
	}
	return true
}

var payloadKeys = []string{
	`"body"`, `"assets"`, `"Body"`, `"BODY"`, `"Assets"`, `"b\u006fdy"`, `"assets "`, `"bod"`, `"title"`, `""`, `"a b"`,
}

func (g gen) hex() string {
	h := strings.Repeat("0123456789abcdef", 4)
	b := []byte(h)
	g.r.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
	return string(b)
}

func (g gen) body() string {
	s := g.pick(
		"hello", "x", "  padded  ", "ünïcödé — 日本語 🎉", "quote's & <tags>", "tab-free\u007fdel", "\u2028",
		"cafe\u0301", "e\u0301\u0301", "\u00a0", " \u3000 ", "\u0085", "a\rb", "a\r\nb", "\xff", "\xed\xa0\x80",
		`a\nb`, `\u0061`, `\ud800`, `\"`, "a\tb", "\x00", strings.Repeat("long ", 200), "Å", "\u212b",
	)
	if g.r.Intn(3) == 0 {
		s = fmt.Sprintf("post %d %s", g.r.Intn(1000), s)
	}
	return `"` + s + `"`
}

func (g gen) assets() string {
	var items []string
	for range g.r.Intn(4) {
		items = append(items, g.ws()+g.pick(
			`"`+g.hex()+`"`, `"`+g.hex()+`"`, `"`+g.hex()+`"`, `"`+strings.ToUpper(g.hex())+`"`,
			`"`+g.hex()[:63]+`"`, `"`+g.hex()+`0"`, `"\u0030`+g.hex()[1:]+`"`, "null", "1", `""`, "[]",
		)+g.ws())
	}
	return "[" + strings.Join(items, g.pick(",", ",", ",", ",,", "")) + "]"
}

func (g gen) payload() []byte {
	var s string
	switch g.r.Intn(3) {
	case 0:
		// The common shapes, each member once, in either order.
		ws := g.ws
		if g.r.Intn(2) == 0 {
			ws = g.jws
		}
		m := []string{ws() + `"body"` + ws() + ":" + ws() + g.body() + ws()}
		if g.r.Intn(2) == 0 {
			m = append(m, ws()+`"assets"`+ws()+":"+ws()+g.assets()+ws())
		}
		g.r.Shuffle(len(m), func(i, j int) { m[i], m[j] = m[j], m[i] })
		s = "{" + strings.Join(m, ",") + "}"
		if g.r.Intn(2) == 0 {
			return []byte(s)
		}
	default:
		s = g.object(1, payloadKeys, g.body, g.body, g.assets, func() string { return "null" })
	}
	return g.mutate([]byte(g.ws() + s + g.ws()))
}

// TestNormalizeAgrees: on many generated hostile payloads, NormalizePayload
// gives the full way's value and error, and so does the fast path
// wherever it reads one; it takes the common shapes.
func TestNormalizeAgrees(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for _, raw := range []string{
		`{"body":"x"}`, `{"assets":[],"body":"x"}`, `{"body":"x","assets":[]}`,
		` { "body" : "日本 <&>" , "assets" : [ "` + h + `" , "` + h + `" ] } `,
		`{"assets":["` + h + `"],"body":"x"}`,
		testharness.JSON(t, map[string]string{"body": "Benchmark post for settle: " + strings.Repeat("lorem ipsum ", 16)}),
	} {
		if !agreeNormalize(t, []byte(raw)) {
			t.Fatalf("the fast path did not take %q", raw)
		}
	}
	g := gen{rand.New(rand.NewSource(13))}
	agreeOnMany(t, 20000, "payloads", func() bool { return agreeNormalize(t, g.payload()) })
}

// FuzzNormalizeAgrees: NormalizePayload gives the full way's value and
// error; whatever the fast path takes, the full way reads the same.
func FuzzNormalizeAgrees(f *testing.F) {
	h := strings.Repeat("0f", 32)
	for _, s := range []string{
		`{"body":"x"}`,
		`{"body":"hello 日本","assets":["` + h + `"]}`,
		` {"assets" : ["` + h + `","` + h + `"] ,"body":" y "} `,
		`{"body":"e` + "\u0301" + `"}`, `{"body":"a\nb"}`, `{"body":"\u00a0"}`, `{"body":"x","body":"y"}`,
		`{"body":"x","assets":null}`, `{"body":"x","Assets":[]}`, `{"body":"x"}}`, "{\"body\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		agreeNormalize(t, raw)
	})
}

// --- the request body ---

func agreeCreateBody(t *testing.T, c createBody) {
	t.Helper()
	want, werr := json.Marshal(c)
	got, gerr := encodeCreateBody(c)
	if !bytes.Equal(got, want) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("encodeCreateBody(%#v) = %q, %v; json.Marshal: %q, %v", c, got, gerr, want, werr)
	}
}

// TestCreateBodyAgrees: encodeCreateBody is json.Marshal's, byte for byte,
// on generated strings of every kind json.Marshal escapes.
func TestCreateBodyAgrees(t *testing.T) {
	r := rand.New(rand.NewSource(17))
	pieces := []string{
		"", "a", "acct_1", " ", "日本語", "🎉", "é", "<", ">", "&", "\"", "\\", "/", "\x00", "\n", "\r", "\t",
		"\x1f", "\x7f", "\u2028", "\u2029", "\u2027", "\xff", "\xe2\x80", "\xed\xa0\x80", "\ufffd", strings.Repeat("ab", 32),
	}
	s := func() string {
		var b strings.Builder
		for range r.Intn(5) {
			b.WriteString(pieces[r.Intn(len(pieces))])
		}
		return b.String()
	}
	for range 50000 {
		c := createBody{Account: s(), Body: s(), ParentID: s()}
		switch r.Intn(3) {
		case 0:
		case 1:
			c.Assets = []string{}
		default:
			for range 1 + r.Intn(3) {
				c.Assets = append(c.Assets, s())
			}
		}
		agreeCreateBody(t, c)
	}
}

// FuzzCreateBodyAgrees: encodeCreateBody is json.Marshal's, byte for byte.
// assets is split at NUL bytes; noAssets leaves them nil.
func FuzzCreateBodyAgrees(f *testing.F) {
	f.Add("acct_1", "hello", "", strings.Repeat("ab", 32), false)
	f.Add("acct_1", "a<b>&c\u2028", "post_1", "", false)
	f.Add("a\"", "\xff", "\n", "x\x00y", false)
	f.Add("acct", "x", "", "", true)
	f.Fuzz(func(t *testing.T, account, body, parent, assets string, noAssets bool) {
		c := createBody{Account: account, Body: body, ParentID: parent}
		if !noAssets {
			c.Assets = strings.Split(assets, "\x00")
		}
		agreeCreateBody(t, c)
	})
}

// --- benchmarks: each fast path against the full way ---

var benchPostBody = "Benchmark post for settle: the ledger records every external write intent before the write and settles lost responses without a second write. " +
	strings.Repeat("lorem ipsum ", 16) + " req-000123"

func BenchmarkCreatedPost(b *testing.B) {
	raw := sampleResponse("post_000123", benchPostBody, nil)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if id, _, ok := createdPost(raw); !ok || id == "" {
				b.Fatal("unread")
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p apiPost
			if err := json.Unmarshal(raw, &p); err != nil || p.ID == "" {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkNormalizePayload(b *testing.B) {
	raw := []byte(testharness.JSON(b, map[string]string{"body": benchPostBody}))
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := NormalizePayload(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := normalizeFull(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkCreateBody(b *testing.B) {
	c := createBody{Account: "acct_1", Body: benchPostBody, Assets: []string{}}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeCreateBody(c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
