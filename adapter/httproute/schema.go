package httproute

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// Payload field types.
const (
	typeString  = "string"
	typeSHA256  = "sha256"
	typeInteger = "integer"
	typeNumber  = "number"
	typeBoolean = "boolean"
	typeArray   = "array"
	typeObject  = "object"
	typeAny     = "any"
)

var fieldTypes = []string{typeString, typeSHA256, typeInteger, typeNumber, typeBoolean, typeArray, typeObject, typeAny}

type fieldSpec struct {
	name      string
	typ       string
	required  bool
	nonEmpty  bool
	omitEmpty bool
	pattern   *regexp.Regexp
	minLen    int // -1: none
	maxLen    int
	min, max  *float64
	enum      []string
	items     *fieldSpec
	fields    []*fieldSpec // object: nil = any object
	def       json.RawMessage
}

// schema is a compiled payload section. A nil schema (or one without
// fields) accepts any JSON value and only canonicalises it.
type schema struct {
	fields    []*fieldSpec
	nearMatch []string
	recent    recentPayloads
}

// recentPayloads maps payloads normalize was given or returned lately to
// what it returned: a write's payload is normalized when its intent is
// recorded, and again when its request is rendered and when it is sent;
// those come from here (normalize is idempotent). At most recentKeep
// payloads of at most recentMaxBytes each are kept.
type recentPayloads struct {
	mu   sync.Mutex
	m    map[string]json.RawMessage
	ring [recentKeep]string
	next int
}

const (
	recentKeep     = 1024
	recentMaxBytes = 2 << 10
)

func (r *recentPayloads) get(b []byte) (json.RawMessage, bool) {
	if len(b) > recentMaxBytes {
		return nil, false
	}
	r.mu.Lock()
	v, ok := r.m[string(b)]
	r.mu.Unlock()
	return v, ok
}

func (r *recentPayloads) add(in, out []byte) {
	if len(in) > recentMaxBytes || len(out) > recentMaxBytes {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[string]json.RawMessage, 2*recentKeep)
	}
	o := json.RawMessage(out)
	for _, k := range []string{string(in), string(out)} {
		if _, ok := r.m[k]; ok {
			continue
		}
		delete(r.m, r.ring[r.next])
		r.ring[r.next] = k
		r.m[k] = o
		r.next = (r.next + 1) % recentKeep
	}
}

// compileField compiles one FieldConfig; problems go to report.
func compileField(fc FieldConfig, field string, report func(field, reason string)) *fieldSpec {
	f := &fieldSpec{name: fc.Name, typ: fc.Type, required: fc.Required, nonEmpty: fc.NonEmpty, omitEmpty: fc.OmitEmpty, minLen: -1, maxLen: -1, min: fc.Minimum, max: fc.Maximum}
	ok := true
	bad := func(sub, reason string) {
		report(field+sub, reason)
		ok = false
	}
	if f.typ == "" {
		bad(".type", "is required (one of "+strings.Join(fieldTypes, ", ")+")")
		return nil
	}
	if !slices.Contains(fieldTypes, f.typ) {
		bad(".type", fmt.Sprintf("%q is not a type (one of %s)", f.typ, strings.Join(fieldTypes, ", ")))
		return nil
	}
	f.constrain(fc, bad)
	if fc.Items != nil {
		if f.typ != typeArray {
			bad(".items", "only applies to array fields")
		} else if f.items = compileField(*fc.Items, field+".items", report); f.items == nil {
			ok = false
		}
	}
	if len(fc.Fields) > 0 {
		if f.typ != typeObject {
			bad(".fields", "only applies to object fields")
		} else if f.fields = compileFields(fc.Fields, field+".fields", report); f.fields == nil {
			ok = false
		}
	}
	if !ok {
		return nil
	}
	if fc.Default != nil && !f.compileDefault(fc, field, report) {
		return nil
	}
	return f
}

// constrain sets the field's pattern, lengths, bounds and enum from fc;
// a constraint its type does not take goes to bad.
func (f *fieldSpec) constrain(fc FieldConfig, bad func(sub, reason string)) {
	stringy := f.typ == typeString || f.typ == typeSHA256
	if fc.Pattern != "" {
		re, err := regexp.Compile(fc.Pattern)
		switch {
		case !stringy:
			bad(".pattern", "only applies to string fields")
		case err != nil:
			bad(".pattern", "is not a valid regular expression (RE2 syntax)")
		default:
			f.pattern = re
		}
	}
	for _, l := range []struct {
		sub string
		v   *int
		dst *int
	}{{".min_length", fc.MinLength, &f.minLen}, {".max_length", fc.MaxLength, &f.maxLen}} {
		if l.v == nil {
			continue
		}
		switch {
		case !stringy && f.typ != typeArray:
			bad(l.sub, "only applies to string and array fields")
		case *l.v < 0:
			bad(l.sub, "must not be negative")
		default:
			*l.dst = *l.v
		}
	}
	if f.minLen >= 0 && f.maxLen >= 0 && f.minLen > f.maxLen {
		bad(".min_length", "must not exceed max_length")
	}
	if (f.min != nil || f.max != nil) && f.typ != typeInteger && f.typ != typeNumber {
		bad(".minimum", "minimum and maximum only apply to integer and number fields")
	}
	if f.min != nil && f.max != nil && *f.min > *f.max {
		bad(".minimum", "must not exceed maximum")
	}
	if len(fc.Enum) > 0 {
		if f.typ != typeString {
			bad(".enum", "only applies to string fields")
		}
		f.enum = fc.Enum
	}
	if fc.NonEmpty && f.typ != typeString && f.typ != typeArray && f.typ != typeObject {
		bad(".non_empty", "only applies to string, array and object fields")
	}
}

