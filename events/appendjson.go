package events

import (
	"bytes"
	"strconv"
	"time"
)

// Bodies written without encoding/json.
//
// Every Execute encodes an IntentStarted (an IntentRecorded and a
// WriteStarted in one) and a WriteSucceeded (or another outcome); json.Marshal of their bodies, by
// reflection, and its compaction of the payload with its scanner were most
// of Encode's CPU. The hot body types therefore append their JSON by hand
// (jsonAppender), byte for byte what json.Marshal writes for them: the
// members in field order, omitempty and omitzero as their tags say,
// strings as encoding/json escapes them (appendJSONString), times as
// time.Time.MarshalJSON writes them, Durations as Duration.MarshalJSON,
// and the payload as encoding/json writes a json.RawMessage (compacted,
// HTML characters and U+2028/U+2029 escaped). Where a body holds anything
// the appender is not sure of (a time outside RFC 3339, a payload that is
// not valid JSON or nests too deep, a nil body) it gives up and
// MarshalJSON asks json.Marshal, which decides the output and the error.
//
// Tests are what guarantee the agreement, checking it against
// encoding/json itself: TestAppendJSONMatchesEncodingJSON fills every field
// of every hand-written body with hostile values (so a field added to a
// struct but not to its appender fails it), TestAppendPayloadMatchesEncodingJSON
// and FuzzAppendPayloadMatchesEncodingJSON take any payload bytes,
// FuzzAppendJSONMatchesEncodingJSON any strings, ints and times.

// jsonAppender is a body that can append its own JSON: exactly what
// json.Marshal writes for it. ok false: the appender is not sure (b may
// then hold a partial write past its original length, to be discarded);
// the caller uses json.Marshal instead.
type jsonAppender interface {
	appendJSON(b []byte) (out []byte, ok bool)
	// jsonSizeHint estimates the length of the body's JSON, to size the
	// buffer once.
	jsonSizeHint() int
}

var (
	_ jsonAppender = (*IntentRecordedData)(nil)
	_ jsonAppender = (*WriteStartedData)(nil)
	_ jsonAppender = (*IntentStartedData)(nil)
	_ jsonAppender = (*WriteSucceededData)(nil)
	_ jsonAppender = (*WriteConfirmedData)(nil)
	_ jsonAppender = (*WriteRejectedData)(nil)
	_ jsonAppender = (*OutcomeUnknownData)(nil)
)

// appendJSONTime appends t as time.Time.MarshalJSON writes it (RFC 3339
// with nanoseconds, quoted); false where MarshalJSON errs (a year outside
// 0..9999, a zone offset of 24 hours or more).
func appendJSONTime(b []byte, t time.Time) ([]byte, bool) {
	n := len(b)
	out, err := t.AppendText(append(b, '"'))
	if err != nil {
		return b[:n], false
	}
	return append(out, '"'), true
}

// appendJSONDuration appends d as Duration.MarshalJSON writes it.
func appendJSONDuration(b []byte, d Duration) []byte {
	return appendJSONString(b, time.Duration(d).String())
}

func appendJSONBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// appendJSONStrings appends a []string as encoding/json writes a non-nil
// one (callers handle nil and omitempty).
func appendJSONStrings(b []byte, s []string) []byte {
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, v)
	}
	return append(b, ']')
}

// appendJSONRaw appends a json.RawMessage as encoding/json writes it: null
// for nil, else compacted and HTML-escaped (appendCompactJSON).
func appendJSONRaw(b []byte, m []byte) ([]byte, bool) {
	if m == nil {
		return append(b, "null"...), true
	}
	return appendCompactJSON(b, m)
}

// maxCompactDepth bounds the nesting appendCompactJSON takes (canon/v1
// allows 64); deeper documents are left to encoding/json.
const maxCompactDepth = 256

