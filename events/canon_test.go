package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// canonGolden: input -> exact canon/v1 bytes. The expected outputs were
// cross-checked against an independent implementation (JavaScript:
// String.prototype.normalize("NFC"), default Array sort, JSON.stringify).
var canonGolden = []struct {
	name string
	in   string
	want string
}{
	// Key order.
	{"keys sorted", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
	{"keys sorted nested", `{"z":{"y":1,"x":2},"a":[{"d":1,"c":2}]}`, `{"a":[{"c":2,"d":1}],"z":{"x":2,"y":1}}`},
	{"keys prefix and case", `{"ab":1,"a":2,"B":3,"":4}`, `{"":4,"B":3,"a":2,"ab":1}`},
	// U+FF21 sorts before U+1F600 in UTF-8 byte order (EF.. < F0..) but
	// after it in UTF-16 order (FF21 > D83D); U+20AC is first in both.
	{"keys utf16 order", `{"\uff21":1,"\ud83d\ude00":2,"\u20ac":3}`,
		"{\"\u20ac\":3,\"\U0001F600\":2,\"\uff21\":1}"},
	{"keys utf16 order raw utf8", "{\"\uff21\":1,\"\U0001F600\":2}", "{\"\U0001F600\":2,\"\uff21\":1}"},
	// RFC 8785 §3.2.3 sorting example, with canon/v1's normalisation: the
	// "\r" key becomes "\n" and U+FB33 (a composition exclusion) becomes
	// U+05D3 U+05BC under NFC, which moves it before the Euro sign.
	{"rfc8785 sort example normalised",
		`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
		"{\"\\n\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u05d3\u05bc\":\"Hebrew Letter Dalet With Dagesh\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\"}"},

	// Whitespace.
	{"whitespace", " { \"a\" : [ 1 , 2 ] ,\n\t\"b\" : { } , \"c\" : [ ] } \r\n", `{"a":[1,2],"b":{},"c":[]}`},
	{"whitespace in strings kept", `{"a":" x  y "}`, `{"a":" x  y "}`},

	// NFC.
	{"nfc escaped", `"e\u0301"`, "\"\u00e9\""},
	{"nfc raw", "\"e\u0301\"", "\"\u00e9\""},
	{"nfc already", `"\u00e9"`, "\"\u00e9\""},
	{"nfc key", `{"e\u0301":1}`, "{\"\u00e9\":1}"},
	{"nfc hangul jamo", `"\u1100\u1161"`, "\"\uac00\""},
	{"nfc reorders marks", `"a\u0323\u0307"`, "\"\u1ea1\u0307\""},

	// Newlines.
	{"crlf", `"a\r\nb"`, `"a\nb"`},
	{"lone cr", `"a\rb"`, `"a\nb"`},
	{"cr cr lf", `"a\r\r\nb"`, `"a\n\nb"`},
	{"lf cr", `"a\n\rb"`, `"a\n\nb"`},
	{"crlf key", `{"a\r\nb":1}`, `{"a\nb":1}`},

	// Escapes.
	{"short escapes", `"\"\\\/\b\f\n\t"`, `"\"\\/\b\f\n\t"`},
	{"control escapes lowercase hex", `"\u0000\u0001\u001F\u001f\u000B"`, `"\u0000\u0001\u001f\u001f\u000b"`},
	{"no escape above 0x1f", `"\u007f\u0080<>&'\u2028\u2029"`, "\"\x7f\u0080<>&'\u2028\u2029\""},
	{"unicode escapes decoded", `"\u00e9\u20AC\ud83d\ude00"`, "\"\u00e9\u20ac\U0001F600\""},
	{"raw utf8 kept", "\"\u00e9\u20ac\U0001F600\"", "\"\u00e9\u20ac\U0001F600\""},

	// Numbers (ECMAScript Number.prototype.toString).
	{"num 1e21", `1e21`, `1e+21`},
	{"num 1e-7", `1e-7`, `1e-7`},
	{"num 0.000001", `0.000001`, `0.000001`},
	{"num 0.0000001", `0.0000001`, `1e-7`},
	{"num 100", `100`, `100`},
	{"num 1.5e3", `1.5e3`, `1500`},
	{"num -0", `-0`, `0`},
	{"num -0.0", `-0.0`, `0`},
	{"num 0", `0`, `0`},
	{"num 123456789012", `123456789012`, `123456789012`},
	{"num 0.1", `0.1`, `0.1`},
	{"num 1e300", `1e300`, `1e+300`},
	{"num 5e-324", `5e-324`, `5e-324`},
	{"num -1.25", `-1.25`, `-1.25`},
	{"num 1E2", `1E2`, `100`},
	{"num 12.0", `12.0`, `12`},
	{"num 1e20", `1e20`, `100000000000000000000`},
	{"num 1E+2", `1E+2`, `100`},
	{"num 123e-20", `123e-20`, `1.23e-18`},
	{"num 0.30000000000000004", `0.30000000000000004`, `0.30000000000000004`},
	{"num 2^53", `9007199254740992`, `9007199254740992`},
	{"num -2^53", `-9007199254740992`, `-9007199254740992`},
	// Integer literals beyond 2^53 are accepted only when already canonical
	// (exact, and printed the same by ECMAScript); see TestCanonErrors.
	{"num canonical int above 2^53", `100000000000000000000`, `100000000000000000000`},
	{"num 2^54", `18014398509481984`, `18014398509481984`},
	{"num 2^53+2 exact", `-9007199254740994`, `-9007199254740994`},
	{"num fraction above 2^53 rounds", `9007199254740993.0`, `9007199254740992`},
	{"num underflow", `1e-400`, `0`},
	{"num max float", `1.7976931348623157e308`, `1.7976931348623157e+308`},
	{"num rfc 333333333", `333333333.33333329`, `333333333.3333333`},
	{"num 1e23", `1e23`, `1e+23`},
	{"num 4.35", `4.35`, `4.35`},
	{"num -1e-7", `-1e-7`, `-1e-7`},

	// Structure and literals.
	{"nested", `[[],[[]],{"a":{"b":{"c":[1,{"d":null}]}}}]`, `[[],[[]],{"a":{"b":{"c":[1,{"d":null}]}}}]`},
	{"literals", `[ true , false , null ]`, `[true,false,null]`},
	{"top true", ` true `, `true`},
	{"top false", `false`, `false`},
	{"top null", "\tnull\n", `null`},
	{"top string", `"x"`, `"x"`},
	{"empty object", `{ }`, `{}`},
	{"empty array", `[ ]`, `[]`},
	{"payment", "{ \"amount\" : 1.50E3, \"memo\" : \"caf\\u0065\\u0301\\r\\nok\", \"tags\":[\"x\",\"y\"] }",
		"{\"amount\":1500,\"memo\":\"caf\u00e9\\nok\",\"tags\":[\"x\",\"y\"]}"},
}

func TestCanonGolden(t *testing.T) {
	for _, tc := range canonGolden {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tc.in))
			if err != nil {
				t.Fatalf("Canonicalize(%q): %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Fatalf("Canonicalize(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			// The canonical form is a fixed point.
			again, err := Canonicalize(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("not idempotent: %q -> %q, %v", got, again, err)
			}
		})
	}
}

// TestCanonNumberVectors checks the number serialiser against the IEEE 754
// test vectors of RFC 8785 Appendix B.
func TestCanonNumberVectors(t *testing.T) {
	vectors := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, v := range vectors {
		f := math.Float64frombits(v.bits)
		if got := string(canonAppendNumber(nil, f)); got != v.want {
			t.Errorf("%016x: got %s, want %s", v.bits, got, v.want)
		}
		// Through the public API too, from Go's own shortest rendering.
		// Integer-looking renderings above 2^53 are refused by design, so
		// feed an exponent form.
		in := strconv.FormatFloat(f, 'e', -1, 64)
		got, err := Canonicalize([]byte(in))
		if err != nil || string(got) != v.want {
			t.Errorf("Canonicalize(%s) = %q, %v; want %s", in, got, err, v.want)
		}
	}
}

func TestCanonPayloadSHA256(t *testing.T) {
	// Digests computed independently with
	//   printf '%s' '<canonical form>' | sha256sum
	cases := []struct {
		in   string
		want string
	}{
		{` { "b" : 1 , "a" : 2 } `, "d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772"},
		{"{ \"tags\":[\"x\",\"y\"], \"memo\" : \"cafe\\u0301\\r\\nok\", \"amount\" : 1.50E3 }",
			"08995393f2d69570f677634a38bd9e0b7e59590928409d4d1b0ce8938582c0c6"},
		{canonGolden[5].in, "ba78dbb0b68777c2c8e0be944f0b47a1b8392f10d3e15569d51fec6a002a54bf"},
	}
	for _, tc := range cases {
		got, err := PayloadSHA256([]byte(tc.in))
		if err != nil {
			t.Fatalf("PayloadSHA256(%q): %v", tc.in, err)
		}
		if got != tc.want {
			t.Errorf("PayloadSHA256(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// Equivalent payloads hash the same; different payloads do not.
	a, _ := PayloadSHA256([]byte(`{"text":"e\u0301\r\n","n":1.0}`))
	b, _ := PayloadSHA256([]byte("{\"n\":1,\"text\":\"\u00e9\\n\"}"))
	c, _ := PayloadSHA256([]byte("{\"n\":2,\"text\":\"\u00e9\\n\"}"))
	if a != b || a == c || len(a) != 64 || strings.ToLower(a) != a {
		t.Errorf("hash equivalence: a=%s b=%s c=%s", a, b, c)
	}
	if h, err := PayloadSHA256([]byte(`{"a":1,"a":2}`)); err == nil || h != "" || !errors.Is(err, ErrNotCanonicalizable) {
		t.Errorf("PayloadSHA256 of bad input = %q, %v", h, err)
	}
}

func TestCanonErrors(t *testing.T) {
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	deepPath := func(n int, seg string) string { return "$" + strings.Repeat(seg, n) }
	big := `"` + strings.Repeat("a", canonMaxBytes-1) + `"`

	cases := []struct {
		name   string
		in     string
		path   string
		reason string
	}{
		{"empty", ``, "$", "unexpected end of input"},
		{"only space", "  \n", "$", "unexpected end of input"},
		{"bad literal", `{"a":tru}`, "$.a", "expected true"},
		{"bad literal null", `[nul]`, "$[0]", "expected null"},
		{"unknown token", `[1,@]`, "$[1]", "unexpected '@'"},
		{"trailing comma array", `[1,2,]`, "$[2]", "unexpected ']'"},
		{"trailing comma object", `{"a":1,}`, "$", "expected an object key string"},
		{"missing colon", `{"a" 1}`, "$.a", "expected ':'"},
		{"unquoted key", `{a:1}`, "$", "expected an object key string"},
		{"unclosed object", `{"a":1`, "$.a", "expected ',' or '}'"},
		{"unclosed array", `[1,[2]`, "$[1]", "expected ',' or ']'"},
		{"missing comma", `[1 2]`, "$[0]", "expected ',' or ']'"},
		{"trailing data", `[1] x`, "$", "trailing data"},
		{"two documents", `{} {}`, "$", "trailing data"},
		{"trailing nul", "1\x00", "$", "trailing data"},
		{"bom", "\xef\xbb\xbf{}", "$", "byte 0xef"},
		{"unterminated string", `"abc`, "$", "unterminated string"},
		{"bad escape", `["a","\q"]`, "$[1]", "bad escape 'q'"},
		{"bad u escape", `"\u12G4"`, "$", "bad \\u escape"},
		{"short u escape", `"\u12"`, "$", "bad \\u escape"},
		{"lone high surrogate", `"\ud800"`, "$", "lone high surrogate"},
		{"high surrogate then bmp", `"\ud800\u0041"`, "$", "lone high surrogate"},
		{"lone low surrogate", `{"k":"\udc00"}`, "$.k", "lone low surrogate"},
		{"raw control char", "\"a\x01b\"", "$", "unescaped control character 0x01"},
		{"raw newline", "[\"a\nb\"]", "$[0]", "unescaped control character 0x0a"},
		{"invalid utf8 value", "{\"assets\":[\"ok\",\"ok\",\"\xff\"]}", "$.assets[2]", "invalid UTF-8"},
		{"invalid utf8 truncated", "\"ab\xe2\x82\"", "$", "invalid UTF-8 in string at offset 3"},
		{"invalid utf8 surrogate encoded", "\"\xed\xa0\x80\"", "$", "invalid UTF-8"},
		{"invalid utf8 key", "{\"a\xff\":1}", "$", "invalid UTF-8"},
		{"invalid utf8 outside string", "[1,\xff]", "$[1]", "byte 0xff"},
		{"duplicate key", `{"a":1,"a":2}`, "$.a", `duplicate object key "a"`},
		{"duplicate key via escape", `{"a":1,"\u0061":2}`, "$.a", `duplicate object key "a"`},
		{"duplicate key nested", `{"x":[{"id":1,"id":1}]}`, "$.x[0].id", "duplicate object key"},
		{"duplicate key after nfc", `{"x":{"\u00e9":1,"e\u0301":2}}`, "$.x[\"\u00e9\"]", "after newline/NFC normalisation"},
		{"duplicate key after newline", `{"a\r\nb":1,"a\nb":2}`, `$["a\nb"]`, "after newline/NFC normalisation"},
		{"duplicate key after lone cr", `{"a\rb":1,"a\nb":2}`, `$["a\nb"]`, "after newline/NFC normalisation"},
		{"int above 2^53", `{"amount":9007199254740993}`, "$.amount", "send it as a string"},
		{"negative int above 2^53", `[-9007199254740993]`, "$[0]", "exceeds 2^53"},
		{"int 20 digits", `{"a":{"b":[0,12345678901234567890]}}`, "$.a.b[1]", "send it as a string"},
		{"int 2^53+3 rounds", `9007199254740995`, "$", "exceeds 2^53"},
		{"int 1e21 spelled out", `1000000000000000000000`, "$", "send it as a string"},
		{"int 21 nines", `[999999999999999999999]`, "$[0]", "send it as a string"},
		{"int huge", strings.Repeat("9", 500), "$", "send it as a string"},
		{"overflow", `1e309`, "$", "overflows float64"},
		{"overflow negative", `{"n":[0,-1.8e308]}`, "$.n[1]", "overflows float64"},
		{"overflow long exponent", `1e99999999999999999999`, "$", "overflows float64"},
		{"leading zero", `01`, "$", "leading zero"},
		{"leading zero negative", `[-01]`, "$[0]", "leading zero"},
		{"lone minus", `-`, "$", "malformed number"},
		{"minus letter", `-a`, "$", "malformed number"},
		{"dot no digits", `1.`, "$", "no digits after '.'"},
		{"exp no digits", `1e+`, "$", "no digits in exponent"},
		{"leading dot", `.5`, "$", "unexpected '.'"},
		{"leading plus", `+1`, "$", "unexpected '+'"},
		{"hex number", `0x10`, "$", "trailing data"},
		{"nan", `NaN`, "$", "unexpected 'N'"},
		{"too deep arrays", deep(canonMaxDepth+1, "[", "]"), deepPath(canonMaxDepth, "[0]"), "deeper than 64"},
		{"too deep objects", deep(canonMaxDepth+1, `{"k":`, "}"), deepPath(canonMaxDepth, ".k"), "deeper than 64"},
		{"too deep mixed", `{"a":` + deep(canonMaxDepth, "[", "]") + `}`, "$.a" + strings.Repeat("[0]", canonMaxDepth-1), "deeper than 64"},
		{"too large", big + " ", "$", "limit is 1048576"},
		{"canonical form too large", `"a` + strings.Repeat("\u0301", (canonMaxBytes-3)/2) + `"`, "$", "canonical form is"},
		{"too large whitespace", strings.Repeat(" ", canonMaxBytes) + "1", "$", "limit is 1048576"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Canonicalize([]byte(tc.in))
			if err == nil {
				t.Fatalf("Canonicalize(%.80q) = %.80q, want error", tc.in, out)
			}
			if out != nil {
				t.Errorf("output %q returned alongside error", out)
			}
			var ce *CanonError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is not a *CanonError", err, err)
			}
			if !errors.Is(err, ErrNotCanonicalizable) {
				t.Errorf("errors.Is(%v, ErrNotCanonicalizable) = false", err)
			}
			if ce.Path != tc.path {
				t.Errorf("path = %q, want %q (reason %q)", ce.Path, tc.path, ce.Reason)
			}
			if !strings.Contains(ce.Reason, tc.reason) {
				t.Errorf("reason = %q, want it to contain %q", ce.Reason, tc.reason)
			}
			if want := "canon/v1: " + ce.Path + ": " + ce.Reason; err.Error() != want {
				t.Errorf("Error() = %q, want %q", err.Error(), want)
			}
			if _, err := PayloadSHA256([]byte(tc.in)); !errors.Is(err, ErrNotCanonicalizable) {
				t.Errorf("PayloadSHA256 error = %v", err)
			}
		})
	}
}

func TestCanonLimitsInclusive(t *testing.T) {
	// Exactly 64 levels is accepted.
	for _, in := range []string{
		strings.Repeat("[", canonMaxDepth) + strings.Repeat("]", canonMaxDepth),
		strings.Repeat(`{"k":`, canonMaxDepth) + "1" + strings.Repeat("}", canonMaxDepth),
	} {
		got, err := Canonicalize([]byte(in))
		if err != nil || string(got) != in {
			t.Errorf("depth %d: got %.40q, %v", canonMaxDepth, got, err)
		}
	}
	// Exactly 1 MiB is accepted.
	in := `"` + strings.Repeat("a", canonMaxBytes-2) + `"`
	got, err := Canonicalize([]byte(in))
	if err != nil || string(got) != in {
		t.Errorf("1 MiB input: len %d, %v", len(got), err)
	}
	// The error value is not a sentinel for other packages' errors.
	if errors.Is(errors.New("x"), ErrNotCanonicalizable) || errors.Is(&CanonError{}, ErrInvalidField) {
		t.Error("CanonError matching is too broad")
	}
	// Wrapped CanonErrors still match.
	_, err = Canonicalize([]byte(`{"a":1,"a":1}`))
	if w := fmt.Errorf("post: %w", err); !errors.Is(w, ErrNotCanonicalizable) {
		t.Errorf("wrapped error does not match: %v", w)
	}
}

// --- property tests over generated documents ---------------------------------

// canonGenAlphabet is the rune pool for generated strings: ASCII, characters
// that must be escaped, newline variants, combining marks and precomposed
// forms (NFC), non-BMP and high-BMP characters (UTF-16 order), U+2028/9.
var canonGenAlphabet = []rune{
	'a', 'b', 'e', 'z', 'A', '0', ' ', '/', '<', '&', '"', '\\',
	'\r', '\n', '\t', '\b', '\f', 0x00, 0x1f, 0x7f, 0x80,
	0x0301, 0x0323, 0x0307, 0x00e9, 0x1100, 0x1161, 0xac00, 0xfb33, 0x212b,
	0x20ac, 0xff21, 0xfffd, 0x2028, 0x2029, 0x1f600, 0x10ffff, 0x1d160,
}

type canonGen struct{ r *rand.Rand }

func (g canonGen) str(maxLen int) string {
	n := g.r.Intn(maxLen + 1)
	rs := make([]rune, n)
	for i := range rs {
		rs[i] = canonGenAlphabet[g.r.Intn(len(canonGenAlphabet))]
	}
	return string(rs)
}

// value builds a random JSON value as a Go tree (map[string]any, []any,
// string, float64, bool, nil) together with a number literal spelling for
// each float64 so the writer can vary its form.
func (g canonGen) value(depth int) any {
	k := g.r.Intn(10)
	if depth <= 0 && k >= 8 {
		k = g.r.Intn(8)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return g.r.Intn(2) == 0
	case 2, 3:
		return g.str(8)
	case 4:
		return float64(g.r.Int63n(1<<54) - 1<<53) // integers within ±2^53
	case 5:
		return float64(g.r.Intn(2001) - 1000)
	case 6:
		for {
			f := math.Float64frombits(g.r.Uint64())
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f
			}
		}
	case 7:
		return g.r.NormFloat64() * math.Pow(10, float64(g.r.Intn(50)-25))
	case 8:
		n := g.r.Intn(5)
		a := make([]any, n)
		for i := range a {
			a[i] = g.value(depth - 1)
		}
		return a
	default:
		n := g.r.Intn(5)
		m := map[string]any{}
		seen := map[string]bool{}
		for i := 0; i < n; i++ {
			key := g.str(4)
			nk := canonTestNormalize(key)
			if seen[nk] {
				continue // would be a (normalisation) duplicate
			}
			seen[nk] = true
			m[key] = g.value(depth - 1)
		}
		return m
	}
}

