package audit

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
)

// hintFreeHeaders are the header names settle's appends carry.
var hintFreeHeaders = []string{jetstream.MsgIDHeader, "Settle-Append-Id", jetstream.ExpectedStreamHeader,
	jetstream.ExpectedLastSubjSeqHeader, "Nats-Batch-Id", "Nats-Batch-Sequence", "Nats-Batch-Commit"}

// The audit's masking hides the whole token it finds, not just the part
// its pattern covers: "[redacted]_0123456789" would leak the tail.
func TestAuditRedactHidesWholeTokens(t *testing.T) {
	for in, leak := range map[string]string{
		"code sk_live_abcdefgh_0123456789 status 400":          "0123456789",
		`{"code":"sk_test_ABCDEFGH-tail.part~x"}`:              "tail.part",
		"Authorization: Bearer abcdefghijkl_mnopqrst$uvwx end": "uvwx",
		`"token":"0123456789abcdef0123_456789$$tail"`:          "tail",
		"ghp_0123456789abcdefghij_klmn and more":               "klmn",
	} {
		out := redact(in)
		if strings.Contains(out, leak) || !strings.Contains(out, "[redacted]") {
			t.Errorf("redact(%q) = %q: %q survives", in, out, leak)
		}
	}
	// Text around a secret stays readable; settle's own keys are kept.
	key := "sk_abcdefghijklmnopqrstuvwxyz234567"
	if out := redact("status 400 sk_live_abcdefgh1 retryable false " + key); out != "status 400 [redacted] retryable false "+key {
		t.Errorf("context lost: %q", out)
	}
}

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
	f.Add("x-API-Key: PASSWORD\\u0022 Private Key \u212a")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := hintMask(s), hintMaskFold(s); got != want {
			t.Fatalf("%q: mask %b, lower-case search %b", s, got, want)
		}
		// Cut anywhere into a header's name and value, the line's hints
		// are theirs.
		for i := 0; i <= len(s); i += 1 + len(s)/7 {
			k, v := s[:i], s[i:]
			if got, want := hintMask(k)|hintMask(v), hintMaskFold(k+": "+v); got != want {
				t.Fatalf("%q, %q: name and value %b, line %b", k, v, got, want)
			}
		}
	})
}

// A header line's hints are those of its name and of its value: no hint
// holds ": ", whatever the case folding of the text around it.
func TestHeaderLineHintsAreNameAndValue(t *testing.T) {
	for _, p := range secretPatterns {
		for _, h := range p.hints {
			if strings.Contains(h, ":") {
				t.Fatalf("hint %q holds a colon", h)
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var pieces []string
	for _, p := range secretPatterns {
		for _, h := range p.hints {
			pieces = append(pieces, h, strings.ToUpper(h), h[:len(h)/2], strings.ToUpper(h[len(h)/2:]))
		}
	}
	pieces = append(pieces, "x", " ", ":", ": ", "é", "\u212a", "İ", "\xff", "\xe2", "ſ", "-", "Nats-Msg-Id")
	str := func() string {
		var b strings.Builder
		for range rng.IntN(5) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	for i := 0; i < 20000; i++ {
		k, v := str(), str()
		if got, want := hintMask(k)|hintMask(v), hintMask(k+": "+v); got != want {
			t.Fatalf("%q, %q: name and value %b, line %b", k, v, got, want)
		}
	}
}

// The header names scanHeaders does not scan hold no hint, and are the
// ones it skips.
func TestHintFreeHeaderNames(t *testing.T) {
	for _, k := range hintFreeHeaders {
		if !hintFreeHeader(k) || hintMask(k) != 0 || hintMaskFold(k) != 0 {
			t.Errorf("%s: skipped %v, mask %b", k, hintFreeHeader(k), hintMask(k))
		}
	}
	if hintFreeHeader("Authorization") || hintFreeHeader("nats-msg-id") {
		t.Error("an unlisted name is skipped")
	}
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

func TestScanSecrets(t *testing.T) {
	key := events.IdempotencyKey(events.ScopedIntentID("default", "social_post", "acct_1", "r1"))
	flagged := []string{
		`{"message":"Authorization: Bearer abcdefghijklmnopqrst"}`,
		`{"headers":{"Authorization":["Basic dXNlcjpwYXNz"]}}`,
		`{"message":"bearer eyJhbGciOiJIUzI1NiJ9.e30.x"}`,
		`{"message":"key sk_live_4eC39HqLyjWDarjtT1zdp7dc"}`,
		`{"message":"key sk_test_4eC39HqLyjWDarjtT1zdp7dc"}`,
		`{"message":"ghp_0123456789abcdefghijABCDEFGHIJ012345"}`,
		`{"message":"xoxb-1234567890-abcdefghij"}`,
		`{"message":"xoxp-1234567890-abcdefghij"}`,
		`{"message":"AKIAIOSFODNN7EXAMPLE"}`,
		`{"message":"-----BEGIN RSA PRIVATE KEY-----\nMIIB"}`,
		`{"message":"-----BEGIN PRIVATE KEY-----"}`,
		`{"password":"hunter2"}`,
		`{"message":"{\"password\":\"hunter2\"}"}`,
		`{"api_key":"0123456789abcdef"}`,
		`{"message":"GET /v1?apikey=0123456789abcdef"}`,
		`{"token":"0123456789abcdef0123456789"}`,
		`{"access_token":"0123456789abcdef0123456789"}`,
		`{"message":"\u0062earer abcdefghijklmnopqrst"}`,
	}
	for _, s := range flagged {
		if hits := scanSecrets([]byte(s)); len(hits) == 0 {
			t.Errorf("not flagged: %s", s)
		}
	}
	clean := []string{
		`{"idempotency_key":"` + key + `"}`,
		`{"token":"` + key + `"}`,
		`{"message":"retry with key ` + key + `"}`,
		`{"message":"401 unauthorized from POST api.example.com","code":"http_401"}`,
		`{"message":"token expired","code":"auth_failed"}`,
		`{"body":"my password is short","reason":"the bearer of bad news"}`,
		`{"payload_sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}`,
		`{"external_id":"AKIA-not-a-key","live_url":"https://social.example/p/1"}`,
	}
	for _, s := range clean {
		if hits := scanSecrets([]byte(s)); len(hits) != 0 {
			t.Errorf("flagged %v: %s", hits, s)
		}
	}
	if r := redact("x Authorization: Bearer abcdefghijklmnopqrst y " + key); strings.Contains(r, "abcdefghijklmnopqrst") || !strings.Contains(r, key) {
		t.Errorf("redact: %q", r)
	}
}
