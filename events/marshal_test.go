package events

import (
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
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := decodeTyped(b)
		if !ok {
			return
		}
		slow, err := decodeCareful(b)
		if err != nil {
			t.Fatalf("one-pass path took %q, the careful path refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\nfast %+v\nslow %+v", b, fast, slow)
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

// isMsgID agrees with comparing against MsgID.
func TestIsMsgIDMatchesMsgID(t *testing.T) {
	id := IntentID("acme", "social_post", "task:1")
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
	if got, want := IntentID("acme", "social_post", "task:1"), ref("in_", "intent/v1", "acme", "social_post", "task:1"); got != want {
		t.Fatalf("IntentID %s, want %s", got, want)
	}
}
