package events

import (
	"bytes"
	"cmp"
	"encoding/json"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// Bodies as settle writes them, read without encoding/json.
//
// json.Marshal writes a body's members in the order of its struct's
// fields, without white space; settle's strings rarely need an escape.
// readBody reads exactly that shape: every member's key byte for byte one
// of the struct's json names, in field order (so no key twice, none in
// another case, none unknown), each value of its field's JSON kind with
// no null, no white space, no escape in any string, integers without
// fraction or exponent. What it reads from such a body is what strict
// encoding/json (DisallowUnknownFields, one value, nothing after it)
// would read, and it reads nothing that decoder would refuse; on any
// other input it gives up (ok false) and the caller decodes the body with
// strictUnmarshal, which decides. FuzzDecodeFastPathAgrees and
// TestReadBodyAgreesWithEncodingJSON check both claims. Each struct is
// read by a plan built once from its json tags (planOf), so a field added
// to a body is read with no code here, or, of a new kind, panics at init.
//
// This reader and decodeCanonical (canonical.go) are the one JSON kept by
// hand: every reader of the log (projector, audit, node) decodes each
// event, and encoding/json alone made Decode several times slower (the
// A/B "JSON: hand-written vs encoding/json" in BENCHMARKS.md). Encoding
// and the JetStream ack use encoding/json.

// readBody fills d (a fresh body from NewData) from b. On false d is left
// partly filled: the caller must start again from a fresh body.
func readBody(b []byte, d Data) bool {
	v := reflect.ValueOf(d)
	p, ok := bodyPlans[v.Type()]
	if !ok {
		return false
	}
	r := bodyReader{b: b}
	r.object(p, v.Elem())
	return !r.bad && r.i == len(b)
}

// bodyReader reads b from i; bad is set at the first doubt, after which
// every read does nothing and returns a zero value.
type bodyReader struct {
	b   []byte
	i   int
	bad bool
}

// plainByte: a byte that stands for itself inside a JSON string (not a
// control character, a quote or a backslash).
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// member reads the next member's key and colon in an object whose '{'
// has been read, and returns the key's index in keys: a later index than
// prev (the previous member's, -1 before the first). It returns -1 once
// the object's '}' is read, or on any doubt (r.bad set).
func (r *bodyReader) member(keys []string, prev int) int {
	if r.bad || r.i >= len(r.b) {
		r.bad = true
		return -1
	}
	if r.b[r.i] == '}' {
		r.i++
		return -1
	}
	if prev >= 0 {
		if r.b[r.i] != ',' {
			r.bad = true
			return -1
		}
		r.i++
	}
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		r.bad = true
		return -1
	}
	rest := r.b[r.i+1:]
	n := bytes.IndexByte(rest, '"')
	if n < 0 || n+1 >= len(rest) || rest[n+1] != ':' {
		r.bad = true
		return -1
	}
	// A key equal to a json name holds no escape and no control byte.
	key := rest[:n]
	for j := prev + 1; j < len(keys); j++ {
		if string(key) == keys[j] {
			r.i += n + 3
			return j
		}
	}
	r.bad = true
	return -1
}

// quoted reads a string without escapes and returns its bytes (quotes
// excluded): encoding/json's value for it when it is valid UTF-8.
func (r *bodyReader) quoted() []byte {
	if r.bad || r.i >= len(r.b) || r.b[r.i] != '"' {
		r.bad = true
		return nil
	}
	start := r.i + 1
	ascii := true
	for j := start; j < len(r.b); j++ {
		c := r.b[j]
		if plainByte[c] {
			ascii = ascii && c < utf8.RuneSelf
			continue
		}
		if c != '"' {
			break // an escape or a control byte
		}
		s := r.b[start:j]
		if !ascii && !utf8.Valid(s) {
			break // encoding/json would replace the invalid bytes
		}
		r.i = j + 1
		return s
	}
	r.bad = true
	return nil
}

func (r *bodyReader) str() string {
	return string(r.quoted())
}

// unmarshal reads a string without escapes into u, handing it over
// quotes and all, as encoding/json does (time.Time, Duration).
func (r *bodyReader) unmarshal(u json.Unmarshaler) {
	start := r.i
	if r.quoted(); !r.bad && u.UnmarshalJSON(r.b[start:r.i]) != nil {
		r.bad = true
	}
}

// int reads an integer: an optional minus and at most 19 digits, no
// leading zero, in range for an int (anything longer, a fraction or an
// exponent is left to encoding/json, which refuses the latter two for an
// int).
func (r *bodyReader) int() int {
	if r.bad {
		return 0
	}
	j := r.i
	neg := j < len(r.b) && r.b[j] == '-'
	if neg {
		j++
	}
	start := j
	var u uint64 // 19 digits fit
	for j < len(r.b) && r.b[j] >= '0' && r.b[j] <= '9' {
		u = u*10 + uint64(r.b[j]-'0')
		j++
	}
	n := j - start
	if n == 0 || n > 19 || (n > 1 && r.b[start] == '0') || u > 1<<63 || (!neg && u == 1<<63) {
		r.bad = true
		return 0
	}
	v := int64(u) // -1<<63 when u is 1<<63 (negative only)
	if neg {
		v = -v
	}
	if int64(int(v)) != v {
		r.bad = true
		return 0
	}
	r.i = j
	return int(v)
}

func (r *bodyReader) bool() bool {
	switch rest := r.b[min(r.i, len(r.b)):]; {
	case r.bad:
	case bytes.HasPrefix(rest, []byte("true")):
		r.i += 4
		return true
	case bytes.HasPrefix(rest, []byte("false")):
		r.i += 5
		return false
	}
	r.bad = true
	return false
}