// canonTestNormalize is the test's own statement of the string rule.
func canonTestNormalize(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return norm.NFC.String(s)
}

// write renders v as JSON text. With vary set, whitespace, string escapes,
// number spellings and member order are chosen at random.
func (g canonGen) write(b *bytes.Buffer, v any, vary bool) {
	ws := func() {
		if vary {
			b.WriteString([]string{"", "", " ", "\n", "\t", "\r\n  "}[g.r.Intn(6)])
		}
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		g.writeString(b, v, vary)
	case float64:
		g.writeNumber(b, v, vary)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			ws()
			g.write(b, e, vary)
			ws()
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys) // map order is random; keep runs reproducible
		if vary {
			g.r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		}
		b.WriteByte('{')
		ws()
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
				ws()
			}
			g.writeString(b, k, vary)
			ws()
			b.WriteByte(':')
			ws()
			g.write(b, v[k], vary)
			ws()
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("unexpected %T", v))
	}
}

func (g canonGen) writeString(b *bytes.Buffer, s string, vary bool) {
	b.WriteByte('"')
	for _, r := range s {
		mustEscape := r < 0x20 || r == '"' || r == '\\'
		if !mustEscape && (!vary || g.r.Intn(3) > 0) {
			b.WriteRune(r)
			continue
		}
		short := map[rune]string{'"': `\"`, '\\': `\\`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '/': `\/`}
		if e, ok := short[r]; ok && (!vary || g.r.Intn(2) == 0) {
			b.WriteString(e)
			continue
		}
		hexf := "\\u%04x"
		if vary && g.r.Intn(2) == 0 {
			hexf = "\\u%04X"
		}
		if r > 0xffff {
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(b, hexf+hexf, hi, lo)
		} else {
			fmt.Fprintf(b, hexf, r)
		}
	}
	b.WriteByte('"')
}