// compileDefault sets the field's default from fc, which it must satisfy;
// false: a problem went to report.
func (f *fieldSpec) compileDefault(fc FieldConfig, field string, report func(field, reason string)) bool {
	if fc.Required {
		report(field+".default", "a required field has no default")
		return false
	}
	raw, err := json.Marshal(fc.Default)
	if err == nil {
		raw, err = events.Canonicalize(raw)
	}
	if err != nil {
		report(field+".default", "is not a JSON value")
		return false
	}
	if _, _, err := f.validate(raw, "default"); err != nil {
		report(field+".default", "does not satisfy the field: "+strings.TrimPrefix(err.Error(), "default: "))
		return false
	}
	f.def = raw
	return true
}

func compileFields(fcs []FieldConfig, field string, report func(field, reason string)) []*fieldSpec {
	out := make([]*fieldSpec, 0, len(fcs))
	seen := map[string]bool{}
	ok := true
	for _, fc := range fcs {
		sub := fieldPath(field, fc.Name)
		if !validFieldName(fc.Name) {
			report(sub, "a payload field name is 1 to 64 characters of letters, digits and _")
			ok = false
			continue
		}
		if seen[fc.Name] {
			report(sub, "is declared twice")
			ok = false
			continue
		}
		seen[fc.Name] = true
		f := compileField(fc, sub, report)
		if f == nil {
			ok = false
			continue
		}
		out = append(out, f)
	}
	if !ok {
		return nil
	}
	return out
}

func validFieldName(s string) bool {
	return word(s, 64, func(_ int, c byte) bool { return identByte(c) })
}

func (s *schema) declared() map[string]bool {
	if s == nil || s.fields == nil {
		return nil
	}
	m := map[string]bool{}
	for _, f := range s.fields {
		m[f.name] = true
	}
	return m
}

// normalize validates a caller's payload and returns its canonical form.
// Errors are *events.FieldError naming the field (payload.body,
// payload.assets[2], ...); they never quote a value.
func (s *schema) normalize(raw json.RawMessage) (json.RawMessage, error) {
	if s != nil {
		if out, ok := s.recent.get(raw); ok {
			return out, nil
		}
	}
	canon, err := adapter.CanonicalizePayload(raw)
	if err != nil {
		return nil, err
	}
	if s == nil || s.fields == nil {
		return canon, nil
	}
	out, err := validateObject(s.fields, canon, "payload")
	if err != nil {
		return nil, err
	}
	c, err := events.Canonicalize(out)
	if err != nil {
		return nil, adapter.PayloadError("payload", "is not canonicalizable")
	}
	s.recent.add(raw, c)
	return c, nil
}

func validateObject(fields []*fieldSpec, raw json.RawMessage, field string) (json.RawMessage, error) {
	known := make([]string, 0, len(fields))
	for _, f := range fields {
		known = append(known, f.name)
	}
	m, err := adapter.ObjectMembers(raw, field, known...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(fields))
	for _, f := range fields {
		sub := adapter.FieldPath(field, f.name)
		v, ok := m[f.name]
		if !ok {
			if f.required {
				return nil, adapter.PayloadError(sub, "is required")
			}
			if f.def != nil {
				out[f.name] = f.def
			}
			continue
		}
		val, keep, err := f.validate(v, sub)
		if err != nil {
			return nil, err
		}
		if keep {
			out[f.name] = val
		}
	}
	return json.Marshal(out)
}

func rawEmpty(raw json.RawMessage) bool {
	switch string(raw) {
	case `""`, "null", "[]", "{}":
		return true
	}
	return false
}

// validate checks one canonical value against f. keep is false when
// omit_empty leaves it out.
func (f *fieldSpec) validate(raw json.RawMessage, field string) (json.RawMessage, bool, error) {
	if f.omitEmpty && rawEmpty(raw) && (f.typ == typeAny || string(raw) != "null") {
		return nil, false, nil
	}
	var err error
	switch f.typ {
	case typeString, typeSHA256:
		err = f.checkString(raw, field)
	case typeInteger, typeNumber:
		err = f.checkNumber(raw, field)
	case typeBoolean:
		if string(raw) != "true" && string(raw) != "false" {
			err = adapter.PayloadError(field, "must be true or false")
		}
	case typeArray:
		return f.checkArray(raw, field)
	case typeObject:
		return f.checkObject(raw, field)
	}
	if err != nil {
		return nil, false, err
	}
	return raw, true, nil
}