// raw reads an object or an array as json.RawMessage keeps it: a copy of
// its bytes. Its end is found by counting brackets outside strings; that
// those bytes are one valid JSON value is then checked by json.Valid.
func (r *bodyReader) raw() json.RawMessage {
	if r.bad || r.i >= len(r.b) || (r.b[r.i] != '{' && r.b[r.i] != '[') {
		r.bad = true
		return nil
	}
	depth, in := 0, false
	for j := r.i; j < len(r.b); j++ {
		c := r.b[j]
		if in {
			switch c {
			case '\\':
				j++
			case '"':
				in = false
			}
			continue
		}
		switch c {
		case '"':
			in = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				v := r.b[r.i : j+1]
				if !json.Valid(v) {
					r.bad = true
					return nil
				}
				r.i = j + 1
				return append(json.RawMessage(nil), v...)
			}
		}
	}
	r.bad = true
	return nil
}

// next reads an array's '[' (first) or the ',' before its next element,
// and says whether an element follows; false once its ']' is read or on
// doubt. '[]' is an empty, non-nil slice in encoding/json: the callers
// start from one.
func (r *bodyReader) next(first bool) bool {
	if r.bad || r.i >= len(r.b) {
		r.bad = true
		return false
	}
	switch c := r.b[r.i]; {
	case first && c == '[':
		r.i++
		if r.i < len(r.b) && r.b[r.i] == ']' {
			r.i++
			return false
		}
		return true
	case !first && c == ',':
		r.i++
		return true
	case !first && c == ']':
		r.i++
		return false
	}
	r.bad = true
	return false
}

func (r *bodyReader) strings() []string {
	out := []string{}
	for first := true; r.next(first); first = false {
		out = append(out, r.str())
	}
	return out
}

// A plan reads one struct type as json.Marshal writes it: its members'
// json names in field order, and for each the field it fills and how.
type plan struct {
	keys   []string
	fields []planField
}

type planField struct {
	index int
	kind  fieldKind
	typ   reflect.Type // the field's type
	sub   *plan        // kStruct, kPointer, kStructs: the struct's plan
}

type fieldKind uint8

const (
	kString fieldKind = iota
	kInt
	kBool
	kUnmarshaler // a string handed to UnmarshalJSON
	kRaw
	kStrings
	kStruct
	kPointer // to a struct
	kStructs // a slice of structs
)

// bodyPlans holds the plan of each body type, keyed by its pointer type
// (as NewData returns it).
var bodyPlans = func() map[reflect.Type]*plan {
	m := make(map[reflect.Type]*plan, len(registry))
	for _, newData := range registry {
		t := reflect.TypeOf(newData())
		m[t] = planOf(t.Elem())
	}
	return m
}()

// planOf names a struct's members as encoding/json does (tag name, else
// field name; "-" and unexported fields left out). It panics on a field
// of a type it has no reader for, so that a body field of a new kind
// fails every test until it has one.
func planOf(t reflect.Type) *plan {
	p := &plan{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		name = cmp.Or(name, f.Name)
		pf := planField{index: i, typ: f.Type}
		switch ft := f.Type; {
		case f.Anonymous: // encoding/json would flatten it
			panic("events: readBody does not read the embedded " + t.String() + "." + f.Name)
		case ft == reflect.TypeFor[time.Time]() || ft == reflect.TypeFor[Duration]():
			pf.kind = kUnmarshaler
		case ft == reflect.TypeFor[json.RawMessage]():
			pf.kind = kRaw
		case ft == reflect.TypeFor[[]string]():
			pf.kind = kStrings
		case ft.Kind() == reflect.String:
			pf.kind = kString
		case ft.Kind() == reflect.Int:
			pf.kind = kInt
		case ft.Kind() == reflect.Bool:
			pf.kind = kBool
		case ft.Kind() == reflect.Struct:
			pf.kind, pf.sub = kStruct, planOf(ft)
		case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
			pf.kind, pf.sub = kPointer, planOf(ft.Elem())
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			pf.kind, pf.sub = kStructs, planOf(ft.Elem())
		default:
			panic("events: readBody has no reader for " + t.String() + "." + f.Name)
		}
		p.keys = append(p.keys, name)
		p.fields = append(p.fields, pf)
	}
	return p
}

// object reads an object of p's struct type into v.
func (r *bodyReader) object(p *plan, v reflect.Value) {
	if r.bad || r.i >= len(r.b) || r.b[r.i] != '{' {
		r.bad = true
		return
	}
	r.i++
	for k := r.member(p.keys, -1); k >= 0; k = r.member(p.keys, k) {
		pf := &p.fields[k]
		f := v.Field(pf.index)
		switch pf.kind {
		case kString:
			f.SetString(r.str())
		case kInt:
			f.SetInt(int64(r.int()))
		case kBool:
			f.SetBool(r.bool())
		case kUnmarshaler:
			r.unmarshal(f.Addr().Interface().(json.Unmarshaler))
		case kRaw:
			f.SetBytes(r.raw())
		case kStrings:
			*f.Addr().Interface().(*[]string) = r.strings()
		case kStruct:
			r.object(pf.sub, f)
		case kPointer:
			f.Set(reflect.New(pf.typ.Elem()))
			r.object(pf.sub, f.Elem())
		case kStructs:
			f.Grow(1) // so that '[]' is an empty, non-nil slice
			for first := true; r.next(first); first = false {
				n := f.Len()
				f.Grow(1)
				f.SetLen(n + 1)
				r.object(pf.sub, f.Index(n))
			}
		}
	}
}