func (g canonGen) writeNumber(b *bytes.Buffer, f float64, vary bool) {
	if !vary {
		b.WriteString(strconv.FormatFloat(f, 'e', -1, 64))
		return
	}
	isInt := f == math.Trunc(f) && math.Abs(f) <= 1<<53
	switch g.r.Intn(4) {
	case 0:
		if isInt {
			b.WriteString(strconv.FormatFloat(f, 'f', -1, 64))
			return
		}
		fallthrough
	case 1:
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0" // a fraction keeps big whole numbers out of the 2^53 rule
		}
		b.WriteString(s)
	case 2:
		b.WriteString(strconv.FormatFloat(f, 'E', -1, 64))
	default:
		// Extra digits (more than shortest) still round to the same double.
		b.WriteString(strconv.FormatFloat(f, 'e', 20, 64))
	}
}

// canonNormalizeTree applies the string rule to every key and string of a
// decoded JSON tree.
func canonNormalizeTree(v any) any {
	switch v := v.(type) {
	case string:
		return canonTestNormalize(v)
	case []any:
		for i := range v {
			v[i] = canonNormalizeTree(v[i])
		}
		return v
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[canonTestNormalize(k)] = canonNormalizeTree(e)
		}
		return m
	}
	return v
}

// canonFindUnnormalized reports a string or key of a decoded tree that is
// not NFC or still contains a CR.
func canonFindUnnormalized(v any) (string, bool) {
	bad := func(s string) bool { return !norm.NFC.IsNormalString(s) || strings.ContainsRune(s, '\r') }
	switch v := v.(type) {
	case string:
		if bad(v) {
			return v, false
		}
	case []any:
		for _, e := range v {
			if s, ok := canonFindUnnormalized(e); !ok {
				return s, false
			}
		}
	case map[string]any:
		for k, e := range v {
			if bad(k) {
				return k, false
			}
			if s, ok := canonFindUnnormalized(e); !ok {
				return s, false
			}
		}
	}
	return "", true
}