// htmlSafeStringByte[c]: byte c is copied as is inside a JSON string that
// encoding/json compacts with HTML escaping: not a control byte, a quote,
// a backslash, <, > or &, nor 0xE2 (which may begin U+2028 or U+2029).
// Other bytes of 0x80 and up are copied unchecked, as encoding/json does.
var htmlSafeStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' && c != 0xE2
	}
	return t
}()

// appendCompactJSON appends src as encoding/json writes a json.RawMessage
// (or any Marshaler's output) in json.Marshal: src must be one valid JSON
// value, optionally surrounded by white space; white space outside strings
// is dropped and <, >, &, U+2028 and U+2029 are escaped as \u003c, \u003e,
// \u0026, \u2028 and \u2029. It reads src once. ok false: src is not
// valid JSON by encoding/json's scanner, or nests deeper than
// maxCompactDepth; json.Marshal then decides (it errs on the former).
// Canonical payloads (canon/v1) have no white space and rarely an HTML
// character: the output is then src itself.
func appendCompactJSON(dst, src []byte) ([]byte, bool) {
	const (
		stValue = iota // a value is expected
		stAfter        // a value has been read
		stKey          // an object member's key is expected
	)
	var object [maxCompactDepth]bool // per open container: an object, not an array
	depth, state, i, n := 0, stValue, 0, len(src)
	var ok bool
	for {
		for i < n && isJSONSpace(src[i]) {
			i++
		}
		switch state {
		case stValue:
			if i >= n {
				return dst, false
			}
			c := src[i]
			switch {
			case c == '{' || c == '[':
				if depth == maxCompactDepth {
					return dst, false
				}
				dst = append(dst, c)
				i++
				for i < n && isJSONSpace(src[i]) {
					i++
				}
				if i < n && src[i] == c+2 { // '}' or ']'
					dst = append(dst, c+2)
					i++
					state = stAfter
					continue
				}
				object[depth] = c == '{'
				depth++
				if c == '{' {
					state = stKey
				}
				continue
			case c == '"':
				if dst, i, ok = appendCompactString(dst, src, i); !ok {
					return dst, false
				}
			case c == 't':
				if dst, i, ok = appendLiteral(dst, src, i, "true"); !ok {
					return dst, false
				}
			case c == 'f':
				if dst, i, ok = appendLiteral(dst, src, i, "false"); !ok {
					return dst, false
				}
			case c == 'n':
				if dst, i, ok = appendLiteral(dst, src, i, "null"); !ok {
					return dst, false
				}
			case c == '-' || ('0' <= c && c <= '9'):
				j, ok := scanJSONNumber(src, i)
				if !ok {
					return dst, false
				}
				dst = append(dst, src[i:j]...)
				i = j
			default:
				return dst, false
			}
			state = stAfter
		case stAfter:
			if depth == 0 {
				return dst, i == n
			}
			if i >= n {
				return dst, false
			}
			c := src[i]
			i++
			switch {
			case c == ',':
				dst = append(dst, ',')
				state = stValue
				if object[depth-1] {
					state = stKey
				}
			case (c == '}' && object[depth-1]) || (c == ']' && !object[depth-1]):
				dst = append(dst, c)
				depth--
			default:
				return dst, false
			}
		case stKey:
			if i >= n || src[i] != '"' {
				return dst, false
			}
			if dst, i, ok = appendCompactString(dst, src, i); !ok {
				return dst, false
			}
			for i < n && isJSONSpace(src[i]) {
				i++
			}
			if i >= n || src[i] != ':' {
				return dst, false
			}
			dst = append(dst, ':')
			i++
			state = stValue
		}
	}
}

