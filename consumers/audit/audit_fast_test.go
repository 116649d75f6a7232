package audit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/testharness"
)

// The one-pass hint scan says what lower-casing the text and searching
// every hint said, for any text (ASCII or not, hints in any case, cut
// anywhere).
func TestHintMaskMatchesLowerCaseSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var pieces []string
	for _, p := range secretPatterns {
		for _, h := range p.hints {
			pieces = append(pieces, h, strings.ToUpper(h), h[:len(h)/2], strings.ToUpper(h[len(h)/2:]))
		}
	}
	pieces = append(pieces, "x", " ", `"`, ":", "é", "\u212a", "İ", "\xff", "ſ", "Token", "BEARER ", "a")
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for range rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		if got, want := hintMask(s), hintMaskFold(s); got != want {
			t.Fatalf("%q: mask %b, lower-case search %b", s, got, want)
		}
		if got, want := hintMask([]byte(s)), hintMaskFold(s); got != want {
			t.Fatalf("%q as bytes: mask %b, lower-case search %b", s, got, want)
		}
	}
}

func FuzzHintMask(f *testing.F) {
	f.Add("Authorization: Bearer abc")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := hintMask(s), hintMaskFold(s); got != want {
			t.Fatalf("%q: mask %b, lower-case search %b", s, got, want)
		}
	})
}

// The hints are sound: whenever a pattern's regexp matches a text, one of
// its hints is in it, so the prefilter never hides a secret.
func TestSecretHintsAreInEveryMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{`"`, `\"`, `\`, ":", "=", " ", "x", "-", "_", "0123456789abcdef", "ABCDEFGHIJKLMNOP",
		"pass", "PASS", "word", "WD", "wd", "api", "API", "key", "KEY", "x-", "token", "TOKEN", "access_", "id_",
		"authorization", "Proxy-", "bearer ", "Bearer ", "sk_live_", "rk_test_", "ghp_", "github_pat_", "xoxb-", "AKIA",
		"ASIA", "-----BEGIN ", "RSA ", "PRIVATE KEY-----", "client_secret", "secret_key", "api_secret", "\u212a", "é"}
	for i := 0; i < 50000; i++ {
		var b strings.Builder
		for range 1 + rng.IntN(7) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		mask := hintMask(s)
		for k, p := range secretPatterns {
			if p.re.MatchString(s) && mask&(1<<k) == 0 {
				t.Fatalf("%s matches %q, which holds none of its hints %q", p.name, s, p.hints)
			}
		}
	}
}

// Dropping confirmed intents from memory changes nothing the audit says:
// later messages naming them (an illegal event, a second version 1, an
// unreadable event, one on another route's subject) are judged against the
// state folded again from the stream, exactly as if it had been kept.
func TestAuditEvictionKeepsTheReport(t *testing.T) {
	n := testharness.StartNode(t)
	l := testharness.NewHandLog(t, n.JS, nil, t0)
	confirm := func(name string) *testharness.HandHistory {
		x := l.Record(name).Started(1)
		return x.Next(x.Attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: x.Receipt("p_"+name, "response")})
	}
	var hs []*testharness.HandHistory
	for i := range 20 {
		hs = append(hs, confirm(fmt.Sprintf("done-%d", i)))
	}
	// After confirmation: a second write, a second IntentRecorded, an
	// unreadable event, an event on another route's subject, and an
	// intent confirmed but then refused twice.
	hs[3].Plant(hs[3].Attempt(2), &events.WriteStartedData{Attempt: 2, IdempotencyKey: hs[3].I.Recorded.IdempotencyKey, Deadline: l.At.Add(time.Minute)})
	rec := hs[7].H.Events[0]
	raw, err := events.Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	l.PublishRaw(hs[7].ID(), string(raw))
	l.PublishRaw(hs[11].ID(), `{"schema":"settle.event/v1","event_id":"`+hs[11].ID()+`:4","intent_id":"`+hs[11].ID()+
		`","version":4,"type":"WriteTeleported","at":"2026-07-22T09:00:30Z","actor":"x","data":{}}`)
	if _, err := n.JS.Publish(context.Background(), events.Subject("other_route", hs[13].ID()), raw); err != nil {
		t.Fatal(err)
	}
	hs[15].Plant("", &events.ReadbackFailedData{ExternalID: "p_x", Failed: []string{"url"}}).
		Plant("", &events.ReadbackFailedData{ExternalID: "p_x", Failed: []string{"url"}})
	confirm("after") // and more intents after them

	cfg := AuditConfig{Now: func() time.Time { return t0.Add(2 * time.Hour) }, Grace: time.Minute}
	kept, err := audit(context.Background(), n.JS, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := audit(context.Background(), n.JS, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	if dropped.evict.restores != 5 || len(dropped.intents) >= len(kept.intents) {
		t.Fatalf("restores %d, intents in memory %d (kept %d): want 5 restores and fewer in memory",
			dropped.evict.restores, len(dropped.intents), len(kept.intents))
	}
	if kept.rep.OK() || !reflect.DeepEqual(kept.rep, dropped.rep) {
		t.Fatalf("reports differ:\nkept    %+v\ndropped %+v", kept.rep, dropped.rep)
	}
}
