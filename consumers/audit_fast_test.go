package consumers

import (
	"math/rand/v2"
	"strings"
	"testing"
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