// isJSONSpace is encoding/json's white space.
func isJSONSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// appendCompactString appends the JSON string starting at src[i] (its
// opening quote) with the escapes appendCompactJSON adds, and returns the
// index after its closing quote; false on an invalid string (a control
// byte, a bad escape, no closing quote). Escapes already in src are kept
// as they are, invalid UTF-8 is copied: encoding/json's compaction does
// the same.
func appendCompactString(dst, src []byte, i int) ([]byte, int, bool) {
	const hex = "0123456789abcdef"
	start := i
	n := len(src)
	for j := i + 1; j < n; {
		c := src[j]
		if htmlSafeStringByte[c] {
			j++
			continue
		}
		switch {
		case c == '"':
			return append(dst, src[start:j+1]...), j + 1, true
		case c == '\\':
			if j+1 >= n {
				return dst, 0, false
			}
			switch src[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > n || !isHex(src[j+2]) || !isHex(src[j+3]) || !isHex(src[j+4]) || !isHex(src[j+5]) {
					return dst, 0, false
				}
				j += 6
			default:
				return dst, 0, false
			}
		case c < 0x20:
			return dst, 0, false
		case c == 0xE2:
			// U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
			if j+2 < n && src[j+1] == 0x80 && src[j+2]&^1 == 0xA8 {
				dst = append(dst, src[start:j]...)
				dst = append(dst, '\\', 'u', '2', '0', '2', hex[src[j+2]&0xF])
				j += 3
				start = j
				continue
			}
			j++
		default: // <, > or &
			dst = append(dst, src[start:j]...)
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			j++
			start = j
		}
	}
	return dst, 0, false
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// appendLiteral appends lit if src holds it at i.
func appendLiteral(dst, src []byte, i int, lit string) ([]byte, int, bool) {
	if !bytes.HasPrefix(src[i:], []byte(lit)) {
		return dst, 0, false
	}
	return append(dst, lit...), i + len(lit), true
}

// scanJSONNumber returns the end of the JSON number at src[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. What follows it is
// checked by the caller (a delimiter, white space or the end).
func scanJSONNumber(src []byte, i int) (int, bool) {
	n := len(src)
	digits := func(i int) int {
		for i < n && '0' <= src[i] && src[i] <= '9' {
			i++
		}
		return i
	}
	if src[i] == '-' {
		i++
	}
	switch {
	case i < n && src[i] == '0':
		i++
	case i < n && '1' <= src[i] && src[i] <= '9':
		i = digits(i + 1)
	default:
		return 0, false
	}
	if i < n && src[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < n && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < n && (src[i] == '+' || src[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

// --- the bodies; each follows its struct's fields and tags ---

func (p *Policy) appendJSON(b []byte) []byte {
	b = append(b, `{"first_write":`...)
	b = appendJSONString(b, p.FirstWrite)
	b = append(b, `,"retry":`...)
	b = appendJSONString(b, p.Retry)
	b = append(b, `,"retry_budget":`...)
	b = strconv.AppendInt(b, int64(p.RetryBudget), 10)
	b = append(b, `,"attempt_deadline":`...)
	b = appendJSONDuration(b, p.AttemptDeadline)
	b = append(b, `,"search_before":`...)
	b = appendJSONDuration(b, p.SearchBefore)
	b = append(b, `,"search_after":`...)
	b = appendJSONDuration(b, p.SearchAfter)
	if p.KeyRetention != 0 {
		b = append(b, `,"key_retention":`...)
		b = appendJSONDuration(b, p.KeyRetention)
	}
	if p.RetentionMargin != 0 {
		b = append(b, `,"retention_margin":`...)
		b = appendJSONDuration(b, p.RetentionMargin)
	}
	if p.TrustResponse {
		b = append(b, `,"trust_response":true`...)
	}
	if p.ClockSkew != 0 {
		b = append(b, `,"clock_skew":`...)
		b = appendJSONDuration(b, p.ClockSkew)
	}
	if p.ResendBudget != 0 {
		b = append(b, `,"resend_budget":`...)
		b = strconv.AppendInt(b, int64(p.ResendBudget), 10)
	}
	if p.ReadFailingAfter != 0 {
		b = append(b, `,"read_failing_after":`...)
		b = appendJSONDuration(b, p.ReadFailingAfter)
	}
	return append(b, '}')
}

func (c *Capabilities) appendJSON(b []byte) []byte {
	b = append(b, '{')
	n := len(b) // no comma before the first member written
	sep := func(b []byte) []byte {
		if len(b) > n {
			return append(b, ',')
		}
		return b
	}
	if c.IdempotencyKey {
		b = append(sep(b), `"idempotency_key":true`...)
	}
	if c.KeyRetention != 0 {
		b = append(sep(b), `"key_retention":`...)
		b = appendJSONDuration(b, c.KeyRetention)
	}
	if c.StatusQuery {
		b = append(sep(b), `"status_query":true`...)
	}
	if c.ReflectionDelay != 0 {
		b = append(sep(b), `"reflection_delay":`...)
		b = appendJSONDuration(b, c.ReflectionDelay)
	}
	if c.Search {
		b = append(sep(b), `"search":true`...)
	}
	if c.SearchAuthoritative {
		b = append(sep(b), `"search_authoritative":true`...)
	}
	if c.Correlation {
		b = append(sep(b), `"correlation":true`...)
	}
	if len(c.Checks) > 0 {
		b = append(sep(b), `"checks":`...)
		b = appendJSONStrings(b, c.Checks)
	}
	return append(b, '}')
}

func (c *Check) appendJSON(b []byte) []byte {
	b = append(b, `{"name":`...)
	b = appendJSONString(b, c.Name)
	b = append(b, `,"ok":`...)
	b = appendJSONBool(b, c.OK)
	if c.Detail != "" {
		b = append(b, `,"detail":`...)
		b = appendJSONString(b, c.Detail)
	}
	return append(b, '}')
}

func (r *Receipt) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"external_id":`...)
	b = appendJSONString(b, r.ExternalID)
	if r.LiveURL != "" {
		b = append(b, `,"live_url":`...)
		b = appendJSONString(b, r.LiveURL)
	}
	if len(r.Checks) > 0 {
		b = append(b, `,"checks":[`...)
		for i := range r.Checks {
			if i > 0 {
				b = append(b, ',')
			}
			b = r.Checks[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	if !r.ReadbackAt.IsZero() {
		var ok bool
		b = append(b, `,"readback_at":`...)
		if b, ok = appendJSONTime(b, r.ReadbackAt); !ok {
			return b, false
		}
	}
	b = append(b, `,"payload_sha256":`...)
	b = appendJSONString(b, r.PayloadSHA256)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, r.Source)
	if r.IdempotencyKey != "" {
		b = append(b, `,"idempotency_key":`...)
		b = appendJSONString(b, r.IdempotencyKey)
	}
	if r.RequestID != "" {
		b = append(b, `,"request_id":`...)
		b = appendJSONString(b, r.RequestID)
	}
	if r.AttemptID != "" {
		b = append(b, `,"attempt_id":`...)
		b = appendJSONString(b, r.AttemptID)
	}
	return append(b, '}'), true
}

func (r *Receipt) jsonSizeHint() int {
	n := 200 + len(r.ExternalID) + len(r.LiveURL) + len(r.PayloadSHA256) + len(r.Source) +
		len(r.IdempotencyKey) + len(r.RequestID) + len(r.AttemptID)
	for _, c := range r.Checks {
		n += 32 + len(c.Name) + len(c.Detail)
	}
	return n
}

func (d *IntentRecordedData) appendJSON(b []byte) ([]byte, bool) {
	if d == nil {
		return b, false
	}
	var ok bool
	b = append(b, `{"tenant":`...)
	b = appendJSONString(b, d.Tenant)
	b = append(b, `,"route":`...)
	b = appendJSONString(b, d.Route)
	b = append(b, `,"account":`...)
	b = appendJSONString(b, d.Account)
	b = append(b, `,"request_id":`...)
	b = appendJSONString(b, d.RequestID)
	b = append(b, `,"idempotency_key":`...)
	b = appendJSONString(b, d.IdempotencyKey)
	if d.ParentExternalID != "" {
		b = append(b, `,"parent_external_id":`...)
		b = appendJSONString(b, d.ParentExternalID)
	}
	b = append(b, `,"payload":`...)
	if b, ok = appendJSONRaw(b, d.Payload); !ok {
		return b, false
	}
	b = append(b, `,"payload_sha256":`...)
	b = appendJSONString(b, d.PayloadSHA256)
	b = append(b, `,"canon":`...)
	b = appendJSONString(b, d.Canon)
	b = append(b, `,"planned_at":`...)
	if b, ok = appendJSONTime(b, d.PlannedAt); !ok {
		return b, false
	}
	if !d.ExpiresAt.IsZero() {
		b = append(b, `,"expires_at":`...)
		if b, ok = appendJSONTime(b, d.ExpiresAt); !ok {
			return b, false
		}
	}
	b = append(b, `,"policy":`...)
	b = d.Policy.appendJSON(b)
	if d.Caps != nil {
		b = append(b, `,"caps":`...)
		b = d.Caps.appendJSON(b)
	}
	if d.Rules != 0 {
		b = append(b, `,"rules":`...)
		b = strconv.AppendInt(b, int64(d.Rules), 10)
	}
	return append(b, '}'), true
}

func (d *IntentRecordedData) jsonSizeHint() int {
	if d == nil {
		return 4
	}
	n := 452 + len(d.Tenant) + len(d.Route) + len(d.Account) + len(d.RequestID) + len(d.IdempotencyKey) +
		len(d.ParentExternalID) + len(d.Payload) + len(d.PayloadSHA256) + len(d.Canon)
	if !d.ExpiresAt.IsZero() {
		n += 50
	}
	if d.Caps != nil {
		n += 160
		for _, c := range d.Caps.Checks {
			n += 3 + len(c)
		}
	}
	return n
}

func (d *IntentStartedData) appendJSON(b []byte) ([]byte, bool) {
	if d == nil {
		return b, false
	}
	var ok bool
	b = append(b, `{"recorded":`...)
	if b, ok = d.Recorded.appendJSON(b); !ok {
		return b, false
	}
	b = append(b, `,"started":`...)
	if b, ok = d.Started.appendJSON(b); !ok {
		return b, false
	}
	if d.Traceparent != "" {
		b = append(b, `,"traceparent":`...)
		b = appendJSONString(b, d.Traceparent)
	}
	return append(b, '}'), true
}

func (d *IntentStartedData) jsonSizeHint() int {
	if d == nil {
		return 4
	}
	return 32 + d.Recorded.jsonSizeHint() + d.Started.jsonSizeHint() + 18 + len(d.Traceparent)
}

func (d *WriteStartedData) appendJSON(b []byte) ([]byte, bool) {
	if d == nil {
		return b, false
	}
	var ok bool
	b = append(b, `{"attempt":`...)
	b = strconv.AppendInt(b, int64(d.Attempt), 10)
	b = append(b, `,"idempotency_key":`...)
	b = appendJSONString(b, d.IdempotencyKey)
	b = append(b, `,"deadline":`...)
	if b, ok = appendJSONTime(b, d.Deadline); !ok {
		return b, false
	}
	if d.ClaimOwner != "" {
		b = append(b, `,"claim_owner":`...)
		b = appendJSONString(b, d.ClaimOwner)
	}
	if d.Request != nil {
		b = append(b, `,"request":`...)
		b = d.Request.appendJSON(b)
	}
	return append(b, '}'), true
}

func (d *WriteStartedData) jsonSizeHint() int {
	if d == nil {
		return 4
	}
	n := 120 + len(d.IdempotencyKey) + len(d.ClaimOwner)
	if r := d.Request; r != nil {
		n += 80 + len(r.Method) + len(r.Path) + len(r.ContentType) + len(r.Body) + len(r.Body)/8
		for _, h := range r.Headers {
			n += 24 + len(h.Name) + len(h.Value)
		}
	}
	return n
}

// appendJSON appends r as json.Marshal writes it.
func (r *SentRequest) appendJSON(b []byte) []byte {
	b = append(b, `{"method":`...)
	b = appendJSONString(b, r.Method)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, r.Path)
	if len(r.Headers) > 0 {
		b = append(b, `,"headers":[`...)
		for i, h := range r.Headers {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = appendJSONString(b, h.Name)
			b = append(b, `,"value":`...)
			b = appendJSONString(b, h.Value)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if r.ContentType != "" {
		b = append(b, `,"content_type":`...)
		b = appendJSONString(b, r.ContentType)
	}
	if r.Body != "" {
		b = append(b, `,"body":`...)
		b = appendJSONString(b, r.Body)
	}
	return append(b, '}')
}

func (d *WriteSucceededData) appendJSON(b []byte) ([]byte, bool) {
	if d == nil {
		return b, false
	}
	b = append(b, `{"external_id":`...)
	b = appendJSONString(b, d.ExternalID)
	if d.LiveURL != "" {
		b = append(b, `,"live_url":`...)
		b = appendJSONString(b, d.LiveURL)
	}
	b = append(b, `,"status_code":`...)
	b = strconv.AppendInt(b, int64(d.StatusCode), 10)
	return append(b, '}'), true
}

func (d *WriteSucceededData) jsonSizeHint() int {
	if d == nil {
		return 4
	}
	return 64 + len(d.ExternalID) + len(d.LiveURL)
}

func (d *WriteConfirmedData) appendJSON(b []byte) ([]byte, bool) {
	if d == nil {
		return b, false
	}
	b = append(b, `{"status_code":`...)
	b = strconv.AppendInt(b, int64(d.StatusCode), 10)
	b = append(b, `,"receipt":`...)
	b, ok := d.Receipt.appendJSON(b)
	if !ok {
		return b, false
	}
	return append(b, '}'), true
}

func (d *WriteConfirmedData) jsonSizeHint() int {
	if d == nil {
		return 4
	}
	return 40 + d.Receipt.jsonSizeHint()
}

func (d *WriteRejectedData) appendJSON(b []byte) ([]byte, bool) {
	if d == nil {
		return b, false
	}
	b = appendCodeMessageStatus(b, d.Code, d.Message, d.StatusCode)
	b = append(b, `,"retryable":`...)
	b = appendJSONBool(b, d.Retryable)
	if d.RetryAfter != 0 {
		b = append(b, `,"retry_after":`...)
		b = appendJSONDuration(b, d.RetryAfter)
	}
	return append(b, '}'), true
}

func (d *WriteRejectedData) jsonSizeHint() int {
	if d == nil {
		return 4
	}
	return 100 + len(d.Code) + len(d.Message)
}

func (d *OutcomeUnknownData) appendJSON(b []byte) ([]byte, bool) {
	if d == nil {
		return b, false
	}
	b = appendCodeMessageStatus(b, d.Code, d.Message, d.StatusCode)
	return append(b, '}'), true
}

// appendCodeMessageStatus opens a refusal's or an unknown outcome's body:
// code, then message and status code unless empty (omitempty).
func appendCodeMessageStatus(b []byte, code, message string, status int) []byte {
	b = append(b, `{"code":`...)
	b = appendJSONString(b, code)
	if message != "" {
		b = append(b, `,"message":`...)
		b = appendJSONString(b, message)
	}
	if status != 0 {
		b = append(b, `,"status_code":`...)
		b = strconv.AppendInt(b, int64(status), 10)
	}
	return b
}

func (d *OutcomeUnknownData) jsonSizeHint() int {
	if d == nil {
		return 4
	}
	return 60 + len(d.Code) + len(d.Message)
}
