package httproute

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/goccy/go-yaml"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// Limits of a route file.
const (
	// MaxFileSize bounds a route file.
	MaxFileSize = 1 << 20
	// maxNodes bounds the values of a file once anchors are expanded, so an
	// alias bomb is refused instead of expanded.
	maxNodes = 100_000
	maxDepth = 64
)

// ymap is a YAML mapping with string keys, in file order.
type ymap struct {
	keys []string
	vals []any
}

// decoder turns the YAML tree into RouteConfigs, strictly: every unknown
// key, wrong type and bad duration is reported (not just the first), each
// as one *RouteError naming route and field. Semantic checks (templates,
// URLs, policy, environment) are compile's.
type decoder struct {
	errs   []*RouteError
	route  string
	failed map[string]bool // fields of the current route that failed to decode
	nodes  int
}

func (d *decoder) fail(field, reason string) {
	d.errs = append(d.errs, &RouteError{Route: d.route, Field: field, Reason: reason})
	if d.failed != nil {
		d.failed[field] = true
	}
}

// parseYAML parses data with goccy/go-yaml (duplicate keys refused, one
// document) into ymap/[]any/scalars. goccy is guarded: a panic in it is a
// refusal, never a crash.
func parseYAML(data []byte) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, errors.New("is not valid YAML (the parser failed)")
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data), yaml.UseOrderedMap())
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, errors.Errorf("is not valid YAML: %s", firstLine(yaml.FormatError(err, false, false)))
	}
	var next any
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, errors.New("must hold one YAML document")
	}
	return v, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "..."
	}
	return s
}

// conv converts goccy's tree, counting values against maxNodes.
func (d *decoder) conv(v any, depth int) (any, error) {
	d.nodes++
	if d.nodes > maxNodes {
		return nil, errors.Errorf("holds more than %d values once anchors are expanded", maxNodes)
	}
	if depth > maxDepth {
		return nil, errors.Errorf("is nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case yaml.MapSlice:
		m := ymap{keys: make([]string, 0, len(x)), vals: make([]any, 0, len(x))}
		for _, it := range x {
			k, ok := it.Key.(string)
			if !ok {
				return nil, errors.New("has a mapping key that is not a string")
			}
			if slices.Contains(m.keys, k) {
				return nil, errors.Errorf("has the key %q twice", clip(k))
			}
			cv, err := d.conv(it.Value, depth+1)
			if err != nil {
				return nil, err
			}
			m.keys = append(m.keys, k)
			m.vals = append(m.vals, cv)
		}
		return m, nil
	case []any:
		out := make([]any, 0, len(x))
		for _, it := range x {
			cv, err := d.conv(it, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, cv)
		}
		return out, nil
	case nil, string, bool, int64, uint64, float64:
		return x, nil
	case int:
		return int64(x), nil
	case uint:
		return uint64(x), nil
	}
	return nil, errors.Errorf("holds a %T value, which a route file does not use", v)
}

func clip(s string) string {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:64], "") + "..."
	}
	return s
}

// --- mappings ---

type obj struct {
	d     *decoder
	field string
	m     ymap
	asked []string
}

// object returns v as a mapping, or reports field and returns nil.
func (d *decoder) object(v any, field string) *obj {
	m, ok := v.(ymap)
	if !ok {
		d.fail(field, "must be a mapping")
		return nil
	}
	return &obj{d: d, field: field, m: m}
}

func (o *obj) sub(key string) string { return fieldPath(o.field, key) }

// take returns the value of key; null counts as absent.
func (o *obj) take(key string) (any, bool) {
	o.asked = append(o.asked, key)
	i := slices.Index(o.m.keys, key)
	if i < 0 || o.m.vals[i] == nil {
		return nil, false
	}
	return o.m.vals[i], true
}

// end reports every key that no take asked for.
func (o *obj) end() {
	for _, k := range o.m.keys {
		if !slices.Contains(o.asked, k) {
			o.d.fail(o.sub(k), "is not a known key (known: "+strings.Join(o.asked, ", ")+")")
		}
	}
}

