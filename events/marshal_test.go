package events

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// Decode's one-pass path agrees with the careful path on every input it
// takes: same event, field for field.
func FuzzDecodeFastPathAgrees(f *testing.F) {
	good, _ := Encode(sampleRecorded())
	f.Add(good)
	started, _ := Encode(sampleStarted())
	f.Add(started)
	f.Add([]byte(`{"schema":"settle.event/v1","type":"WriteStarted","data":{}}`))
	f.Add([]byte(`{"schema":"settle.event/v1","event_id":"x","type":"WriteStarted","data":{"attempt":1},"data":{}}`))
	f.Add([]byte(strings.Replace(string(good), `"version":1`, `"version":01`, 1)))
	f.Add([]byte(strings.Replace(string(good), `"actor":"test"`, `"actor":"t\u0065st"`, 1)))
	f.Add([]byte(strings.Replace(string(good), `"data":{`, `"data":{"tenant":"x"},"data":{`, 1)))
	// Every type as settle writes it, every body field set, and its body
	// alone (for readBody, below).
	for i, typ := range AllTypes() {
		ev := fullEvent(f, typ, uint64(i))
		f.Add(ev)
		f.Add(ev[bytes.Index(ev, []byte(`"data":`))+len(`"data":`) : len(ev)-1])
	}
	types := AllTypes()
	f.Fuzz(func(t *testing.T, b []byte) {
		for name, path := range map[string]func([]byte) (Event, bool){"typed": decodeTyped, "canonical": decodeCanonical} {
			fast, ok := path(b)
			if !ok {
				continue
			}
			slow, err := decodeCareful(b)
			if err != nil {
				t.Fatalf("%s path took %q, the careful path refuses it: %v", name, b, err)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("%s path, %q:\nfast %+v\nslow %+v", name, b, fast, slow)
			}
		}
		// b as a body of each type: what readBody takes, strict
		// encoding/json takes, and reads the same.
		for _, typ := range types {
			fast := NewData(typ)
			if !readBody(b, fast) {
				continue
			}
			slow := NewData(typ)
			if err := strictUnmarshal(b, slow); err != nil {
				t.Fatalf("readBody took %q as %s, encoding/json refuses it: %v", b, typ, err)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("%s body %q:\nreadBody %#v\nencoding/json %#v", typ, b, fast, slow)
			}
		}
	})
}

// Every event type round-trips through the fast path.
func TestDecodeFastPathTakesEveryEncodedType(t *testing.T) {
	e := sampleRecorded()
	b, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	fast, ok := decodeTyped(b)
	slow, serr := decodeCareful(b)
	if !ok || serr != nil || !reflect.DeepEqual(fast, slow) {
		t.Fatalf("fast %v ok %v; slow %v err %v", fast, ok, slow, serr)
	}
	// A missing body or a repeated one is left to the careful path.
	for _, bad := range []string{
		`{"schema":"settle.event/v1","event_id":"` + e.EventID + `","intent_id":"` + e.IntentID + `","version":1,"type":"IntentRecorded","at":"2026-01-01T00:00:00Z","actor":"a"}`,
		strings.Replace(string(b), `"data":`, `"data":{},"data":`, 1),
	} {
		if _, ok := decodeTyped([]byte(bad)); ok {
			t.Fatalf("fast path took %s", bad)
		}
	}
}

// The envelope settle writes is read without encoding/json, and agrees
// with the careful path; any other layout of it is left to the other paths.
func TestDecodeCanonicalPath(t *testing.T) {
	e := sampleRecorded()
	good, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	fast, ok := decodeCanonical(good)
	slow, serr := decodeCareful(good)
	if !ok || serr != nil || !reflect.DeepEqual(fast, slow) {
		t.Fatalf("canonical %v ok %v; careful %v err %v", fast, ok, slow, serr)
	}
	g := string(good)
	for name, b := range map[string]string{
		"escaped actor":      strings.Replace(g, `"actor":"test"`, `"actor":"t\u0065st"`, 1),
		"leading zero":       strings.Replace(g, `"version":1`, `"version":01`, 1),
		"version overflow":   strings.Replace(g, `"version":1`, `"version":18446744073709551616`, 1),
		"white space":        strings.Replace(g, `"version":1`, `"version": 1`, 1),
		"members reordered":  strings.Replace(strings.Replace(g, `"actor":"test",`, ``, 1), `"schema":`, `"actor":"test","schema":`, 1),
		"upper-case key":     strings.Replace(g, `"actor":`, `"Actor":`, 1),
		"repeated body":      strings.Replace(g, `"data":{`, `"data":{"tenant":"x"},"data":{`, 1),
		"null body":          g[:strings.Index(g, `"data":`)] + `"data":null}`,
		"trailing data":      g + ` {}`,
		"unknown body field": strings.Replace(g, `"data":{`, `"data":{"extra":1,`, 1),
		"non-ASCII id":       strings.Replace(g, `"actor":"test"`, `"actor":"tést"`, 1),
		"invalid time":       strings.Replace(g, `"at":"2026-07-22T00:00:00Z"`, `"at":"2026-07-22"`, 1),
	} {
		if b == g {
			t.Fatalf("%s: the case did not change the event", name)
		}
		if _, ok := decodeCanonical([]byte(b)); ok {
			t.Errorf("%s: canonical path took %s", name, b)
		}
	}
}

// isMsgID agrees with comparing against MsgID.
func TestIsMsgIDMatchesMsgID(t *testing.T) {
	id := ScopedIntentID("acme", "social_post", "acct_1", "task:1")
	for _, v := range []uint64{0, 1, 9, 10, 12345, 1<<64 - 1} {
		for _, cand := range []string{MsgID(id, v), MsgID(id, v+1), id + ":", id, "", id + ":0" + MsgID(id, v)[len(id)+1:], id + "x" + MsgID(id, v)[len(id):], MsgID(id, v) + "0"} {
			if got, want := isMsgID(cand, id, v), cand == MsgID(id, v); got != want {
				t.Errorf("isMsgID(%q, v%d) = %v, want %v", cand, v, got, want)
			}
		}
	}
}

// digest gives what it gave when it was built with a hash.Hash, base32's
// EncodeToString and strings.ToLower.
func TestDigestMatchesReference(t *testing.T) {
	ref := func(prefix, domain string, parts ...string) string {
		h := sha256.New()
		h.Write([]byte(domain))
		for _, p := range parts {
			h.Write([]byte{0})
			h.Write([]byte(strconv.Itoa(len(p))))
			h.Write([]byte{0})
			h.Write([]byte(p))
		}
		return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h.Sum(nil)[:20]))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		parts := make([]string, r.IntN(5))
		for j := range parts {
			b := make([]byte, r.IntN(200))
			for k := range b {
				b[k] = byte(r.IntN(256))
			}
			parts[j] = string(b)
		}
		prefix := []string{"", "in_", "sk_", "tool:"}[r.IntN(4)]
		if got, want := digest(prefix, "intent/v2", parts...), ref(prefix, "intent/v2", parts...); got != want {
			t.Fatalf("parts %q: %s, want %s", parts, got, want)
		}
	}
	if got, want := ScopedIntentID("acme", "social_post", "acct_1", "task:1"), ref("in_", "intent/v2", "acme", "social_post", "acct_1", "task:1"); got != want {
		t.Fatalf("ScopedIntentID %s, want %s", got, want)
	}
}
