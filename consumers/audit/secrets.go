package audit

import (
	"bytes"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The secret scan: credential-shaped text anywhere in an event or its
// headers is a violation; what the audit prints masks whole tokens.

// secretPattern is one shape of credential. A pattern with a capture
// group names the secret value in it; a value that is one of settle's own
// idempotency keys is not a secret.
type secretPattern struct {
	name string
	re   *regexp.Regexp
	// hints: the pattern can only match text whose lower-case form holds
	// one of these (every match contains one); the regexp runs only then
	// (most events hold none).
	hints []string
}

var secretPatterns = []secretPattern{
	{"an Authorization header", regexp.MustCompile(`(?i)\b(?:proxy-)?authorization\\?"?\s*[:=]`), []string{"authorization"}},
	{"a bearer token", regexp.MustCompile(`(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{8,}=*)`), []string{"bearer"}},
	{"a Stripe key", regexp.MustCompile(`\b[sr]k_(?:live|test)_[0-9A-Za-z]{8,}`), []string{"k_live_", "k_test_"}},
	{"a GitHub token", regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`), []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}},
	{"a Slack token", regexp.MustCompile(`\bxox[bpars]-[A-Za-z0-9-]{10,}`), []string{"xox"}},
	{"an AWS access key id", regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), []string{"akia", "asia"}},
	{"a private key", regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----`), []string{"private key"}},
	{"a password", regexp.MustCompile(`(?i)\bpass(?:word|wd)?\\?"\s*:\s*\\?"([^"\\]+)`), []string{`pass"`, `pass\`, "password", "passwd"}},
	{"an API key", regexp.MustCompile(`(?i)\b(?:x-)?api[_-]?key\\?"?\s*[:=]\s*\\?"?([A-Za-z0-9\-._~+/=]{8,})`), []string{"api_key", "api-key", "apikey"}},
	{"a token", regexp.MustCompile(`(?i)(?:\b|_)(?:access_|auth_|refresh_|id_)?token\\?"\s*:\s*\\?"([A-Za-z0-9\-._~+/=]{16,})`), []string{`token"`, `token\`}},
	{"a client secret", regexp.MustCompile(`(?i)\b(?:client_secret|secret_key|api_secret)\\?"\s*:\s*\\?"([^"\\]{8,})`), []string{"client_secret", "secret_key", "api_secret"}},
}

// settleKey is the shape of settle's idempotency keys: not a secret.
var settleKey = regexp.MustCompile(`^sk_[a-z2-7]{32}$`)

type secretHit struct {
	name   string
	offset int    // byte offset in the scanned text, or hitUnescaped, hitInHeader
	header string // the header's name (hitInHeader)
}

const (
	hitUnescaped = -1 // found in a JSON string after resolving its escapes
	hitInHeader  = -2 // found in a message header
)

// scanSecrets looks for credential-shaped text in b (an event's raw JSON
// or a header line). Strings with \u escapes are also scanned unescaped,
// so an escaped secret is still found.
func scanSecrets(b []byte) []secretHit {
	var hits []secretHit
	if mask := hintMask(b); mask != 0 {
		hits = scanMasked(string(b), 0, mask)
	}
	if bytes.Contains(b, []byte(`\u`)) {
		var v any
		if json.Unmarshal(b, &v) == nil {
			walkStrings(v, func(s string) {
				for _, h := range scanText(s, 0) {
					h.offset = hitUnescaped
					hits = append(hits, h)
				}
			})
		}
	}
	return hits
}

func scanText(s string, base int) []secretHit {
	return scanMasked(s, base, hintMask(s))
}

// scanMasked runs the patterns of mask (bit i: secretPatterns[i] is
// hinted in s) over s.
func scanMasked(s string, base int, mask uint64) []secretHit {
	var hits []secretHit
	for i, p := range secretPatterns {
		if mask&(1<<i) == 0 {
			continue
		}
		for _, m := range p.re.FindAllStringSubmatchIndex(s, -1) {
			if len(m) >= 4 && m[2] >= 0 && settleKey.MatchString(s[m[2]:m[3]]) {
				continue
			}
			hits = append(hits, secretHit{name: p.name, offset: base + m[0]})
			break
		}
	}
	return hits
}

func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	case map[string]any:
		for k, e := range x {
			f(k)
			walkStrings(e, f)
		}
	}
}

// redact replaces anything that looks like a secret with [redacted]: the
// whole word it is part of, up to the next delimiter on either side, so
// that no head or tail of a token the pattern did not cover (after an
// underscore, say) is left standing.
func redact(s string) string {
	for _, p := range secretPatterns {
		for from := 0; from < len(s); {
			m := p.re.FindStringSubmatchIndex(s[from:])
			if m == nil {
				break
			}
			i, j := from+m[0], from+m[1]
			if len(m) >= 4 && m[2] >= 0 && settleKey.MatchString(s[from+m[2]:from+m[3]]) {
				from = j
				continue
			}
			for i > 0 && !redactStop(s[i-1]) {
				i--
			}
			for j < len(s) && !redactStop(s[j]) {
				j++
			}
			s = s[:i] + "[redacted]" + s[j:]
			from = i + len("[redacted]")
		}
	}
	return s
}

// redactStop: a byte that ends a token-like word (white space, quotes,
// JSON and list punctuation).
func redactStop(c byte) bool {
	return strings.IndexByte(" \t\r\n\"'`\\,;{}[]()<>", c) >= 0
}

