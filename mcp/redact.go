package mcp

import (
	"strings"
)

// minSecret is the shortest value Config.Secrets accepts.
const minSecret = 4

// piece is the length of the secret fragments scrubbed on their own.
const piece = 8

const redacted = "[redacted]"

// redactor scrubs secrets from the strings of a tool result: every whole
// occurrence, and every run of text covered by 8-byte pieces of a secret
// (a secret cut, prefixed or suffixed by an external API is still caught).
type redactor struct {
	whole  []string
	pieces map[string]bool
}

func newRedactor(secrets []string) *redactor {
	r := &redactor{pieces: map[string]bool{}}
	for _, s := range secrets {
		r.whole = append(r.whole, s)
		for i := 0; i+piece <= len(s); i++ {
			r.pieces[s[i:i+piece]] = true
		}
	}
	return r
}

// string returns s with every secret and every covered run replaced.
func (r *redactor) string(s string) string {
	if len(r.whole) == 0 {
		return s
	}
	covered := make([]bool, len(s))
	hit := false
	mark := func(i, n int) {
		for k := i; k < i+n; k++ {
			covered[k] = true
		}
		hit = true
	}
	for _, w := range r.whole {
		for from := 0; ; {
			i := strings.Index(s[from:], w)
			if i < 0 {
				break
			}
			mark(from+i, len(w))
			from += i + 1
		}
	}
	for i := 0; i+piece <= len(s); i++ {
		if r.pieces[s[i:i+piece]] {
			mark(i, piece)
		}
	}
	if !hit {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if !covered[i] {
			j := i
			for j < len(s) && !covered[j] {
				j++
			}
			b.WriteString(s[i:j])
			i = j
			continue
		}
		for i < len(s) && covered[i] {
			i++
		}
		b.WriteString(redacted)
	}
	return strings.ToValidUTF8(b.String(), "")
}

// value scrubs every string (keys included) of a decoded JSON value.
func (r *redactor) value(v any) any {
	switch x := v.(type) {
	case string:
		return r.string(x)
	case []any:
		for i := range x {
			x[i] = r.value(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.string(k)] = r.value(e)
		}
		return out
	}
	return v
}