func typeName(v any) string {
	switch v.(type) {
	case ymap:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, uint64, float64:
		return "a number"
	}
	return "null"
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int64:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			return int(x), true
		}
	case uint64:
		if x <= math.MaxInt32 {
			return int(x), true
		}
	}
	return 0, false
}

// toFloat returns v as a finite number, or the reason it is not one.
func toFloat(v any) (float64, string) {
	var f float64
	switch x := v.(type) {
	case int64:
		f = float64(x)
	case uint64:
		f = float64(x)
	case float64:
		f = x
	default:
		return 0, "must be a number"
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, "must be a finite number"
	}
	return f, ""
}

// parseDuration accepts Go durations ("30s", "24h", "1h30m"), >= 0.
func parseDuration(v any) (time.Duration, string) {
	s, ok := v.(string)
	if !ok {
		return 0, `must be a duration like "30s", "5m" or "24h"`
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, `is not a duration (like "30s", "5m" or "24h"; units ns, us, ms, s, m, h)`
	}
	if d < 0 {
		return 0, "must not be negative"
	}
	return d, ""
}

// list decodes a list whose items each is decodes, a single item
// standing for a list of one; it reports the first bad item.
func list[T any](d *decoder, v any, field, listReason string, each func(any) (T, string)) ([]T, bool) {
	if x, reason := each(v); reason == "" {
		return []T{x}, true
	}
	l, isList := v.([]any)
	if !isList {
		d.fail(field, listReason)
		return nil, false
	}
	out := make([]T, 0, len(l))
	for i, it := range l {
		x, reason := each(it)
		if reason != "" {
			d.fail(field+"["+strconv.Itoa(i)+"]", reason)
			return nil, false
		}
		out = append(out, x)
	}
	return out, true
}

func asString(v any) (string, string) {
	if s, ok := v.(string); ok {
		return s, ""
	}
	return "", "must be a string, not " + typeName(v)
}

func asInt(v any) (int, string) {
	if n, ok := toInt(v); ok {
		return n, ""
	}
	return 0, "must be an integer"
}

// strPairs decodes a mapping of names to strings, reporting every value
// that is not one; ok is false when one was not.
func (d *decoder) strPairs(v any, field string) (names, vals []string, ok bool) {
	m := d.object(v, field)
	if m == nil {
		return nil, nil, false
	}
	ok = true
	for i, k := range m.m.keys {
		s, reason := asString(m.m.vals[i])
		if reason != "" {
			d.fail(fieldPath(field, k), reason)
			ok = false
			continue
		}
		names, vals = append(names, k), append(vals, s)
	}
	return names, vals, ok
}

// toTree turns a ymap tree into map[string]any/[]any/scalars.
func toTree(v any) any {
	switch x := v.(type) {
	case ymap:
		m := make(map[string]any, len(x.keys))
		for i, k := range x.keys {
			m[k] = toTree(x.vals[i])
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = toTree(it)
		}
		return out
	}
	return v
}

// --- the file ---