// scanHeaders scans each header line ("Name: value") for secrets, in the
// order of the header names.
//
// A hint holds no colon, so none spans the ": " between a name and its
// value: the hints of a line are those of its name and of its value
// (TestHeaderLineHintsAreNameAndValue), and the names settle and
// JetStream write hold none (TestHintFreeHeaderNames).
func scanHeaders(hdr nats.Header) []secretHit {
	any := false
	for k, vs := range hdr {
		kmask := uint64(0)
		if !hintFreeHeader(k) {
			kmask = hintMask(k)
		}
		for _, v := range vs {
			if kmask != 0 || hintMask(v) != 0 || strings.Contains(v, `\u`) {
				any = true
			}
		}
	}
	if !any {
		return nil
	}
	keys := slices.Sorted(maps.Keys(hdr))
	var hits []secretHit
	for _, k := range keys {
		for _, v := range hdr[k] {
			for _, h := range scanSecrets([]byte(k + ": " + v)) {
				h.offset, h.header = hitInHeader, k
				hits = append(hits, h)
			}
		}
	}
	return hits
}

// hintFreeHeader: k is a header name settle's appends carry (the
// ledger's and JetStream's), whose hint mask is 0 (TestHintFreeHeaderNames).
func hintFreeHeader(k string) bool {
	switch k {
	case jetstream.MsgIDHeader, "Settle-Append-Id", jetstream.ExpectedStreamHeader,
		jetstream.ExpectedLastSubjSeqHeader, "Nats-Batch-Id", "Nats-Batch-Sequence", "Nats-Batch-Commit":
		return true
	}
	return false
}

// hintIndex lists, for each byte, the hints of secretPatterns that start
// with it (in either case) and the pattern they belong to.
var hintIndex = func() (idx [256][]hintRef) {
	if len(secretPatterns) > 64 {
		panic("consumers: more than 64 secret patterns")
	}
	for i, p := range secretPatterns {
		for _, h := range p.hints {
			c := h[0]
			idx[c] = append(idx[c], hintRef{h, i})
			if 'a' <= c && c <= 'z' {
				idx[c-'a'+'A'] = append(idx[c-'a'+'A'], hintRef{h, i})
			}
		}
	}
	return idx
}()

type hintRef struct {
	hint    string
	pattern int
}

// hintByte classifies each byte for hintMask: hintNone for a byte no hint
// starts with, hintStart for one that some hint starts with (in either
// case), hintNonASCII for a byte of a multi-byte character.
var hintByte = func() (t [256]uint8) {
	for c := utf8.RuneSelf; c < 256; c++ {
		t[c] = hintNonASCII
	}
	for c := range 256 {
		if len(hintIndex[c]) > 0 {
			t[c] = hintStart
		}
	}
	return t
}()

const (
	hintNone = iota
	hintStart
	hintNonASCII
)

// hintPairs[c0] has bit c1 set when some hint starts with c0 c1, either
// letter in either case: a byte whose next byte is not set starts no hint
// (every hint has at least two bytes).
var hintPairs = func() (t [256][4]uint64) {
	cases := func(c byte) []byte {
		if 'a' <= c && c <= 'z' {
			return []byte{c, c - 'a' + 'A'}
		}
		return []byte{c}
	}
	for _, p := range secretPatterns {
		for _, h := range p.hints {
			if len(h) < 2 {
				panic("consumers: a secret hint of one byte")
			}
			for _, c0 := range cases(h[0]) {
				for _, c1 := range cases(h[1]) {
					t[c0][c1>>6] |= 1 << (c1 & 63)
				}
			}
		}
	}
	return t
}()

// hintMask says which secret patterns are hinted in s (bit i for
// secretPatterns[i]): those one of whose hints occurs in the lower-case
// form of s. ASCII text is scanned once, without lower-casing it (most
// bytes cost one table look-up; a hint is compared only where its first
// two bytes are); other text as strings.ToLower sees it (Unicode case
// folding).
func hintMask[T string | []byte](s T) uint64 {
	var mask uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch hintByte[c] {
		case hintNone:
			continue
		case hintNonASCII:
			return hintMaskFold(string(s))
		}
		if i+1 >= len(s) {
			break
		}
		if c1 := s[i+1]; hintPairs[c][c1>>6]&(1<<(c1&63)) == 0 {
			continue
		}
		for _, r := range hintIndex[c] {
			if mask&(1<<r.pattern) == 0 && hasPrefixFoldASCII(s[i:], r.hint) {
				mask |= 1 << r.pattern
			}
		}
	}
	return mask
}

func hintMaskFold(s string) uint64 {
	lower := strings.ToLower(s)
	var mask uint64
	for i, p := range secretPatterns {
		if slices.ContainsFunc(p.hints, func(h string) bool { return strings.Contains(lower, h) }) {
			mask |= 1 << i
		}
	}
	return mask
}

// hasPrefixFoldASCII: s starts with the lower-case ASCII hint, ignoring
// the case of ASCII letters in s.
func hasPrefixFoldASCII[T string | []byte](s T, hint string) bool {
	if len(s) < len(hint) {
		return false
	}
	for j := 0; j < len(hint); j++ {
		c := s[j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != hint[j] {
			return false
		}
	}
	return true
}
