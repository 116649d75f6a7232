package httproute

import (
	"bytes"
	"fmt"
	"io"
	"math"
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

func (o *obj) str(key string, dst *string) {
	v, ok := o.take(key)
	if !ok {
		return
	}
	s, isStr := v.(string)
	if !isStr {
		o.d.fail(o.sub(key), "must be a string, not "+typeName(v))
		return
	}
	*dst = s
}

func (o *obj) boolean(key string, dst *bool) {
	v, ok := o.take(key)
	if !ok {
		return
	}
	b, isBool := v.(bool)
	if !isBool {
		o.d.fail(o.sub(key), "must be true or false, not "+typeName(v))
		return
	}
	*dst = b
}

func (o *obj) optBool(key string) *bool {
	v, ok := o.take(key)
	if !ok {
		return nil
	}
	b, isBool := v.(bool)
	if !isBool {
		o.d.fail(o.sub(key), "must be true or false, not "+typeName(v))
		return nil
	}
	return &b
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

func (o *obj) integer(key string, dst *int) {
	v, ok := o.take(key)
	if !ok {
		return
	}
	n, isInt := toInt(v)
	if !isInt {
		o.d.fail(o.sub(key), "must be an integer")
		return
	}
	*dst = n
}

func (o *obj) optInt(key string) *int {
	v, ok := o.take(key)
	if !ok {
		return nil
	}
	n, isInt := toInt(v)
	if !isInt {
		o.d.fail(o.sub(key), "must be an integer")
		return nil
	}
	return &n
}

func (o *obj) optFloat(key string) *float64 {
	v, ok := o.take(key)
	if !ok {
		return nil
	}
	var f float64
	switch x := v.(type) {
	case int64:
		f = float64(x)
	case uint64:
		f = float64(x)
	case float64:
		f = x
	default:
		o.d.fail(o.sub(key), "must be a number")
		return nil
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		o.d.fail(o.sub(key), "must be a finite number")
		return nil
	}
	return &f
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

func (o *obj) duration(key string, dst *time.Duration) {
	v, ok := o.take(key)
	if !ok {
		return
	}
	d, reason := parseDuration(v)
	if reason != "" {
		o.d.fail(o.sub(key), reason)
		return
	}
	*dst = d
}

func (o *obj) eventsDuration(key string, dst *events.Duration) {
	var d time.Duration = dst.D()
	o.duration(key, &d)
	*dst = events.Duration(d)
}

func (o *obj) strList(key string, dst *[]string) {
	v, ok := o.take(key)
	if !ok {
		return
	}
	if s, isStr := v.(string); isStr { // a single value is a list of one
		*dst = []string{s}
		return
	}
	l, isList := v.([]any)
	if !isList {
		o.d.fail(o.sub(key), "must be a list of strings")
		return
	}
	out := make([]string, 0, len(l))
	for i, it := range l {
		s, isStr := it.(string)
		if !isStr {
			o.d.fail(o.sub(key)+"["+strconv.Itoa(i)+"]", "must be a string, not "+typeName(it))
			return
		}
		out = append(out, s)
	}
	*dst = out
}

func (o *obj) intList(key string, dst *[]int) {
	v, ok := o.take(key)
	if !ok {
		return
	}
	if n, isInt := toInt(v); isInt {
		*dst = []int{n}
		return
	}
	l, isList := v.([]any)
	if !isList {
		o.d.fail(o.sub(key), "must be a list of integers")
		return
	}
	out := make([]int, 0, len(l))
	for i, it := range l {
		n, isInt := toInt(it)
		if !isInt {
			o.d.fail(o.sub(key)+"["+strconv.Itoa(i)+"]", "must be an integer")
			return
		}
		out = append(out, n)
	}
	*dst = out
}

func (o *obj) strMap(key string, dst *map[string]string) {
	v, ok := o.take(key)
	if !ok {
		return
	}
	m, isMap := v.(ymap)
	if !isMap {
		o.d.fail(o.sub(key), "must be a mapping")
		return
	}
	out := make(map[string]string, len(m.keys))
	bad := false
	for i, k := range m.keys {
		s, isStr := m.vals[i].(string)
		if !isStr {
			o.d.fail(fieldPath(o.sub(key), k), "must be a string, not "+typeName(m.vals[i]))
			bad = true
			continue
		}
		out[k] = s
	}
	if !bad {
		*dst = out
	}
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

func (o *obj) tree(key string, dst *any) {
	if v, ok := o.take(key); ok {
		*dst = toTree(v)
	}
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
		o.str("name", &cfg.Name)
		if events.ValidateToken("name", cfg.Name) == nil {
			d.route = cfg.Name
			if first, dup := names[cfg.Name]; dup {
				d.fail("name", fmt.Sprintf("is also the name of routes[%d]; route names must be unique", first))
			} else {
				names[cfg.Name] = i
			}
		}
		d.routeBody(o, &cfg)
		o.end()
		cfgs = append(cfgs, cfg)
		failed = append(failed, d.failed)
	}
	return cfgs, failed, d.errs
}

func (d *decoder) routeBody(o *obj, cfg *RouteConfig) {
	o.str("base_url", &cfg.BaseURL)
	if v, ok := o.take("headers"); ok {
		cfg.Headers = d.headers(v, "headers")
	}
	o.duration("timeout", &cfg.Timeout)
	o.boolean("propagate_trace", &cfg.PropagateTrace)
	if v, ok := o.take("mcp"); ok {
		cfg.MCP = d.mcp(v)
	}
	if v, ok := o.take("write"); ok {
		cfg.Write = d.write(v)
	}
	if v, ok := o.take("payload"); ok {
		cfg.Payload = d.payload(v)
	}
	if v, ok := o.take("search"); ok {
		cfg.Search = d.search(v)
	}
	if v, ok := o.take("readback"); ok {
		cfg.Readback = d.readback(v)
	}
	if v, ok := o.take("status"); ok {
		cfg.Status = d.status(v)
	}
	if v, ok := o.take("identity"); ok {
		cfg.Identity = d.identity(v)
	}
	if v, ok := o.take("correlation"); ok {
		cfg.Correlation = d.correlation(v)
	}
	if v, ok := o.take("parent"); ok {
		cfg.Parent = d.parent(v)
	}
	if v, ok := o.take("rate_limit"); ok {
		cfg.RateLimit = d.rateLimit(v)
	}
	if v, ok := o.take("capabilities"); ok {
		d.capabilities(v, &cfg.Capabilities)
	}
	cfg.Policy = adapter.DefaultPolicy()
	if v, ok := o.take("policy"); ok {
		d.policy(v, &cfg.Policy)
	}
}

func (d *decoder) identity(v any) *IdentityConfig {
	m := d.object(v, "identity")
	if m == nil {
		return nil
	}
	id := &IdentityConfig{}
	m.str("url", &id.URL)
	m.str("tool", &id.Tool)
	m.tree("arguments", &id.Arguments)
	m.str("method", &id.Method)
	m.tree("body", &id.Body)
	m.str("id", &id.ID)
	m.strMap("expect", &id.Expect)
	m.strList("require", &id.Require)
	m.duration("refresh", &id.Refresh)
	m.end()
	return id
}

func (d *decoder) correlation(v any) *CorrelationConfig {
	m := d.object(v, "correlation")
	if m == nil {
		return nil
	}
	c := &CorrelationConfig{}
	m.str("marker", &c.Marker)
	m.str("read", &c.Read)
	m.end()
	return c
}

func (d *decoder) parent(v any) *ParentConfig {
	m := d.object(v, "parent")
	if m == nil {
		return nil
	}
	p := &ParentConfig{}
	m.str("type", &p.Type)
	m.str("pattern", &p.Pattern)
	if f := m.optFloat("minimum"); f != nil {
		if *f != math.Trunc(*f) || *f < 0 || *f > 1e15 {
			d.fail("parent.minimum", "must be a whole number between 0 and 10^15")
		} else {
			n := int64(*f)
			p.Minimum = &n
		}
	}
	p.MaxLength = m.optInt("max_length")
	p.Required = m.optBool("required")
	m.end()
	return p
}

func (d *decoder) rateLimit(v any) *RateLimitConfig {
	m := d.object(v, "rate_limit")
	if m == nil {
		return nil
	}
	r := &RateLimitConfig{}
	m.str("remaining", &r.Remaining)
	m.str("reset", &r.Reset)
	m.str("reset_after", &r.ResetAfter)
	m.duration("max_wait", &r.MaxWait)
	m.end()
	return r
}

func (d *decoder) capabilities(v any, caps *CapabilitiesConfig) {
	c := d.object(v, "capabilities")
	if c == nil {
		return
	}
	c.boolean("idempotency_key", &caps.IdempotencyKey)
	c.duration("key_retention", &caps.KeyRetention)
	c.duration("reflection_delay", &caps.ReflectionDelay)
	caps.StatusQuery = c.optBool("status_query")
	caps.Search = c.optBool("search")
	c.end()
}

func (d *decoder) policy(v any, pol *events.Policy) {
	p := d.object(v, "policy")
	if p == nil {
		return
	}
	p.str("first_write", &pol.FirstWrite)
	p.str("retry", &pol.Retry)
	p.integer("retry_budget", &pol.RetryBudget)
	p.eventsDuration("attempt_deadline", &pol.AttemptDeadline)
	p.eventsDuration("search_before", &pol.SearchBefore)
	p.eventsDuration("search_after", &pol.SearchAfter)
	p.eventsDuration("key_retention", &pol.KeyRetention)
	p.eventsDuration("retention_margin", &pol.RetentionMargin)
	p.boolean("trust_response", &pol.TrustResponse)
	p.eventsDuration("clock_skew", &pol.ClockSkew)
	p.integer("resend_budget", &pol.ResendBudget)
	p.eventsDuration("read_failing_after", &pol.ReadFailingAfter)
	p.end()
}

func (d *decoder) write(v any) *WriteConfig {
	o := d.object(v, "write")
	if o == nil {
		return nil
	}
	w := &WriteConfig{}
	o.str("tool", &w.Tool)
	o.tree("arguments", &w.Arguments)
	o.str("method", &w.Method)
	o.str("url", &w.URL)
	o.str("idempotency_header", &w.IdempotencyHeader)
	o.str("attempt_header", &w.AttemptHeader)
	o.strMap("headers", &w.Headers)
	o.tree("body", &w.Body)
	o.str("encoding", &w.Encoding)
	if rv, ok := o.take("response"); ok {
		if r := d.object(rv, "write.response"); r != nil {
			r.intList("success", &w.Response.Success)
			r.str("external_id", &w.Response.ExternalID)
			r.str("live_url", &w.Response.LiveURL)
			r.strMap("expect", &w.Response.Expect)
			r.strList("require", &w.Response.Require)
			r.tree("payload", &w.Response.Payload)
			r.end()
		}
	}
	if ov, ok := o.take("outcomes"); ok {
		list, isList := ov.([]any)
		if !isList {
			d.fail("write.outcomes", "must be a list of rules")
		}
		for i, it := range list {
			r := d.object(it, "write.outcomes["+strconv.Itoa(i)+"]")
			if r == nil {
				w.Outcomes = append(w.Outcomes, OutcomeRule{})
				continue
			}
			var rule OutcomeRule
			r.intList("status", &rule.Status)
			r.strMap("match", &rule.Match)
			r.strMap("unless", &rule.Unless)
			r.strList("non_empty", &rule.NonEmpty)
			r.strMap("headers", &rule.Headers)
			r.strList("has_headers", &rule.HasHeaders)
			r.str("text", &rule.Text)
			r.str("outcome", &rule.Outcome)
			r.str("code", &rule.Code)
			r.str("message", &rule.Message)
			r.end()
			w.Outcomes = append(w.Outcomes, rule)
		}
	}
	o.str("error_code", &w.ErrorCode)
	if sv, ok := o.take("status"); ok {
		if s := d.object(sv, "write.status"); s != nil {
			w.Status = &StatusPolicyConfig{}
			s.intList("definite_4xx", &w.Status.Definite4xx)
			s.intList("retryable_4xx", &w.Status.Retryable4xx)
			s.intList("unknown", &w.Status.Unknown)
			s.end()
		}
	}
	o.end()
	return w
}

func (d *decoder) payload(v any) *PayloadConfig {
	o := d.object(v, "payload")
	if o == nil {
		return nil
	}
	p := &PayloadConfig{}
	if fv, ok := o.take("fields"); ok {
		p.Fields = d.fields(fv, "payload.fields")
	}
	o.strList("near_match", &p.NearMatch)
	o.strList("normalize", &p.Normalize)
	o.end()
	return p
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
	o.str("type", &fc.Type)
	o.boolean("required", &fc.Required)
	o.boolean("non_empty", &fc.NonEmpty)
	o.boolean("omit_empty", &fc.OmitEmpty)
	o.str("pattern", &fc.Pattern)
	fc.MinLength = o.optInt("min_length")
	fc.MaxLength = o.optInt("max_length")
	fc.Minimum = o.optFloat("minimum")
	fc.Maximum = o.optFloat("maximum")
	o.strList("enum", &fc.Enum)
	o.tree("default", &fc.Default)
	if iv, ok := o.take("items"); ok {
		it := d.field(iv, field+".items")
		fc.Items = &it
	}
	if fv, ok := o.take("fields"); ok {
		fc.Fields = d.fields(fv, field+".fields")
	}
	o.end()
	return fc
}

func (d *decoder) recordFields(v any, field string) *RecordFields {
	o := d.object(v, field)
	if o == nil {
		return nil
	}
	r := &RecordFields{}
	o.str("external_id", &r.ExternalID)
	o.str("live_url", &r.LiveURL)
	o.str("author_id", &r.AuthorID)
	o.str("parent_id", &r.ParentID)
	if v, ok := o.take("visibility"); ok {
		if str, isStr := v.(string); isStr {
			r.Visibility = str
		} else if m := d.object(v, field+".visibility"); m != nil {
			m.str("from", &r.Visibility)
			m.strMap("map", &r.VisibilityMap)
			m.boolean("probe", &r.VisibilityProbe)
			m.end()
		}
	}
	o.str("created_at", &r.CreatedAt)
	o.tree("payload", &r.Payload)
	o.end()
	return r
}

func (d *decoder) search(v any) *SearchConfig {
	o := d.object(v, "search")
	if o == nil {
		return nil
	}
	s := &SearchConfig{}
	o.str("url", &s.URL)
	o.str("tool", &s.Tool)
	o.tree("arguments", &s.Arguments)
	o.str("items", &s.Items)
	o.str("next_cursor", &s.NextCursor)
	o.boolean("next_link", &s.NextLink)
	o.integer("page_size", &s.PageSize)
	s.FirstPage = o.optInt("first_page")
	o.str("total", &s.Total)
	o.str("end", &s.End)
	o.integer("max_pages", &s.MaxPages)
	o.str("window_filter", &s.WindowFilter)
	if fv, ok := o.take("fields"); ok {
		if r := d.recordFields(fv, "search.fields"); r != nil {
			s.Fields = *r
		}
	}
	o.boolean("omits_body", &s.OmitsBody)
	o.end()
	return s
}

func (d *decoder) readback(v any) *ReadbackConfig {
	o := d.object(v, "readback")
	if o == nil {
		return nil
	}
	r := &ReadbackConfig{}
	o.str("url", &r.URL)
	o.str("tool", &r.Tool)
	o.tree("arguments", &r.Arguments)
	o.str("item", &r.Item)
	if fv, ok := o.take("fields"); ok {
		r.Fields = d.recordFields(fv, "readback.fields")
	}
	o.strMap("expect", &r.Expect)
	o.strList("require", &r.Require)
	o.strList("checks", &r.Checks)
	o.end()
	return r
}

func (d *decoder) status(v any) *StatusConfig {
	o := d.object(v, "status")
	if o == nil {
		return nil
	}
	s := &StatusConfig{}
	o.str("url", &s.URL)
	o.str("tool", &s.Tool)
	o.tree("arguments", &s.Arguments)
	o.str("item", &s.Item)
	o.str("state", &s.State)
	o.strMap("map", &s.Map)
	o.str("external_id", &s.ExternalID)
	o.str("live_url", &s.LiveURL)
	o.str("version", &s.Version)
	o.str("applied_version", &s.AppliedVersion)
	o.str("code", &s.Code)
	o.str("partial_effects", &s.PartialEffects)
	o.str("received_at", &s.ReceivedAt)
	o.tree("payload", &s.Payload)
	o.strMap("expect", &s.Expect)
	o.strList("require", &s.Require)
	o.str("account", &s.Account)
	o.boolean("credential_scoped", &s.CredentialScoped)
	o.end()
	return s
}

func (d *decoder) mcp(v any) *MCPConfig {
	o := d.object(v, "mcp")
	if o == nil {
		return nil
	}
	m := &MCPConfig{}
	o.str("command", &m.Command)
	o.strList("args", &m.Args)
	o.strMap("env", &m.Env)
	o.str("url", &m.URL)
	if hv, ok := o.take("headers"); ok {
		m.Headers = d.headers(hv, "mcp.headers")
	}
	o.integer("max_result", &m.MaxResult)
	o.strList("reads", &m.Reads)
	o.strList("unprotected", &m.Unprotected)
	o.end()
	return m
}

// headers decodes a mapping of header names to string values.
func (d *decoder) headers(v any, field string) []Header {
	m := d.object(v, field)
	if m == nil {
		return nil
	}
	var out []Header
	for i, k := range m.m.keys {
		s, isStr := m.m.vals[i].(string)
		if !isStr {
			d.fail(fieldPath(field, k), "must be a string, not "+typeName(m.m.vals[i]))
			continue
		}
		out = append(out, Header{Name: k, Value: s})
	}
	return out
}
