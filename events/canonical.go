package events

import (
	"bytes"
	"strconv"
)

// The envelope as settle writes it (Event.MarshalJSON), member by member.
var (
	canonSchema   = []byte(`{"schema":"` + SchemaV1 + `","event_id":`)
	canonIntentID = []byte(`,"intent_id":`)
	canonVersion  = []byte(`,"version":`)
	canonType     = []byte(`,"type":`)
	canonAt       = []byte(`,"at":`)
	canonActor    = []byte(`,"actor":`)
	canonAttempt  = []byte(`,"attempt_id":`)
	canonData     = []byte(`,"data":`)
)

// decodeCanonical reads an event whose envelope is byte for byte in the
// layout Event.MarshalJSON writes (members in that order, no white space,
// strings of printable ASCII without escapes), without encoding/json: what
// the careful path would read from such an envelope is exactly its bytes.
// The body is read by readBody when it is as settle writes it, otherwise
// by strictUnmarshal, as the careful path decodes it.
// ok is false on any doubt (another layout, an escape, a body or an event
// that does not decode or validate): the other paths then decide.
// Kept by hand for the reason bodies.go gives (BENCHMARKS.md, "JSON:
// hand-written vs encoding/json").
func decodeCanonical(b []byte) (Event, bool) {
	c := canonCursor{rest: b, ok: true}
	e := Event{Schema: SchemaV1}
	e.EventID = c.str(canonSchema)
	e.IntentID = c.str(canonIntentID)
	if c.skip(canonVersion); c.ok {
		e.Version, c.rest, c.ok = canonUint(c.rest)
	}
	// A known type is its constant (no string made); an unknown one is
	// left to the other paths, which name it.
	if q := c.quoted(canonType); c.ok {
		e.Type, c.ok = knownTypes[string(q[1:len(q)-1])]
	}
	if at := c.quoted(canonAt); c.ok {
		c.ok = e.At.UnmarshalJSON(at) == nil
	}
	e.Actor = c.str(canonActor)
	if r, found := bytes.CutPrefix(c.rest, canonAttempt); found && c.ok {
		c.rest = r
		e.AttemptID = c.str(nil)
	}
	if c.skip(canonData); !c.ok {
		return Event{}, false
	}
	var ok bool
	if e.Data, ok = canonBody(e.Type, c.rest); !ok || e.Validate() != nil {
		return Event{}, false
	}
	return e, true
}

// canonCursor reads an envelope member by member: ok turns false at the
// first doubt, after which every read does nothing.
type canonCursor struct {
	rest []byte
	ok   bool
}

// skip reads prefix (a member's name, with the comma before it).
func (c *canonCursor) skip(prefix []byte) {
	if c.ok {
		c.rest, c.ok = bytes.CutPrefix(c.rest, prefix)
	}
}

// quoted reads prefix and then a string as canonQuoted reads it, quotes
// included.
func (c *canonCursor) quoted(prefix []byte) []byte {
	if c.skip(prefix); !c.ok {
		return nil
	}
	var q []byte
	q, c.rest, c.ok = canonQuoted(c.rest)
	return q
}

// str is quoted's value as a string.
func (c *canonCursor) str(prefix []byte) string {
	if q := c.quoted(prefix); c.ok {
		return string(q[1 : len(q)-1])
	}
	return ""
}

// canonUint reads the JSON number at the start of b as a uint64: digits,
// no leading zero.
func canonUint(b []byte) (uint64, []byte, bool) {
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n == 0 || (n > 1 && b[0] == '0') {
		return 0, nil, false
	}
	v, err := strconv.ParseUint(string(b[:n]), 10, 64)
	if err != nil {
		return 0, nil, false
	}
	return v, b[n:], true
}

// canonBody reads the body of an event of type t: rest is the body and
// the envelope's closing brace.
func canonBody(t Type, rest []byte) (Data, bool) {
	// The body is the rest but the envelope's closing brace: an object, as
	// settle writes it. Were it not one JSON value, strictUnmarshal refuses.
	if len(rest) < 3 || rest[0] != '{' || rest[len(rest)-1] != '}' {
		return nil, false
	}
	body := rest[:len(rest)-1]
	data := NewData(t)
	if data == nil {
		return nil, false
	}
	if !readBody(body, data) {
		// Not a body as settle writes it: strict encoding/json decides,
		// into a fresh body (readBody may have filled part of this one).
		if data = NewData(t); strictUnmarshal(body, data) != nil {
			return nil, false
		}
	}
	return data, true
}

// canonQuoted returns the JSON string at the start of b, quotes included,
// when it holds only printable ASCII and no escape (so its value is its
// bytes), and what follows it.
func canonQuoted(b []byte) (quoted, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return b[:i+1], b[i+1:], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, nil, false
		}
	}
	return nil, nil, false
}
