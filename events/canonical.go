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
	var e Event
	rest, ok := bytes.CutPrefix(b, canonSchema)
	if !ok {
		return Event{}, false
	}
	e.Schema = SchemaV1
	if e.EventID, rest, ok = canonString(rest); !ok {
		return Event{}, false
	}
	if e.IntentID, rest, ok = canonField(rest, canonIntentID); !ok {
		return Event{}, false
	}
	if rest, ok = bytes.CutPrefix(rest, canonVersion); !ok {
		return Event{}, false
	}
	if e.Version, rest, ok = canonUint(rest); !ok {
		return Event{}, false
	}
	if rest, ok = bytes.CutPrefix(rest, canonType); !ok {
		return Event{}, false
	}
	q, rest, ok := canonQuoted(rest)
	if !ok {
		return Event{}, false
	}
	// A known type is its constant (no string made); an unknown one is
	// left to the other paths, which name it.
	if e.Type, ok = knownTypes[string(q[1:len(q)-1])]; !ok {
		return Event{}, false
	}
	if rest, ok = bytes.CutPrefix(rest, canonAt); !ok {
		return Event{}, false
	}
	at, rest, ok := canonQuoted(rest)
	if !ok || e.At.UnmarshalJSON(at) != nil {
		return Event{}, false
	}
	if e.Actor, rest, ok = canonField(rest, canonActor); !ok {
		return Event{}, false
	}
	if r, found := bytes.CutPrefix(rest, canonAttempt); found {
		if e.AttemptID, rest, ok = canonString(r); !ok {
			return Event{}, false
		}
	}
	if rest, ok = bytes.CutPrefix(rest, canonData); !ok {
		return Event{}, false
	}
	if e.Data, ok = canonBody(e.Type, rest); !ok || e.Validate() != nil {
		return Event{}, false
	}
	return e, true
}

// canonField reads the member that starts b with prefix (its name), a
// string as canonString reads it.
func canonField(b, prefix []byte) (string, []byte, bool) {
	rest, ok := bytes.CutPrefix(b, prefix)
	if !ok {
		return "", nil, false
	}
	return canonString(rest)
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

// canonString is canonQuoted's value as a string.
func canonString(b []byte) (string, []byte, bool) {
	q, rest, ok := canonQuoted(b)
	if !ok {
		return "", nil, false
	}
	return string(q[1 : len(q)-1]), rest, true
}