// decodeFile decodes a whole route file. failed[i] holds the fields of
// routes[i] that failed to decode (compile skips their checks, so a
// problem is reported once).
func decodeFile(data []byte) ([]RouteConfig, []map[string]bool, []*RouteError) {
	d := &decoder{}
	if len(data) > MaxFileSize {
		d.fail("", fmt.Sprintf("is larger than %d bytes", MaxFileSize))
		return nil, nil, d.errs
	}
	raw, err := parseYAML(data)
	if err != nil {
		d.fail("", err.Error())
		return nil, nil, d.errs
	}
	if raw == nil {
		d.fail("routes", "is required (the file is empty)")
		return nil, nil, d.errs
	}
	tree, err := d.conv(raw, 0)
	if err != nil {
		d.fail("", err.Error())
		return nil, nil, d.errs
	}
	top := d.object(tree, "")
	if top == nil {
		return nil, nil, d.errs
	}
	if v, ok := top.take("version"); ok {
		if n, isInt := toInt(v); !isInt || n != 1 {
			d.fail("version", "must be 1")
		}
	}
	rv, ok := top.take("routes")
	top.end()
	if !ok {
		d.fail("routes", "is required")
		return nil, nil, d.errs
	}
	list, isList := rv.([]any)
	if !isList {
		d.fail("routes", "must be a list of routes")
		return nil, nil, d.errs
	}
	if len(list) == 0 {
		d.fail("routes", "is empty")
		return nil, nil, d.errs
	}
	var cfgs []RouteConfig
	var failed []map[string]bool
	names := map[string]int{}
	for i, item := range list {
		label := "routes[" + strconv.Itoa(i) + "]"
		d.route, d.failed = label, map[string]bool{}
		o := d.object(item, "")
		if o == nil {
			cfgs = append(cfgs, RouteConfig{})
			failed = append(failed, map[string]bool{"": true})
			continue
		}
		var cfg RouteConfig
		d.value(o, "name", reflect.ValueOf(&cfg.Name).Elem())
		if events.ValidateToken("name", cfg.Name) == nil {
			d.route = cfg.Name
			if first, dup := names[cfg.Name]; dup {
				d.fail("name", fmt.Sprintf("is also the name of routes[%d]; route names must be unique", first))
			} else {
				names[cfg.Name] = i
			}
		}
		cfg.Policy = adapter.DefaultPolicy()
		d.into(o, reflect.ValueOf(&cfg).Elem())
		cfgs = append(cfgs, cfg)
		failed = append(failed, d.failed)
	}
	return cfgs, failed, d.errs
}

// into decodes the keys of o into the exported fields of the struct v, in
// field order, then reports every unknown key. A field's key is its name
// in snake case (yamlKey); a field tagged yaml:"-" is not a key, nor is a
// key already taken.
func (d *decoder) into(o *obj, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key := yamlKey(f.Name)
		if !f.IsExported() || f.Tag.Get("yaml") == "-" || slices.Contains(o.asked, key) {
			continue
		}
		if key == "visibility" { // a RecordFields' text, or {from, map, probe}
			d.visibility(o, v.Addr().Interface().(*RecordFields))
			continue
		}
		d.value(o, key, v.Field(i))
	}
	o.end()
}

