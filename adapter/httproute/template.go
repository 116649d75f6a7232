package httproute

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
)

// --- JSON paths ---

// MaxPathLen bounds a JSON path's text; maxPathSegs its segments.
const (
	MaxPathLen  = 256
	maxPathSegs = 32
	maxIndex    = 1 << 20
)

type pathSeg struct {
	key     string
	index   int
	isIndex bool
}

// jpath is a compiled JSON path: $ then .name, [n] or ["name"] segments.
type jpath struct {
	src  string
	segs []pathSeg
}

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// parsePath compiles s, which must start with "$".
func parsePath(s string) (jpath, error) {
	p := jpath{src: s}
	if len(s) > MaxPathLen {
		return p, errors.Errorf("JSON path is longer than %d bytes", MaxPathLen)
	}
	if !strings.HasPrefix(s, "$") {
		return p, errors.New(`a JSON path starts with "$"`)
	}
	i := 1
	for i < len(s) {
		if len(p.segs) == maxPathSegs {
			return p, errors.Errorf("JSON path %q has more than %d segments", s, maxPathSegs)
		}
		switch s[i] {
		case '.':
			j := i + 1
			for j < len(s) && isNameByte(s[j]) {
				j++
			}
			if j == i+1 {
				return p, errors.Errorf("JSON path %q: a name must follow the \".\" at offset %d (letters, digits, _ and -; quote others as [\"name\"])", s, i)
			}
			p.segs = append(p.segs, pathSeg{key: s[i+1 : j]})
			i = j
		case '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return p, errors.Errorf("JSON path %q: \"[\" at offset %d is not closed", s, i)
			}
			inner := s[i+1 : i+j]
			switch {
			case len(inner) >= 2 && (inner[0] == '"' || inner[0] == '\'') && inner[len(inner)-1] == inner[0]:
				key := inner[1 : len(inner)-1]
				if strings.IndexByte(key, inner[0]) >= 0 {
					return p, errors.Errorf("JSON path %q: a quoted name cannot contain its quote", s)
				}
				p.segs = append(p.segs, pathSeg{key: key})
			default:
				n, err := strconv.Atoi(inner)
				digits := inner != "" && strings.Trim(inner, "0123456789") == "" && (len(inner) == 1 || inner[0] != '0')
				if !digits || err != nil || n > maxIndex {
					return p, errors.Errorf("JSON path %q: [%s] is not an array index (0, 1, ...) or a quoted name", s, inner)
				}
				p.segs = append(p.segs, pathSeg{index: n, isIndex: true})
			}
			i += j + 1
		default:
			return p, errors.Errorf("JSON path %q: unexpected %q at offset %d (want . or [)", s, s[i], i)
		}
	}
	return p, nil
}