func (f *fieldSpec) checkString(raw json.RawMessage, field string) error {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return adapter.PayloadError(field, "must be a string")
	}
	if f.typ == typeSHA256 && !adapter.IsSHA256Hex(s) {
		return adapter.PayloadError(field, "must be a sha256: 64 lowercase hex characters")
	}
	if f.nonEmpty && strings.TrimSpace(s) == "" {
		return adapter.PayloadError(field, "must not be empty")
	}
	if f.minLen >= 0 && len(s) < f.minLen {
		return adapter.PayloadError(field, fmt.Sprintf("must be at least %d bytes", f.minLen))
	}
	if f.maxLen >= 0 && len(s) > f.maxLen {
		return adapter.PayloadError(field, fmt.Sprintf("must be at most %d bytes", f.maxLen))
	}
	if f.pattern != nil && !f.pattern.MatchString(s) {
		return adapter.PayloadError(field, "must match "+f.pattern.String())
	}
	if len(f.enum) > 0 && !slices.Contains(f.enum, s) {
		return adapter.PayloadError(field, "must be one of "+strings.Join(f.enum, ", "))
	}
	return nil
}

func (f *fieldSpec) checkNumber(raw json.RawMessage, field string) error {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return adapter.PayloadError(field, "must be "+article(f.typ))
	}
	var n float64
	if f.typ == typeInteger {
		i, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return adapter.PayloadError(field, "must be an integer")
		}
		n = float64(i)
	} else {
		x, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(x, 0) {
			return adapter.PayloadError(field, "must be a number")
		}
		n = x
	}
	if f.min != nil && n < *f.min {
		return adapter.PayloadError(field, "must be >= "+strconv.FormatFloat(*f.min, 'g', -1, 64))
	}
	if f.max != nil && n > *f.max {
		return adapter.PayloadError(field, "must be <= "+strconv.FormatFloat(*f.max, 'g', -1, 64))
	}
	return nil
}

// checkArray checks an array and its items, each normalized.
func (f *fieldSpec) checkArray(raw json.RawMessage, field string) (json.RawMessage, bool, error) {
	var items []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, false, adapter.PayloadError(field, "must be an array")
	}
	if f.nonEmpty && len(items) == 0 {
		return nil, false, adapter.PayloadError(field, "must not be empty")
	}
	if f.minLen >= 0 && len(items) < f.minLen {
		return nil, false, adapter.PayloadError(field, fmt.Sprintf("must have at least %d elements", f.minLen))
	}
	if f.maxLen >= 0 && len(items) > f.maxLen {
		return nil, false, adapter.PayloadError(field, fmt.Sprintf("must have at most %d elements", f.maxLen))
	}
	if f.items != nil {
		out := make([]json.RawMessage, 0, len(items))
		for i, it := range items {
			v, keep, err := f.items.validate(it, field+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, false, err
			}
			if !keep {
				v = json.RawMessage("null")
			}
			out = append(out, v)
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, false, adapter.PayloadError(field, "must be an array")
		}
		return b, true, nil
	}
	return raw, true, nil
}

func (f *fieldSpec) checkObject(raw json.RawMessage, field string) (json.RawMessage, bool, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false, adapter.PayloadError(field, "must be a JSON object")
	}
	if f.nonEmpty && string(raw) == "{}" {
		return nil, false, adapter.PayloadError(field, "must have at least one field")
	}
	if f.fields != nil {
		out, err := validateObject(f.fields, raw, field)
		if err != nil {
			return nil, false, err
		}
		return out, true, nil
	}
	return raw, true, nil
}

func article(typ string) string {
	if typ == typeInteger {
		return "an integer"
	}
	return "a " + typ
}

// shape puts a payload rebuilt from a response into the intent's shape:
// declared fields that are absent or null take their default or are left
// out, omit_empty fields that are empty are left out, other keys are kept.
// It does not validate values: a record is evidence, and a difference
// shows in its hash. missing reports a required field that is absent.
func (s *schema) shape(m map[string]any) (json.RawMessage, bool, error) {
	missing := false
	if s != nil {
		for _, f := range s.fields {
			v, ok := m[f.name]
			if !ok || v == nil {
				delete(m, f.name)
				switch {
				case f.def != nil:
					m[f.name] = f.def
				case f.required:
					missing = true
				}
				continue
			}
			if f.omitEmpty && isEmpty(v, true) {
				delete(m, f.name)
			}
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, missing, err
	}
	c, err := events.Canonicalize(b)
	if err != nil {
		return nil, missing, err
	}
	return c, missing, nil
}

// resembles: both payloads are objects that agree on every near_match
// field (each present in both).
func (s *schema) resembles(a, b json.RawMessage) bool {
	if s == nil || len(s.nearMatch) == 0 {
		return false
	}
	ca, err1 := events.Canonicalize(a)
	cb, err2 := events.Canonicalize(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(ca, &ma) != nil || json.Unmarshal(cb, &mb) != nil || ma == nil || mb == nil {
		return false
	}
	for _, f := range s.nearMatch {
		va, ok1 := ma[f]
		vb, ok2 := mb[f]
		if !ok1 || !ok2 || !bytes.Equal(va, vb) {
			return false
		}
	}
	return true
}
