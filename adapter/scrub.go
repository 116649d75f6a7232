package adapter

import (
	"fmt"
	"maps"
	"strings"

	"github.com/cockroachdb/errors"
)

// ScrubGram is the shortest part of a secret that Scrubber removes: any
// run of ScrubGram or more bytes of a secret (an API echoing the tail of a
// token, say) is as good as the secret to an attacker.
const ScrubGram = 8

// Redacted replaces what a Scrubber removes.
const Redacted = "[redacted]"

// Scrubber removes configured secret values from text an external API
// sent back, before that text is recorded (events, views) or returned
// (API answers, logs). It matches every substring of ScrubGram or more
// bytes of each secret (ASCII case-insensitively); a secret shorter than
// ScrubGram is matched whole, and one shorter than 4 bytes is ignored
// (it would redact ordinary text). The zero of *Scrubber (nil) removes
// nothing. A Scrubber never formats its secrets.
type Scrubber struct {
	parts map[string]struct{} // each ScrubGram-byte part of a long secret, each short secret whole
	lens  uint16              // bit k: parts of length k
	n     int
}

// NewScrubber returns a scrubber for secrets (empty values are ignored).
func NewScrubber(secrets ...string) *Scrubber {
	s := &Scrubber{parts: map[string]struct{}{}}
	for _, sec := range secrets {
		l := asciiLower(sec)
		if len(l) < 4 {
			continue
		}
		k := min(len(l), ScrubGram)
		for i := 0; i+k <= len(l); i++ {
			s.parts[l[i:i+k]] = struct{}{}
		}
		s.lens |= 1 << k
		s.n++
	}
	return s
}

// Merge returns a scrubber that removes the secrets of both.
func (s *Scrubber) Merge(o *Scrubber) *Scrubber {
	if s == nil {
		return o
	}
	if o == nil {
		return s
	}
	m := &Scrubber{parts: maps.Clone(s.parts), lens: s.lens | o.lens, n: s.n + o.n}
	maps.Copy(m.parts, o.parts)
	return m
}

// Format prints how many secrets the scrubber holds, never one of them.
func (s *Scrubber) Format(f fmt.State, _ rune) {
	n := 0
	if s != nil {
		n = s.n
	}
	fmt.Fprintf(f, "adapter.Scrubber(%d secrets)", n)
}

// Contains reports whether v holds a secret or a ScrubGram-long part of one.
func (s *Scrubber) Contains(v string) bool { return s.Scrub(v) != v }

// Scrub returns v with every secret, and every run of a secret's
// ScrubGram-byte substrings, replaced by Redacted.
func (s *Scrubber) Scrub(v string) string {
	if s == nil || s.n == 0 || len(v) < 4 {
		return v
	}
	lv := asciiLower(v)
	var mark []bool
	set := func(from, to int) {
		if mark == nil {
			mark = make([]bool, len(v))
		}
		// Whole runes only: never leave half of a multi-byte character.
		for from > 0 && isCont(v[from]) {
			from--
		}
		for to < len(v) && isCont(v[to]) {
			to++
		}
		for k := from; k < to; k++ {
			mark[k] = true
		}
	}
	for k := 4; k <= ScrubGram; k++ {
		for i := 0; s.lens&(1<<k) != 0 && i+k <= len(lv); i++ {
			if _, ok := s.parts[lv[i:i+k]]; ok {
				set(i, i+k)
			}
		}
	}
	if mark == nil {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); {
		if !mark[i] {
			b.WriteByte(v[i])
			i++
			continue
		}
		b.WriteString(Redacted)
		for i < len(v) && mark[i] {
			i++
		}
	}
	return b.String()
}

func isCont(c byte) bool { return c&0xC0 == 0x80 }

// asciiLower lowers ASCII letters only, so byte offsets stay the same.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// WriteResult scrubs a write's response-derived fields.
func (s *Scrubber) WriteResult(r WriteResult) WriteResult {
	r.ExternalID, r.LiveURL = s.Scrub(r.ExternalID), s.Scrub(r.LiveURL)
	return r
}

// Record scrubs a record's fields (not its payload, which is only ever
// hashed and compared, never stored).
func (s *Scrubber) Record(r Record) Record {
	r.ExternalID, r.LiveURL, r.AuthorID = s.Scrub(r.ExternalID), s.Scrub(r.LiveURL), s.Scrub(r.AuthorID)
	r.ParentID, r.Visibility, r.CorrelationID = s.Scrub(r.ParentID), s.Scrub(r.Visibility), s.Scrub(r.CorrelationID)
	return r
}

// Records scrubs every record.
func (s *Scrubber) Records(rs []Record) []Record {
	for i := range rs {
		rs[i] = s.Record(rs[i])
	}
	return rs
}

// Status scrubs a status query's fields (not its payload: see Record).
func (s *Scrubber) Status(r StatusResult) StatusResult {
	r.ExternalID, r.LiveURL, r.Code = s.Scrub(r.ExternalID), s.Scrub(r.LiveURL), s.Scrub(r.Code)
	r.Version, r.AppliedVersion = s.Scrub(r.Version), s.Scrub(r.AppliedVersion)
	for i := range r.PartialEffects {
		r.PartialEffects[i] = s.Scrub(r.PartialEffects[i])
	}
	return r
}

// Error scrubs the code and message of the *CallError in err's chain (in
// place: the recorded outcome is built from them) and returns err.
func (s *Scrubber) Error(err error) error {
	var ce *CallError
	if s != nil && errors.As(err, &ce) {
		ce.Code, ce.Message = s.Scrub(ce.Code), s.Scrub(ce.Message)
	}
	return err
}