// eval reads the path in a document decoded with UseNumber. ok is false
// when a segment is missing; a JSON null is returned as (nil, true).
func (p jpath) eval(doc any) (any, bool) {
	v := doc
	for _, s := range p.segs {
		if s.isIndex {
			a, ok := v.([]any)
			if !ok || s.index >= len(a) {
				return nil, false
			}
			v = a[s.index]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[s.key]; !ok {
			return nil, false
		}
	}
	return v, true
}

// set replaces the value at the path (which must exist) in a document
// decoded by decodeJSON; the root itself cannot be replaced.
func (p jpath) set(doc any, v any) bool {
	if len(p.segs) == 0 {
		return false
	}
	parent, ok := jpath{segs: p.segs[:len(p.segs)-1]}.eval(doc)
	if !ok {
		return false
	}
	last := p.segs[len(p.segs)-1]
	switch x := parent.(type) {
	case map[string]any:
		if _, ok := x[last.key]; ok && !last.isIndex {
			x[last.key] = v
			return true
		}
	case []any:
		if last.isIndex && last.index < len(x) {
			x[last.index] = v
			return true
		}
	}
	return false
}

// decodeJSON decodes b keeping numbers exact.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

// --- values ---

// isEmpty: absent, null, "", [] and {} are empty (0 and false are not).
func isEmpty(v any, ok bool) bool {
	if !ok || v == nil {
		return true
	}
	switch x := v.(type) {
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// text renders a JSON value as text: strings as they are, numbers in their
// JSON form, objects and arrays as compact JSON, null as "".
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// --- templates ---

// Variables a template may name. Which are available depends on where the
// template is (see tctx).
const (
	varBase           = "base"
	varAccount        = "account"
	varRequestID      = "request_id"
	varIntentID       = "intent_id"
	varAttemptID      = "attempt_id"
	varIdempotencyKey = "idempotency_key"
	varParent         = "parent"
	varFrom           = "from"
	varTo             = "to"
	varCursor         = "cursor"
	varPage           = "page"
	varPageSize       = "page_size"
	varOffset         = "offset"
	varExternalID     = "external_id"
	varMarker         = "marker"
	varPayload        = "payload"
	varDoc            = "$"
)

// requestVars must not be empty where a write sends them (URL path, body):
// an empty one is a bug of the caller, refused before sending.
var requestVars = map[string]bool{varAccount: true, varRequestID: true, varIntentID: true, varAttemptID: true, varIdempotencyKey: true, varMarker: true}

// Filters.
const (
	fOmitEmpty   = "omitempty"
	fBefore      = "before"
	fLastSegment = "last_segment"
	fTrimPrefix  = "trim_prefix"
	fRegex       = "regex"
	fLower       = "lower"
	fRFC3339     = "rfc3339"
	fUnix        = "unix"
	fUnixMS      = "unix_ms"
	fSlackPlain  = "slack_plain"
	fNumber      = "number"
)

const knownFilters = "omitempty, before:<text>, last_segment, trim_prefix:<text>, regex:<RE with one group>, lower, slack_plain, number, rfc3339, unix, unix_ms"

// slackPlain undoes Slack's rewriting of a posted text: the links and
// entities normalisations on one value.
func slackPlain(s string) string { return unescapeEntities(unwrapLinks(s)) }

// textFilter transforms the text of a value; a regex that does not match
// makes the value absent.
type textFilter struct {
	kind string
	arg  string
	re   *regexp.Regexp
}

func (f textFilter) apply(s string) (string, bool) {
	switch f.kind {
	case fBefore:
		if i := strings.Index(s, f.arg); i >= 0 {
			s = s[:i]
		}
	case fLastSegment:
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			s = s[:i]
		}
		s = strings.TrimRight(s, "/")
		if i := strings.LastIndexByte(s, '/'); i >= 0 {
			s = s[i+1:]
		}
	case fTrimPrefix:
		s = strings.TrimPrefix(s, f.arg)
	case fLower:
		s = strings.ToLower(s)
	case fSlackPlain:
		s = slackPlain(s)
	case fRegex:
		m := f.re.FindStringSubmatch(s)
		if m == nil {
			return "", false
		}
		s = m[1]
	case fNumber:
		if !numberRE.MatchString(s) {
			return "", false
		}
	}
	return s, true
}

// numberRE is a JSON number (the number filter's text).
var numberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

type expr struct {
	src       string
	name      string
	path      jpath // payload and $: the path below it ($ alone: the whole value)
	omitEmpty bool
	timeFmt   string // from and to: rfc3339, unix or unix_ms ("": RFC 3339 with nanoseconds)
	filters   []textFilter
}
type part struct {
	lit string
	e   *expr
}

// template is text with {{expr}} parts.
type template struct {
	src   string
	parts []part
}

// whole returns the expression of a template that is exactly one {{...}}.
func (t *template) whole() *expr {
	if len(t.parts) == 1 && t.parts[0].e != nil {
		return t.parts[0].e
	}
	return nil
}

func (t *template) constant() bool {
	for _, p := range t.parts {
		if p.e != nil {
			return false
		}
	}
	return true
}

func (t *template) uses(name string) bool {
	if t == nil {
		return false
	}
	for _, p := range t.parts {
		if p.e != nil && p.e.name == name {
			return true
		}
	}
	return false
}

// tctx says which variables and filters a template may use.
type tctx struct {
	vars          []string        // simple variables allowed here
	payload       bool            // {{payload}} and {{payload.<path>}}
	doc           string          // what $ reads here ("" = no document)
	payloadFields map[string]bool // declared payload fields (nil: any)
	omitEmpty     bool            // the omitempty filter is allowed
	used          map[string]bool // if set, every variable a template uses is added
}

func (c tctx) known() string {
	k := slices.Clone(c.vars)
	if c.payload {
		k = append(k, "payload", "payload.<field>")
	}
	if c.doc != "" {
		k = append(k, "$.<path> ("+c.doc+")")
	}
	if len(k) == 0 {
		return "none"
	}
	return strings.Join(k, ", ")
}

// parseTemplate compiles s. A string that is a bare JSON path ("$.id",
// "$[0]", and "$" where a document is read) is shorthand for {{$.id}}.
func parseTemplate(s string, c tctx) (*template, error) {
	t := &template{src: s}
	if (s == "$" && c.doc != "") || strings.HasPrefix(s, "$.") || strings.HasPrefix(s, "$[") {
		e, err := parseExpr(s, c)
		if err != nil {
			return nil, err
		}
		t.parts = []part{{e: e}}
		return t, nil
	}
	rest := s
	for rest != "" {
		open := strings.Index(rest, "{{")
		lit := rest
		if open >= 0 {
			lit = rest[:open]
		}
		if strings.Contains(lit, "}}") {
			return nil, errors.New(`unbalanced braces: "}}" without "{{"`)
		}
		if lit != "" {
			t.parts = append(t.parts, part{lit: lit})
		}
		if open < 0 {
			break
		}
		closeAt := strings.Index(rest[open+2:], "}}")
		if closeAt < 0 {
			return nil, errors.New(`unbalanced braces: "{{" without "}}"`)
		}
		inner := rest[open+2 : open+2+closeAt]
		if strings.Contains(inner, "{{") {
			return nil, errors.New(`unbalanced braces: "{{" inside "{{...}}"`)
		}
		e, err := parseExpr(inner, c)
		if err != nil {
			return nil, err
		}
		t.parts = append(t.parts, part{e: e})
		rest = rest[open+2+closeAt+2:]
	}
	return t, nil
}

// splitFilters splits "name | f1 | f2:arg" at the "|" outside single
// quotes; a quoted argument ('a|b') may hold "|".
func splitFilters(inner string) ([]string, error) {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(inner); i++ {
		switch inner[i] {
		case '\'':
			quoted = !quoted
		case '|':
			if !quoted {
				out = append(out, inner[start:i])
				start = i + 1
			}
		}
	}
	if quoted {
		return nil, errors.New("a quoted filter argument is not closed (')")
	}
	return append(out, inner[start:]), nil
}

// filterArg returns the argument of "name:arg" (unquoted when quoted).
func filterArg(f, name string) (string, bool) {
	arg, ok := strings.CutPrefix(f, name+":")
	if !ok {
		return "", false
	}
	arg = strings.TrimSpace(arg)
	if len(arg) >= 2 && arg[0] == '\'' && arg[len(arg)-1] == '\'' {
		arg = arg[1 : len(arg)-1]
	}
	return arg, true
}

func isTimeVar(name string) bool { return name == varFrom || name == varTo }

func parseExpr(inner string, c tctx) (*expr, error) {
	fields, err := splitFilters(inner)
	if err != nil {
		return nil, errors.Errorf("{{%s}}: %w", strings.TrimSpace(inner), err)
	}
	name := strings.TrimSpace(fields[0])
	e := &expr{src: strings.TrimSpace(inner)}
	if err := e.parseName(name, c); err != nil {
		return nil, err
	}
	if c.used != nil {
		c.used[e.name] = true
	}
	for _, f := range fields[1:] {
		if err := e.parseFilter(strings.TrimSpace(f), c); err != nil {
			return nil, err
		}
	}
	if isTimeVar(e.name) && e.timeFmt != "" && len(e.filters) > 0 {
		return nil, errors.Errorf("{{%s}}: a time format is the last filter of from and to", e.src)
	}
	return e, nil
}

// parseName sets what the expression reads: a JSON path of the document,
// the payload, or a variable known in c.
func (e *expr) parseName(name string, c tctx) error {
	switch {
	case name == "":
		return errors.New("empty {{}}")
	case name == varDoc || strings.HasPrefix(name, "$.") || strings.HasPrefix(name, "$["):
		if c.doc == "" {
			return errors.Errorf("{{%s}}: a JSON path reads a response, and there is none here (known here: %s)", name, c.known())
		}
		p, err := parsePath(name)
		if err != nil {
			return err
		}
		e.name, e.path = varDoc, p
	case name == varPayload || strings.HasPrefix(name, "payload.") || strings.HasPrefix(name, "payload["):
		if !c.payload {
			return errors.Errorf("unknown variable {{%s}} here (known here: %s)", name, c.known())
		}
		p, err := parsePath("$" + strings.TrimPrefix(name, varPayload))
		if err != nil {
			return errors.Errorf("{{%s}}: %w", name, err)
		}
		if c.payloadFields != nil && len(p.segs) > 0 && (p.segs[0].isIndex || !c.payloadFields[p.segs[0].key]) {
			return errors.Errorf("{{%s}}: not a field of payload.fields", name)
		}
		e.name, e.path = varPayload, p
	default:
		if !slices.Contains(c.vars, name) {
			return errors.Errorf("unknown variable {{%s}} (known here: %s)", name, c.known())
		}
		e.name = name
	}
	return nil
}

// parseFilter adds one filter of the expression.
func (e *expr) parseFilter(f string, c tctx) error {
	if arg, ok := filterArg(f, fBefore); ok {
		if arg == "" {
			return errors.Errorf("{{%s}}: before: needs a separator (before:@)", e.src)
		}
		e.filters = append(e.filters, textFilter{kind: fBefore, arg: arg})
		return nil
	}
	if arg, ok := filterArg(f, fTrimPrefix); ok {
		if arg == "" {
			return errors.Errorf("{{%s}}: trim_prefix: needs a prefix (trim_prefix:'https://')", e.src)
		}
		e.filters = append(e.filters, textFilter{kind: fTrimPrefix, arg: arg})
		return nil
	}
	if arg, ok := filterArg(f, fRegex); ok {
		re, err := regexp.Compile(arg)
		switch {
		case arg == "":
			return errors.Errorf("{{%s}}: regex: needs an expression with one group (regex:'#([0-9]+)$')", e.src)
		case err != nil:
			return errors.Errorf("{{%s}}: regex: is not a valid regular expression (RE2 syntax)", e.src)
		case re.NumSubexp() != 1:
			return errors.Errorf("{{%s}}: regex: must have exactly one capturing group, the value taken; it has %d", e.src, re.NumSubexp())
		}
		e.filters = append(e.filters, textFilter{kind: fRegex, arg: arg, re: re})
		return nil
	}
	switch f {
	case fNumber:
		e.filters = append(e.filters, textFilter{kind: fNumber})
	case fOmitEmpty:
		if !c.omitEmpty {
			return errors.Errorf("{{%s}}: the omitempty filter only applies to write.body values", e.src)
		}
		e.omitEmpty = true
	case fRFC3339, fUnix, fUnixMS:
		if !isTimeVar(e.name) {
			return errors.Errorf("{{%s}}: the %s filter formats a time, and only from and to are times", e.src, f)
		}
		if e.timeFmt != "" {
			return errors.Errorf("{{%s}}: one time format only", e.src)
		}
		e.timeFmt = f
	case fLastSegment, fLower, fSlackPlain:
		e.filters = append(e.filters, textFilter{kind: f})
	default:
		return errors.Errorf("{{%s}}: unknown filter %q (known: %s)", e.src, f, knownFilters)
	}
	return nil
}

// scope holds the values of one call.
type scope struct {
	vars    map[string]string
	times   map[string]time.Time
	payload any
	hasPay  bool
	doc     any
	hasDoc  bool
	header  http.Header // the response's headers, where outcomes read them
	text    string      // an MCP tool result's text, where outcomes read it
}

// formatTime renders a window bound. Formats coarser than the time are
// widened outwards: from is rounded down and to up, so the window asked
// for always covers the window meant.
func formatTime(t time.Time, name, format string) any {
	t = t.UTC()
	unit := time.Duration(0)
	switch format {
	case fRFC3339, fUnix:
		unit = time.Second
	case fUnixMS:
		unit = time.Millisecond
	}
	if unit > 0 {
		r := t.Truncate(unit)
		if name == varTo && !r.Equal(t) {
			r = r.Add(unit)
		}
		t = r
	}
	switch format {
	case fRFC3339:
		return t.Format(time.RFC3339)
	case fUnix:
		return json.Number(strconv.FormatInt(t.Unix(), 10))
	case fUnixMS:
		return json.Number(strconv.FormatInt(t.UnixMilli(), 10))
	}
	return t.Format(time.RFC3339Nano)
}

// value evaluates e to a JSON value (decoded with UseNumber). ok is false
// when it is absent (a missing path, a zero from/to, a regex that does
// not match).
func (s *scope) value(e *expr) (any, bool) {
	var v any
	var ok bool
	switch e.name {
	case varPayload:
		if !s.hasPay {
			return nil, false
		}
		v, ok = e.path.eval(s.payload)
	case varDoc:
		if !s.hasDoc {
			return nil, false
		}
		v, ok = e.path.eval(s.doc)
	case varFrom, varTo:
		t := s.times[e.name]
		if t.IsZero() {
			return nil, false
		}
		v, ok = formatTime(t, e.name, e.timeFmt), true
	default:
		v, ok = s.vars[e.name], true
	}
	if ok && len(e.filters) > 0 {
		if v == nil {
			return nil, true
		}
		str := text(v)
		for _, f := range e.filters {
			if str, ok = f.apply(str); !ok {
				return nil, false
			}
		}
		v = str
		if e.filters[len(e.filters)-1].kind == fNumber {
			v = json.Number(str) // a JSON number, where a tool's argument is one
		}
	}
	return v, ok
}

// errEmptyVar reports a request variable a write needs that is empty.
type errEmptyVar struct{ name string }

func (e *errEmptyVar) Error() string { return "the request has no " + e.name + "; the route needs it" }

// render renders t as text. ok is false when a part is absent (a missing
// JSON path, a null): the whole text is then absent. With strict, an
// empty request variable is an *errEmptyVar.
func (t *template) render(s *scope, escape func(string) string, strict bool) (string, bool, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.e == nil {
			b.WriteString(p.lit)
			continue
		}
		v, ok := s.value(p.e)
		if !ok || v == nil {
			return "", false, nil
		}
		str := text(v)
		if strict && str == "" && requestVars[p.e.name] {
			return "", false, &errEmptyVar{p.e.name}
		}
		if escape != nil && p.e.name != varBase {
			str = escape(str)
		}
		b.WriteString(str)
	}
	return b.String(), true, nil
}

// --- URL templates ---

type queryPiece struct {
	t         *template
	droppable bool // name={{x}}: left out when x renders empty
}

// urlTemplate is a URL template: values are path-escaped before the first
// "?" and query-escaped after it; a query parameter whose value is one
// template rendering empty is left out.
//
// On an MCP route it is a tool call instead: tool, and args rendered as
// the call's arguments; its path is empty.
type urlTemplate struct {
	src   string
	path  *template
	query []queryPiece
	tool  string
	args  *vnode
}

// splitOutside splits s at sep outside {{...}}.
func splitOutside(s string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "{{"):
			depth++
			i++
		case strings.HasPrefix(s[i:], "}}") && depth > 0:
			depth--
			i++
		case s[i] == sep && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// parseURLTemplate compiles a URL template. With needBase it must start
// with {{base}} followed by "/", "?" or nothing: requests carry the
// route's credentials, which go to base_url's origin only.
func parseURLTemplate(s string, c tctx, needBase bool) (*urlTemplate, error) {
	u := &urlTemplate{src: s}
	pieces := splitOutside(s, '?')
	pathSrc := pieces[0]
	p, err := parseTemplate(pathSrc, c)
	if err != nil {
		return nil, err
	}
	u.path = p
	if needBase {
		ok := len(p.parts) > 0 && p.parts[0].e != nil && p.parts[0].e.name == varBase
		if ok && len(p.parts) > 1 {
			ok = p.parts[1].e == nil && strings.HasPrefix(p.parts[1].lit, "/")
		}
		if !ok {
			return nil, errors.New(`must start with "{{base}}/" (credentials are sent to base_url's origin only)`)
		}
	}
	if len(pieces) > 1 {
		query := strings.Join(pieces[1:], "?")
		for _, q := range splitOutside(query, '&') {
			if q == "" {
				continue
			}
			qt, err := parseTemplate(q, c)
			if err != nil {
				return nil, err
			}
			qp := queryPiece{t: qt}
			if len(qt.parts) == 2 && qt.parts[0].e == nil && qt.parts[1].e != nil && strings.HasSuffix(qt.parts[0].lit, "=") {
				qp.droppable = true
			}
			u.query = append(u.query, qp)
		}
	}
	ts := []*template{u.path}
	for _, q := range u.query {
		ts = append(ts, q.t)
	}
	for _, t := range ts {
		for _, p := range t.parts {
			if p.e == nil && strings.ContainsAny(p.lit, "# \t\r\n") {
				return nil, errors.New("must not contain a fragment (#) or white space outside {{...}}")
			}
		}
	}
	return u, nil
}

func (u *urlTemplate) uses(name string) bool {
	if u.path.uses(name) || u.args.uses(name) {
		return true
	}
	for _, q := range u.query {
		if q.t.uses(name) {
			return true
		}
	}
	return false
}

func (u *urlTemplate) render(s *scope, strict bool) (string, bool, error) {
	path, ok, err := u.path.render(s, url.PathEscape, strict)
	if err != nil || !ok {
		return "", ok, err
	}
	var qs []string
	for _, q := range u.query {
		// A write never drops a request variable: empty, it is refused.
		if e := q.t.parts[len(q.t.parts)-1].e; q.droppable && !(strict && requestVars[e.name]) {
			if v, ok := s.value(e); isEmpty(v, ok) {
				continue
			}
		}
		str, ok, err := q.t.render(s, url.QueryEscape, strict)
		if err != nil {
			return "", false, err
		}
		if !ok {
			continue
		}
		qs = append(qs, str)
	}
	if len(qs) > 0 {
		path += "?" + strings.Join(qs, "&")
	}
	return path, true, nil
}

// --- value trees (bodies and field mappings) ---

type vkind int

const (
	vLit vkind = iota
	vTmpl
	vObj
	vArr
)

// vnode is a compiled value template: a literal, a template string, an
// object or an array of them. A template string that is exactly one
// {{...}} yields the value with its JSON type; otherwise a string.
type vnode struct {
	kind vkind
	lit  any
	t    *template
	keys []string // an object's, one per kid
	kids []*vnode // an object's values or an array's items
}

// compileTree compiles a decoded YAML tree (map[string]any, []any, string,
// numbers, bools, nil). report receives a dotted field and a reason for
// each problem; it returns nil when something was reported.
func compileTree(v any, field string, c tctx, report func(field, reason string)) *vnode {
	switch x := v.(type) {
	case map[string]any:
		n := &vnode{kind: vObj}
		keys := slices.Sorted(maps.Keys(x))
		bad := false
		for _, k := range keys {
			child := compileTree(x[k], fieldPath(field, k), c, report)
			if child == nil {
				bad = true
				continue
			}
			n.keys = append(n.keys, k)
			n.kids = append(n.kids, child)
		}
		if bad {
			return nil
		}
		return n
	case []any:
		n := &vnode{kind: vArr}
		bad := false
		for i, it := range x {
			child := compileTree(it, field+"["+strconv.Itoa(i)+"]", c, report)
			if child == nil {
				bad = true
				continue
			}
			n.kids = append(n.kids, child)
		}
		if bad {
			return nil
		}
		return n
	case string:
		t, err := parseTemplate(x, c)
		if err != nil {
			report(field, err.Error())
			return nil
		}
		if t.constant() {
			return &vnode{kind: vLit, lit: x}
		}
		return &vnode{kind: vTmpl, t: t}
	case nil, bool:
		return &vnode{kind: vLit, lit: x}
	case json.Number:
		return &vnode{kind: vLit, lit: x}
	case int64:
		return &vnode{kind: vLit, lit: json.Number(strconv.FormatInt(x, 10))}
	case uint64:
		return &vnode{kind: vLit, lit: json.Number(strconv.FormatUint(x, 10))}
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			report(field, "must be a finite number")
			return nil
		}
		return &vnode{kind: vLit, lit: json.Number(strconv.FormatFloat(x, 'g', -1, 64))}
	}
	report(field, fmt.Sprintf("a %T cannot be a JSON value", v))
	return nil
}

