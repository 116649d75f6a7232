package social

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// agree checks that when parseCanonical takes raw, the full way reads the
// same payload from it.
func agree(t *testing.T, raw []byte) (taken bool) {
	t.Helper()
	fast, ok := parseCanonical(raw)
	if !ok {
		return false
	}
	full, err := parsePayloadFull(raw)
	if err != nil {
		t.Fatalf("parseCanonical took %q, the full way refuses it: %v", raw, err)
	}
	if !reflect.DeepEqual(fast, full) {
		t.Fatalf("parseCanonical read %q as %+v, the full way as %+v", raw, fast, full)
	}
	return true
}

// TestParseCanonicalAgrees: every canonical payload of a plain body is
// taken by the shortcut and read as the full way reads it; NormalizePayload's
// output reads back as its input.
func TestParseCanonicalAgrees(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	hex := func() string {
		const digits = "0123456789abcdef"
		b := make([]byte, 64)
		for i := range b {
			b[i] = digits[r.Intn(16)]
		}
		return string(b)
	}
	bodies := []string{"hello", "  padded  ", "ünïcödé — 日本語 🎉", "quote's & <tags>", "x", strings.Repeat("long ", 2000), "tab-free\u007fdel"}
	for i := 0; i < 500; i++ {
		body := bodies[r.Intn(len(bodies))]
		if i%3 == 0 {
			body = fmt.Sprintf("post %d %s", r.Int(), body)
		}
		assets := make([]string, r.Intn(4))
		for j := range assets {
			assets[j] = hex()
		}
		canon, err := canonicalPayload(body, assets)
		if err != nil {
			t.Fatal(err)
		}
		if !agree(t, canon) {
			t.Fatalf("the shortcut did not take the canonical payload %q", canon)
		}
		// And what NormalizePayload makes of a caller's layout reads back.
		caller := fmt.Sprintf(`{ "body": %s, "assets": [%s] }`, jsonString(t, body), quoteAll(t, assets))
		norm, err := NormalizePayload([]byte(caller))
		if err != nil {
			t.Fatalf("NormalizePayload(%s): %v", caller, err)
		}
		p, err := parsePayload(norm)
		if err != nil || p.Body != body || !reflect.DeepEqual(p.Assets, append([]string{}, assets...)) {
			t.Fatalf("parsePayload(%s) = %+v, %v: want body %q assets %v", norm, p, err, body, assets)
		}
	}
}

func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func quoteAll(t *testing.T, ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = jsonString(t, s)
	}
	return strings.Join(q, ",")
}

// TestParseCanonicalLeavesTheRest lists layouts the shortcut must leave to
// the full way (which then reads or refuses them, as before).
func TestParseCanonicalLeavesTheRest(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for _, raw := range []string{
		`{"body":"x","assets":[]}`,                                  // another member order
		`{"assets":[], "body":"x"}`,                                 // white space
		`{"assets":[],"body":"a\nb"}`,                               // an escape
		`{"assets":[],"body":"a\"b"}`,                               // an escaped quote
		`{"assets":[],"body":"e` + "\u0301" + `"}`,                  // not NFC (e + combining acute)
		`{"assets":[],"body":"` + "\xff" + `"}`,                     // not UTF-8
		`{"assets":[],"body":"` + "a\tb" + `"}`,                     // a raw control byte
		`{"assets":[],"body":"   "}`,                                // a blank body
		`{"assets":[],"body":""}`,                                   // an empty body
		`{"assets":["` + strings.ToUpper(h) + `"],"body":"x"}`,      // upper-case hex
		`{"assets":["` + h[:63] + `"],"body":"x"}`,                  // 63 hex digits
		`{"assets":["` + h + `",],"body":"x"}`,                      // a trailing comma
		`{"assets":["` + h + `" ,"` + h + `"],"body":"x"}`,          // a space
		`{"assets":[],"body":"x"} `,                                 // trailing data
		`{"assets":[],"body":"x"}}`,                                 // a second brace
		`{"assets":[],"body":"x","extra":1}`,                        // another member
		`{"assets":null,"body":"x"}`,                                // null assets
		`{"assets":[],"body":"` + strings.Repeat("y", 1<<16) + `"}`, // past the shortcut's size
	} {
		if _, ok := parseCanonical([]byte(raw)); ok {
			t.Errorf("the shortcut took %q", raw)
		}
	}
}

// FuzzParseCanonicalAgrees: whatever the shortcut takes, the full way
// reads the same.
func FuzzParseCanonicalAgrees(f *testing.F) {
	h := strings.Repeat("0f", 32)
	for _, s := range []string{
		`{"assets":[],"body":"x"}`,
		`{"assets":["` + h + `"],"body":"hello 日本"}`,
		`{"assets":["` + h + `","` + h + `"],"body":" y "}`,
		`{"assets":[],"body":"e` + "\u0301" + `"}`,
		`{"body":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		agree(t, raw)
	})
}
