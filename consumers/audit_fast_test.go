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