func TestCanonProperties(t *testing.T) {
	g := canonGen{r: rand.New(rand.NewSource(8785))}
	for i := 0; i < 3000; i++ {
		v := g.value(4)
		var compact, varied bytes.Buffer
		g.write(&compact, v, false)
		g.write(&varied, v, true)

		out, err := Canonicalize(compact.Bytes())
		if err != nil {
			t.Fatalf("#%d Canonicalize(%q): %v", i, compact.Bytes(), err)
		}
		// Idempotent.
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("#%d not idempotent:\n  %q\n->%q (%v)", i, out, again, err)
		}
		// Insensitive to re-indenting.
		var indented bytes.Buffer
		if err := json.Indent(&indented, compact.Bytes(), "\t", "   "); err != nil {
			t.Fatalf("#%d json.Indent: %v", i, err)
		}
		if got, err := Canonicalize(indented.Bytes()); err != nil || !bytes.Equal(got, out) {
			t.Fatalf("#%d indented input differs:\n in %q\ngot %q (%v)\nwant %q", i, indented.Bytes(), got, err, out)
		}
		// Insensitive to whitespace, escaping, number spelling, member order.
		if got, err := Canonicalize(varied.Bytes()); err != nil || !bytes.Equal(got, out) {
			t.Fatalf("#%d varied input differs:\n in %q\ngot %q (%v)\nwant %q", i, varied.Bytes(), got, err, out)
		}
		// Semantics preserved: decoding the output gives the input's value
		// with every string normalised.
		var want, have any
		if err := json.Unmarshal(compact.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &have); err != nil {
			t.Fatalf("#%d output is not JSON: %q: %v", i, out, err)
		}
		if want = canonNormalizeTree(want); !reflect.DeepEqual(have, want) {
			t.Fatalf("#%d value changed:\n in %q\nout %q", i, compact.Bytes(), out)
		}
		// Compact: no insignificant whitespace survives re-compaction.
		var cb bytes.Buffer
		if err := json.Compact(&cb, out); err != nil || !bytes.Equal(cb.Bytes(), out) {
			t.Fatalf("#%d output not compact: %q", i, out)
		}
		// Every string in the output is NFC and free of CR.
		if s, ok := canonFindUnnormalized(have); !ok {
			t.Fatalf("#%d output string %+q not normalised: %+q", i, s, out)
		}
	}
}