// yamlKey is a field's key in a route file: BaseURL is base_url,
// Definite4xx definite_4xx.
func yamlKey(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		upper, digit := c >= 'A' && c <= 'Z', c >= '0' && c <= '9'
		if i > 0 {
			prev := name[i-1]
			prevUpper := prev >= 'A' && prev <= 'Z'
			nextLower := i+1 < len(name) && name[i+1] >= 'a' && name[i+1] <= 'z'
			if upper && (!prevUpper || nextLower) || digit && !(prev >= '0' && prev <= '9') {
				b.WriteByte('_')
			}
		}
		if upper {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

var (
	durationType       = reflect.TypeFor[time.Duration]()
	eventsDurationType = reflect.TypeFor[events.Duration]()
)

// value decodes the value of key into f by f's type; a pointer is left
// nil when key is absent. A value that does not fit is reported and f is
// left as it was.
func (d *decoder) value(o *obj, key string, f reflect.Value) {
	v, ok := o.take(key)
	if !ok {
		return
	}
	field := o.sub(key)
	t := f.Type()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var x any
	reason := ""
	switch p := f.Addr().Interface().(type) {
	case *[]string:
		x, ok = list(d, v, field, "must be a list of strings", asString)
	case *[]int:
		x, ok = list(d, v, field, "must be a list of integers", asInt)
	case *map[string]string:
		names, vals, all := d.strPairs(v, field)
		m := make(map[string]string, len(names))
		for i, n := range names {
			m[n] = vals[i]
		}
		x, ok = m, all
	case *[]Header:
		names, vals, _ := d.strPairs(v, field)
		for i, n := range names {
			*p = append(*p, Header{Name: n, Value: vals[i]})
		}
		return
	case *[]FieldConfig:
		*p = d.fields(v, field)
		return
	case *[]OutcomeRule:
		d.outcomes(v, field, p)
		return
	case **FieldConfig:
		fc := d.field(v, field)
		*p = &fc
		return
	case **int64: // parent.minimum
		var n float64
		if n, reason = toFloat(v); reason == "" && (n != math.Trunc(n) || n < 0 || n > 1e15) {
			reason = "must be a whole number between 0 and 10^15"
		}
		x = int64(n)
	case *any:
		*p = toTree(v)
		return
	default:
		if x, reason, ok = scalar(v, t); !ok {
			d.section(v, field, f, t)
			return
		}
	}
	if reason != "" {
		d.fail(field, reason)
		return
	}
	if !ok {
		return
	}
	rv := reflect.ValueOf(x).Convert(t)
	if f.Kind() == reflect.Pointer {
		ptr := reflect.New(t)
		ptr.Elem().Set(rv)
		rv = ptr
	}
	f.Set(rv)
}

// scalar reads v as a value of type t; ok is false when t is not a
// scalar (a section, decoded by section).
func scalar(v any, t reflect.Type) (x any, reason string, ok bool) {
	switch {
	case t == durationType || t == eventsDurationType:
		x, reason = parseDuration(v)
	case t.Kind() == reflect.String:
		x, reason = asString(v)
	case t.Kind() == reflect.Int:
		x, reason = asInt(v)
	case t.Kind() == reflect.Float64:
		x, reason = toFloat(v)
	case t.Kind() == reflect.Bool:
		var isBool bool
		if x, isBool = v.(bool); !isBool {
			reason = "must be true or false, not " + typeName(v)
		}
	default:
		return nil, "", false
	}
	return x, reason, true
}

// section decodes the mapping v into the struct (or pointer to struct) f.
func (d *decoder) section(v any, field string, f reflect.Value, t reflect.Type) {
	sub := d.object(v, field)
	if sub == nil {
		return
	}
	if f.Kind() == reflect.Pointer {
		f.Set(reflect.New(t))
		f = f.Elem()
	}
	d.into(sub, f)
}

func (d *decoder) outcomes(v any, field string, dst *[]OutcomeRule) {
	l, isList := v.([]any)
	if !isList {
		d.fail(field, "must be a list of rules")
	}
	for i, it := range l {
		var rule OutcomeRule
		if r := d.object(it, field+"["+strconv.Itoa(i)+"]"); r != nil {
			d.into(r, reflect.ValueOf(&rule).Elem())
		}
		*dst = append(*dst, rule)
	}
}

func (d *decoder) visibility(o *obj, r *RecordFields) {
	v, ok := o.take("visibility")
	if !ok {
		return
	}
	if str, isStr := v.(string); isStr {
		r.Visibility = str
	} else if m := d.object(v, o.sub("visibility")); m != nil {
		d.value(m, "from", reflect.ValueOf(&r.Visibility).Elem())
		d.value(m, "map", reflect.ValueOf(&r.VisibilityMap).Elem())
		d.value(m, "probe", reflect.ValueOf(&r.VisibilityProbe).Elem())
		m.end()
	}
}

func (d *decoder) fields(v any, field string) []FieldConfig {
	m, ok := v.(ymap)
	if !ok {
		d.fail(field, "must be a mapping of field names to field specs")
		return nil
	}
	out := make([]FieldConfig, 0, len(m.keys))
	for i, k := range m.keys {
		fc := d.field(m.vals[i], fieldPath(field, k))
		fc.Name = k
		out = append(out, fc)
	}
	return out
}

// field decodes a field spec; a bare string is its type ("sha256").
func (d *decoder) field(v any, field string) FieldConfig {
	var fc FieldConfig
	if s, ok := v.(string); ok {
		fc.Type = s
		return fc
	}
	o := d.object(v, field)
	if o == nil {
		fc.Type = "?" // reported; compile skips it
		return fc
	}
	d.into(o, reflect.ValueOf(&fc).Elem())
	return fc
}
