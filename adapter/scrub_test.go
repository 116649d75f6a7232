package adapter

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

const testSecret = "sk_live_0123456789abcdefGHIJ"

func TestScrubberRemovesSecretsAndTheirParts(t *testing.T) {
	s := NewScrubber(testSecret, "short1", "", "ab")
	for in, want := range map[string]string{
		`{"code":"` + testSecret + `"}`:        `{"code":"[redacted]"}`,
		"tail " + testSecret[12:] + " end":     "tail [redacted] end",
		"upper " + strings.ToUpper(testSecret): "upper [redacted]",
		"seven " + testSecret[3:10] + "!":      "seven " + testSecret[3:10] + "!", // 7 bytes: not a part worth hiding
		"eight " + testSecret[3:11] + "!":      "eight [redacted]!",
		"two parts 0123456789 and cdefGHIJ":    "two parts [redacted] and [redacted]",
		"a short1 secret":                      "a [redacted] secret",
		"ab stays; nothing else":               "ab stays; nothing else",
		"":                                     "",
	} {
		if got := s.Scrub(in); got != want {
			t.Errorf("Scrub(%q) = %q, want %q", in, got, want)
		}
	}
	var none *Scrubber
	if none.Scrub(testSecret) != testSecret {
		t.Error("a nil scrubber changed text")
	}
	if out := fmt.Sprintf("%v %+v %#v %s", s, s, s, s); strings.Contains(out, "0123") || strings.Contains(out, "short1") {
		t.Errorf("a scrubber formats its secrets: %s", out)
	}
	ce := &CallError{Class: Rejected, Code: testSecret, Message: "echo " + testSecret[5:20]}
	err := s.Error(fmt.Errorf("wrapped: %w", ce))
	var got *CallError
	if !errors.As(err, &got) || got.Code != Redacted || got.Message != "echo [redacted]" {
		t.Fatalf("call error: %+v", got)
	}
	r := s.Record(Record{ExternalID: "p_" + testSecret, LiveURL: "https://x/" + testSecret[4:16], AuthorID: "acct", Payload: []byte(`"` + testSecret + `"`)})
	if strings.Contains(r.ExternalID+r.LiveURL, "0123") || r.AuthorID != "acct" || !strings.Contains(string(r.Payload), testSecret) {
		t.Fatalf("record: %+v", r)
	}
	st := s.Status(StatusResult{Code: testSecret, PartialEffects: []string{"x" + testSecret}, Version: testSecret[2:12]})
	if st.Code != Redacted || st.PartialEffects[0] != "x"+Redacted || st.Version != Redacted {
		t.Fatalf("status: %+v", st)
	}
	if m := NewScrubber("aaaaaaaa").Merge(NewScrubber(testSecret)); m.Scrub("aaaaaaaa "+testSecret) != Redacted+" "+Redacted {
		t.Fatal("merge")
	}
}

// Whatever the text and wherever parts of the secret hide in it, no
// ScrubGram-long part of the secret survives, valid UTF-8 stays valid,
// and text without such a part is returned unchanged.
func FuzzScrub(f *testing.F) {
	f.Add("prefix", "suffix", uint8(0), uint8(28), testSecret)
	f.Add("é", "ü", uint8(3), uint8(9), "sécret-ünïcode-value")
	f.Fuzz(func(t *testing.T, pre, post string, from, n uint8, secret string) {
		if len(secret) < ScrubGram {
			return
		}
		s := NewScrubber(secret)
		a := int(from) % len(secret)
		b := min(len(secret), a+int(n))
		text := pre + secret[a:b] + post
		out := s.Scrub(text)
		low := asciiLower(out)
		ls := asciiLower(secret)
		for i := 0; i+ScrubGram <= len(ls); i++ {
			if strings.Contains(low, ls[i:i+ScrubGram]) && !strings.Contains(asciiLower(Redacted), ls[i:i+ScrubGram]) {
				t.Fatalf("part %q of the secret survives in %q", ls[i:i+ScrubGram], out)
			}
		}
		if utf8.ValidString(text) && !utf8.ValidString(out) {
			t.Fatalf("valid UTF-8 %q became invalid %q", text, out)
		}
		if !strings.Contains(out, Redacted) && out != text {
			t.Fatalf("changed without redacting: %q -> %q", text, out)
		}
	})
}

func TestScrubRandomTexts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := NewScrubber(testSecret)
	for k := 0; k < 2000; k++ {
		var b strings.Builder
		for j := 0; j < 5; j++ {
			b.WriteString(fmt.Sprintf("%x", rng.Uint64()))
			if rng.IntN(3) == 0 {
				a := rng.IntN(len(testSecret) - ScrubGram)
				b.WriteString(testSecret[a : a+ScrubGram+rng.IntN(len(testSecret)-a-ScrubGram+1)])
			}
		}
		out := s.Scrub(b.String())
		for i := 0; i+ScrubGram <= len(testSecret); i++ {
			if strings.Contains(asciiLower(out), asciiLower(testSecret[i:i+ScrubGram])) {
				t.Fatalf("%q survives in %q", testSecret[i:i+ScrubGram], out)
			}
		}
	}
}
