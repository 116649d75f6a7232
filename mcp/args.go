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
// arguments object, by name, checked against the tool's known names.
type args struct {
	m map[string]json.RawMessage
}

// decodeArgs reads the arguments object strictly: it must be one JSON
// object (absent or null counts as {}); a duplicate member or one the tool
// does not know is refused, naming it.
func decodeArgs(raw json.RawMessage, known ...string) (*args, error) {
	a, rest, err := splitArgs(raw, known...)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		name := slices.Sorted(maps.Keys(rest))[0]
		return nil, argErr(fieldName(name), "is not an argument of this tool (it takes %s)", strings.Join(known, ", "))
	}
	return a, nil
}

// splitArgs reads the arguments object as decodeArgs does, and returns
// the members named own as args and every other member apart (for the
// upstream's own arguments of a gateway write).
func splitArgs(raw json.RawMessage, own ...string) (*args, map[string]json.RawMessage, error) {
	a, rest := &args{m: map[string]json.RawMessage{}}, map[string]json.RawMessage{}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return a, rest, nil
	}
	if len(raw) > maxArgs {
		return nil, nil, argErr("arguments", "are %d bytes, the limit is %d", len(raw), maxArgs)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, nil, argErr("arguments", "must be a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, argErr("arguments", "are not valid JSON")
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, argErr(fieldName(name), "is not valid JSON")
		}
		dst := rest
		if slices.Contains(own, name) {
			dst = a.m
		}
		if _, dup := a.m[name]; dup {
			return nil, nil, argErr(fieldName(name), "is given twice")
		}
		if _, dup := rest[name]; dup {
			return nil, nil, argErr(fieldName(name), "is given twice")
		}
		dst[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, argErr("arguments", "are not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, argErr("arguments", "have data after the object")
	}
	return a, rest, nil
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
func (a *args) str(name string) (string, error) {
	v, ok := a.m[name]
	if !ok || string(v) == "null" {
		return "", nil
	}
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", argErr(name, "must be a string")
	}
	if !jsonstr.ValidUnicode(v) {
		return "", argErr(name, "is not valid Unicode (invalid UTF-8, or half of a surrogate pair escaped)")
	}
	return s, nil
}

// id reads a required identifier (task_id, step_id, account, ...):
// printable UTF-8, 1 to 256 bytes, no surrounding white space.
func (a *args) id(name string, required bool) (string, error) {
	s, err := a.str(name)
	if err != nil {
		return "", err
	}
	if s == "" {
		if required {
			return "", argErr(name, "is required")
		}
		return "", nil
	}
	if strings.TrimSpace(s) != s {
		return "", argErr(name, "has leading or trailing white space")
	}
	if err := events.ValidateFreeform(name, s); err != nil {
		return "", err
	}
	return s, nil
}

// seconds reads an optional whole number of seconds in [0, max].
func (a *args) seconds(name string, max int) (int, error) {
	v, ok := a.m[name]
	if !ok || string(v) == "null" {
		return 0, nil
	}
	var f float64
	if json.Unmarshal(v, &f) != nil || f != math.Trunc(f) {
		return 0, argErr(name, "must be a whole number of seconds")
	}
	if f < 0 || f > float64(max) {
		return 0, argErr(name, "must be between 0 and %d", max)
	}
	return int(f), nil
}

// count reads an optional integer in [1, max] (default def).
func (a *args) count(name string, def, max int) (int, error) {
	v, ok := a.m[name]
	if !ok || string(v) == "null" {
		return def, nil
	}
	var f float64
	if json.Unmarshal(v, &f) != nil || f != math.Trunc(f) || f < 1 || f > float64(max) {
		return 0, argErr(name, "must be an integer between 1 and %d", max)
	}
	return int(f), nil
}

// raw returns an argument's JSON as given (nil when absent or null).
func (a *args) raw(name string) json.RawMessage {
	if !a.has(name) {
		return nil
	}
	return a.m[name]
}