// eval evaluates the tree. present is false for an absent value (left
// out of its object; null in an array).
func (n *vnode) eval(s *scope, strict bool) (any, bool, error) {
	switch n.kind {
	case vLit:
		return n.lit, true, nil
	case vTmpl:
		if e := n.t.whole(); e != nil {
			v, ok := s.value(e)
			if e.omitEmpty && isEmpty(v, ok) {
				return nil, false, nil
			}
			if !ok {
				return nil, false, nil
			}
			if strict && requestVars[e.name] && text(v) == "" {
				return nil, false, &errEmptyVar{e.name}
			}
			return v, true, nil
		}
		str, ok, err := n.t.render(s, nil, strict)
		return str, ok, err
	case vObj:
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			v, ok, err := n.kids[i].eval(s, strict)
			if err != nil {
				return nil, false, err
			}
			if ok {
				m[k] = v
			}
		}
		return m, true, nil
	case vArr:
		a := make([]any, 0, len(n.kids))
		for _, it := range n.kids {
			v, ok, err := it.eval(s, strict)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				v = nil
			}
			a = append(a, v)
		}
		return a, true, nil
	}
	return nil, false, nil
}

// uses reports whether a template of the tree uses the variable.
func (n *vnode) uses(name string) bool {
	if n == nil {
		return false
	}
	switch n.kind {
	case vTmpl:
		return n.t.uses(name)
	case vObj, vArr:
		for _, v := range n.kids {
			if v.uses(name) {
				return true
			}
		}
	}
	return false
}

// fieldPath renders parent.key, or parent["key"] when key is not a plain
// name; long keys are cut.
func fieldPath(parent, key string) string {
	plain := key != ""
	for i := 0; i < len(key); i++ {
		if !isNameByte(key[i]) {
			plain = false
			break
		}
	}
	if len(key) > 64 {
		key = strings.ToValidUTF8(key[:64], "") + "..."
		plain = false
	}
	switch {
	case parent == "" && plain:
		return key
	case plain:
		return parent + "." + key
	}
	return parent + "[" + strconv.Quote(key) + "]"
}
