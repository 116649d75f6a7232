package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/internal/jsonstr"
)

// argError is a refused argument: Field names it (task_id, payload.body).
type argError struct {
	Field  string
	Reason string
}

func (e *argError) Error() string { return e.Field + ": " + e.Reason }

func argErr(field, format string, a ...any) *argError {
	return &argError{Field: field, Reason: fmt.Sprintf(format, a...)}
}

// maxArgs bounds the arguments of one call (a payload is at most 1 MiB).
const maxArgs = 2 << 20

// args are the decoded arguments of one tool call: each member of the
// arguments object, by name, checked against the tool's known names. err
// is the first refusal (decoding or a read); once set, reads return zero
// values, so a handler reads every argument and checks err once.
type args struct {
	m   map[string]json.RawMessage
	err error
}

// fail records err as the refusal unless one is recorded already.
func (a *args) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

// decodeArgs reads the arguments object strictly: it must be one JSON
// object (absent or null counts as {}); a duplicate member or one the tool
// does not know is refused, naming it.
func decodeArgs(raw json.RawMessage, known ...string) *args {
	a, rest := splitArgs(raw, known...)
	if len(rest) > 0 {
		name := slices.Sorted(maps.Keys(rest))[0]
		a.fail(argErr(fieldName(name), "is not an argument of this tool (it takes %s)", strings.Join(known, ", ")))
	}
	return a
}

// splitArgs reads the arguments object as decodeArgs does, and returns
// the members named own as args and every other member apart (for the
// upstream's own arguments of a gateway write).
func splitArgs(raw json.RawMessage, own ...string) (*args, map[string]json.RawMessage) {
	a, rest := &args{m: map[string]json.RawMessage{}}, map[string]json.RawMessage{}
	if err := a.split(bytes.TrimSpace(raw), own, rest); err != nil {
		return &args{err: err}, nil
	}
	return a, rest
}

func (a *args) split(raw json.RawMessage, own []string, rest map[string]json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if len(raw) > maxArgs {
		return argErr("arguments", "are %d bytes, the limit is %d", len(raw), maxArgs)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return argErr("arguments", "must be a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return argErr("arguments", "are not valid JSON")
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return argErr(fieldName(name), "is not valid JSON")
		}
		dst := rest
		if slices.Contains(own, name) {
			dst = a.m
		}
		if _, dup := dst[name]; dup {
			return argErr(fieldName(name), "is given twice")
		}
		dst[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return argErr("arguments", "are not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return argErr("arguments", "have data after the object")
	}
	return nil
}

// fieldName renders an unknown member's name for an error: printable and
// short, so that a hostile name cannot flood or forge a message.
func fieldName(s string) string {
	if s == "" {
		return `arguments[""]`
	}
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	s = strings.ToValidUTF8(s, "?")
	return strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, s)
}

func (a *args) has(name string) bool {
	v, ok := a.m[name]
	return ok && string(v) != "null"
}

// str reads a string argument; "" when absent or null. A string that is
// not valid Unicode (invalid UTF-8, half of a surrogate pair escaped) is
// refused: encoding/json would read it as U+FFFD, and two task ids would
// be one.
func (a *args) str(name string) string {
	if a.err != nil || !a.has(name) {
		return ""
	}
	v := a.m[name]
	var s string
	if v[0] != '"' || json.Unmarshal(v, &s) != nil {
		a.fail(argErr(name, "must be a string"))
		return ""
	}
	if !jsonstr.ValidUnicode(v) {
		a.fail(argErr(name, "is not valid Unicode (invalid UTF-8, or half of a surrogate pair escaped)"))
		return ""
	}
	return s
}

// id reads an identifier (task_id, step_id, account, ...): printable
// UTF-8, 1 to 256 bytes, no surrounding white space.
func (a *args) id(name string, required bool) string {
	s := a.str(name)
	switch {
	case a.err != nil:
		return ""
	case s == "" && required:
		a.fail(argErr(name, "is required"))
	case strings.TrimSpace(s) != s:
		a.fail(argErr(name, "has leading or trailing white space"))
	case s != "":
		a.fail(events.ValidateFreeform(name, s))
	}
	if a.err != nil {
		return ""
	}
	return s
}

// seconds reads an optional whole number of seconds in [0, max].
func (a *args) seconds(name string, max int) int {
	if a.err != nil || !a.has(name) {
		return 0
	}
	var f float64
	switch {
	case json.Unmarshal(a.m[name], &f) != nil || f != math.Trunc(f):
		a.fail(argErr(name, "must be a whole number of seconds"))
	case f < 0 || f > float64(max):
		a.fail(argErr(name, "must be between 0 and %d", max))
	default:
		return int(f)
	}
	return 0
}

// count reads an optional integer in [1, max] (default def).
func (a *args) count(name string, def, max int) int {
	if a.err != nil || !a.has(name) {
		return def
	}
	var f float64
	if json.Unmarshal(a.m[name], &f) != nil || f != math.Trunc(f) || f < 1 || f > float64(max) {
		a.fail(argErr(name, "must be an integer between 1 and %d", max))
		return 0
	}
	return int(f)
}

// raw returns an argument's JSON as given (nil when absent or null).
func (a *args) raw(name string) json.RawMessage {
	if !a.has(name) {
		return nil
	}
	return a.m[name]
}