// --- fuzzing ------------------------------------------------------------------

func FuzzCanonicalize(f *testing.F) {
	for _, tc := range canonGolden {
		f.Add([]byte(tc.in))
	}
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"\u00e9":1,"e\u0301":2}`, `9007199254740993`, `1e309`,
		`"\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", `[1,]`, `{"a":[1,{"b":null}]} x`,
		strings.Repeat("[", 70), `-0.0e-0`, `1E400`, `[1e-400]`, "\"a\r\r\nb\"",
	} {
		f.Add([]byte(s))
	}
	g := canonGen{r: rand.New(rand.NewSource(1))}
	for i := 0; i < 20; i++ {
		var b bytes.Buffer
		g.write(&b, g.value(3), true)
		f.Add(b.Bytes())
	}

	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			var ce *CanonError
			if !errors.As(err, &ce) || !errors.Is(err, ErrNotCanonicalizable) {
				t.Fatalf("error %T %v is not a *CanonError", err, err)
			}
			if !strings.HasPrefix(ce.Path, "$") || ce.Reason == "" {
				t.Fatalf("bad error fields: %+v", ce)
			}
			// Input encoding/json accepts may only be refused for a canon/v1
			// rule, never as a syntax error.
			if len(in) <= canonMaxBytes && utf8.Valid(in) && json.Valid(in) &&
				strings.HasPrefix(ce.Reason, "invalid JSON") {
				t.Fatalf("valid JSON %q refused as syntax error: %v", in, err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}
		// Bound: NFC grows UTF-8 at most 3x and a number at most from
		// "1e20" (4 bytes) to 21 bytes; nothing else grows.
		if len(out) > 6*len(in) {
			t.Fatalf("output %d bytes for %d bytes of input", len(out), len(in))
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q (%v)", out, again, err)
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, in, "", "  "); err == nil {
			if got, err := Canonicalize(indented.Bytes()); err == nil && !bytes.Equal(got, out) {
				t.Fatalf("indenting changed the output: %q vs %q", got, out)
			} else if err != nil && len(indented.Bytes()) <= canonMaxBytes {
				t.Fatalf("indented input refused: %v", err)
			}
		}
	})
}
