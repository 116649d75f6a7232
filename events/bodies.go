package events

import (
	"bytes"
	"encoding/json"
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
// TestReadBodyAgreesWithEncodingJSON check both claims;
// TestReadBodyKeysMatchStructs checks the key lists below against the
// structs' tags.
//
// This reader and decodeCanonical (canonical.go) are the one JSON kept by
// hand: every reader of the log (projector, audit, node) decodes each
// event, and with encoding/json alone an event's Decode took 3-9 times as
// long and the projection's CPU per event rose by about a fifth (the A/B
// "JSON: hand-written vs encoding/json" in BENCHMARKS.md). Encoding and
// the JetStream ack use encoding/json.

// readBody fills d (a fresh body from NewData) from b. On false d is left
// partly filled: the caller must start again from a fresh body.
func readBody(b []byte, d Data) bool {
	r := bodyReader{b: b}
	switch d := d.(type) {
	case *IntentRecordedData:
		r.intentRecorded(d)
	case *IntentStartedData:
		r.intentStarted(d)
	case *ApprovalRequiredData:
		r.approvalRequired(d)
	case *ApprovedData:
		r.approved(d)
	case *WriteStartedData:
		r.writeStarted(d)
	case *WriteSucceededData:
		r.writeSucceeded(d)
	case *WriteConfirmedData:
		r.writeConfirmed(d)
	case *WriteRejectedData:
		r.writeRejected(d)
	case *OutcomeUnknownData:
		r.outcomeUnknown(d)
	case *ReconcileStartedData:
		r.reconcileStarted(d)
	case *CheckDeferredData:
		r.checkDeferred(d)
	case *CandidateFoundData:
		r.candidateFound(d)
	case *ReadbackPassedData:
		r.readbackPassed(d)
	case *ReadbackFailedData:
		r.readbackFailed(d)
	case *TargetProcessingData:
		r.targetProcessing(d)
	case *SearchWindowElapsedData:
		r.searchWindowElapsed(d)
	case *StatusNotFoundData:
		r.statusNotFound(d)
	case *TargetFailedData:
		r.targetFailed(d)
	case *RetryClaimedData:
		r.retryClaimed(d)
	case *ClaimExpiredData:
		r.claimExpired(d)
	case *ManualActionRequiredData:
		r.manualActionRequired(d)
	case *OperatorConfirmedData:
		r.operatorConfirmed(d)
	case *OperatorReleasedData:
		r.operatorReleased(d)
	case *AbandonedData:
		r.abandoned(d)
	default:
		return false
	}
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

// open reads the '{' of an object.
func (r *bodyReader) open() {
	if r.bad || r.i >= len(r.b) || r.b[r.i] != '{' {
		r.bad = true
		return
	}
	r.i++
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

// rawQuoted reads a string without escapes and returns it quotes and all,
// as encoding/json hands a string to an UnmarshalJSON method.
func (r *bodyReader) rawQuoted() []byte {
	start := r.i
	if r.quoted(); r.bad {
		return nil
	}
	return r.b[start:r.i]
}

func (r *bodyReader) time() time.Time {
	var t time.Time
	if q := r.rawQuoted(); !r.bad && t.UnmarshalJSON(q) != nil {
		r.bad = true
	}
	return t
}

func (r *bodyReader) duration() Duration {
	var d Duration
	if q := r.rawQuoted(); !r.bad && d.UnmarshalJSON(q) != nil {
		r.bad = true
	}
	return d
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

func (r *bodyReader) checks() []Check {
	out := []Check{}
	for first := true; r.next(first); first = false {
		out = append(out, Check{})
		r.check(&out[len(out)-1])
	}
	return out
}

func (r *bodyReader) candidates() []CandidateRef {
	out := []CandidateRef{}
	for first := true; r.next(first); first = false {
		out = append(out, CandidateRef{})
		r.candidate(&out[len(out)-1])
	}
	return out
}

func (r *bodyReader) attempts() []AttemptRef {
	out := []AttemptRef{}
	for first := true; r.next(first); first = false {
		out = append(out, AttemptRef{})
		r.attemptRef(&out[len(out)-1])
	}
	return out
}

// --- the structs, each with its json names in field order ---

var policyKeys = []string{"first_write", "retry", "retry_budget", "attempt_deadline", "search_before", "search_after",
	"key_retention", "retention_margin", "trust_response", "clock_skew", "resend_budget", "read_failing_after"}

func (r *bodyReader) policy(p *Policy) {
	r.open()
	for k := r.member(policyKeys, -1); k >= 0; k = r.member(policyKeys, k) {
		switch k {
		case 0:
			p.FirstWrite = r.str()
		case 1:
			p.Retry = r.str()
		case 2:
			p.RetryBudget = r.int()
		case 3:
			p.AttemptDeadline = r.duration()
		case 4:
			p.SearchBefore = r.duration()
		case 5:
			p.SearchAfter = r.duration()
		case 6:
			p.KeyRetention = r.duration()
		case 7:
			p.RetentionMargin = r.duration()
		case 8:
			p.TrustResponse = r.bool()
		case 9:
			p.ClockSkew = r.duration()
		case 10:
			p.ResendBudget = r.int()
		case 11:
			p.ReadFailingAfter = r.duration()
		}
	}
}

var capabilitiesKeys = []string{"idempotency_key", "key_retention", "status_query", "reflection_delay", "search",
	"search_authoritative", "correlation", "checks"}

func (r *bodyReader) capabilities(c *Capabilities) {
	r.open()
	for k := r.member(capabilitiesKeys, -1); k >= 0; k = r.member(capabilitiesKeys, k) {
		switch k {
		case 0:
			c.IdempotencyKey = r.bool()
		case 1:
			c.KeyRetention = r.duration()
		case 2:
			c.StatusQuery = r.bool()
		case 3:
			c.ReflectionDelay = r.duration()
		case 4:
			c.Search = r.bool()
		case 5:
			c.SearchAuthoritative = r.bool()
		case 6:
			c.Correlation = r.bool()
		case 7:
			c.Checks = r.strings()
		}
	}
}

var checkKeys = []string{"name", "ok", "detail"}

func (r *bodyReader) check(c *Check) {
	r.open()
	for k := r.member(checkKeys, -1); k >= 0; k = r.member(checkKeys, k) {
		switch k {
		case 0:
			c.Name = r.str()
		case 1:
			c.OK = r.bool()
		case 2:
			c.Detail = r.str()
		}
	}
}

var receiptKeys = []string{"external_id", "live_url", "checks", "readback_at", "payload_sha256", "source",
	"idempotency_key", "request_id", "attempt_id"}

func (r *bodyReader) receipt(x *Receipt) {
	r.open()
	for k := r.member(receiptKeys, -1); k >= 0; k = r.member(receiptKeys, k) {
		switch k {
		case 0:
			x.ExternalID = r.str()
		case 1:
			x.LiveURL = r.str()
		case 2:
			x.Checks = r.checks()
		case 3:
			x.ReadbackAt = r.time()
		case 4:
			x.PayloadSHA256 = r.str()
		case 5:
			x.Source = Source(r.str())
		case 6:
			x.IdempotencyKey = r.str()
		case 7:
			x.RequestID = r.str()
		case 8:
			x.AttemptID = r.str()
		}
	}
}

var candidateKeys = []string{"external_id", "live_url", "match", "mismatch", "created_at", "from_first_attempt",
	"author", "parent", "parent_from", "normalised", "why"}

func (r *bodyReader) candidate(c *CandidateRef) {
	r.open()
	for k := r.member(candidateKeys, -1); k >= 0; k = r.member(candidateKeys, k) {
		switch k {
		case 0:
			c.ExternalID = r.str()
		case 1:
			c.LiveURL = r.str()
		case 2:
			c.Match = r.bool()
		case 3:
			c.Mismatch = r.strings()
		case 4:
			c.CreatedAt = r.time()
		case 5:
			c.FromFirstAttempt = r.str()
		case 6:
			c.Author = r.str()
		case 7:
			c.Parent = r.str()
		case 8:
			c.ParentFrom = r.str()
		case 9:
			c.Normalised = r.strings()
		case 10:
			c.Why = r.strings()
		}
	}
}

var evidenceKeys = []string{"candidates", "checks", "attempts", "queried", "unverified", "last_confirmed_version",
	"current_state", "errors", "candidates_omitted"}

func (r *bodyReader) evidence(e *Evidence) {
	r.open()
	for k := r.member(evidenceKeys, -1); k >= 0; k = r.member(evidenceKeys, k) {
		switch k {
		case 0:
			e.Candidates = r.candidates()
		case 1:
			e.Checks = r.checks()
		case 2:
			e.Attempts = r.attempts()
		case 3:
			e.Queried = r.strings()
		case 4:
			e.Unverified = r.strings()
		case 5:
			e.LastVersion = r.str()
		case 6:
			e.CurrentState = r.str()
		case 7:
			e.Errors = r.strings()
		case 8:
			e.CandidatesOmitted = r.int()
		}
	}
}

var attemptRefKeys = []string{"attempt_id", "started_at", "outcome"}

func (r *bodyReader) attemptRef(a *AttemptRef) {
	r.open()
	for k := r.member(attemptRefKeys, -1); k >= 0; k = r.member(attemptRefKeys, k) {
		switch k {
		case 0:
			a.AttemptID = r.str()
		case 1:
			a.StartedAt = r.time()
		case 2:
			a.Outcome = r.str()
		}
	}
}

var intentRecordedKeys = []string{"tenant", "route", "account", "request_id", "idempotency_key", "parent_external_id",
	"payload", "payload_sha256", "canon", "planned_at", "expires_at", "policy", "caps"}

func (r *bodyReader) intentRecorded(d *IntentRecordedData) {
	r.open()
	for k := r.member(intentRecordedKeys, -1); k >= 0; k = r.member(intentRecordedKeys, k) {
		switch k {
		case 0:
			d.Tenant = r.str()
		case 1:
			d.Route = r.str()
		case 2:
			d.Account = r.str()
		case 3:
			d.RequestID = r.str()
		case 4:
			d.IdempotencyKey = r.str()
		case 5:
			d.ParentExternalID = r.str()
		case 6:
			d.Payload = r.raw()
		case 7:
			d.PayloadSHA256 = r.str()
		case 8:
			d.Canon = r.str()
		case 9:
			d.PlannedAt = r.time()
		case 10:
			d.ExpiresAt = r.time()
		case 11:
			r.policy(&d.Policy)
		case 12:
			d.Caps = new(Capabilities)
			r.capabilities(d.Caps)
		}
	}
}

var intentStartedKeys = []string{"recorded", "started", "traceparent"}

func (r *bodyReader) intentStarted(d *IntentStartedData) {
	r.open()
	for k := r.member(intentStartedKeys, -1); k >= 0; k = r.member(intentStartedKeys, k) {
		switch k {
		case 0:
			r.intentRecorded(&d.Recorded)
		case 1:
			r.writeStarted(&d.Started)
		case 2:
			d.Traceparent = r.str()
		}
	}
}

var approvalRequiredKeys = []string{"for", "reason"}

func (r *bodyReader) approvalRequired(d *ApprovalRequiredData) {
	r.open()
	for k := r.member(approvalRequiredKeys, -1); k >= 0; k = r.member(approvalRequiredKeys, k) {
		switch k {
		case 0:
			d.For = r.str()
		case 1:
			d.Reason = r.str()
		}
	}
}

var approvedKeys = []string{"operator", "reason"}

func (r *bodyReader) approved(d *ApprovedData) {
	r.open()
	for k := r.member(approvedKeys, -1); k >= 0; k = r.member(approvedKeys, k) {
		switch k {
		case 0:
			d.Operator = r.str()
		case 1:
			d.Reason = r.str()
		}
	}
}

var writeStartedKeys = []string{"attempt", "idempotency_key", "deadline", "claim_owner", "request"}

func (r *bodyReader) writeStarted(d *WriteStartedData) {
	r.open()
	for k := r.member(writeStartedKeys, -1); k >= 0; k = r.member(writeStartedKeys, k) {
		switch k {
		case 0:
			d.Attempt = r.int()
		case 1:
			d.IdempotencyKey = r.str()
		case 2:
			d.Deadline = r.time()
		case 3:
			d.ClaimOwner = r.str()
		case 4:
			d.Request = new(SentRequest)
			r.sentRequest(d.Request)
		}
	}
}

var sentRequestKeys = []string{"method", "path", "headers", "content_type", "body"}

func (r *bodyReader) sentRequest(x *SentRequest) {
	r.open()
	for k := r.member(sentRequestKeys, -1); k >= 0; k = r.member(sentRequestKeys, k) {
		switch k {
		case 0:
			x.Method = r.str()
		case 1:
			x.Path = r.str()
		case 2:
			x.Headers = r.headerFields()
		case 3:
			x.ContentType = r.str()
		case 4:
			x.Body = r.str()
		}
	}
}

var headerFieldKeys = []string{"name", "value"}

func (r *bodyReader) headerFields() []HeaderField {
	out := []HeaderField{}
	for first := true; r.next(first); first = false {
		out = append(out, HeaderField{})
		r.headerField(&out[len(out)-1])
	}
	return out
}

func (r *bodyReader) headerField(h *HeaderField) {
	r.open()
	for k := r.member(headerFieldKeys, -1); k >= 0; k = r.member(headerFieldKeys, k) {
		switch k {
		case 0:
			h.Name = r.str()
		case 1:
			h.Value = r.str()
		}
	}
}

var writeSucceededKeys = []string{"external_id", "live_url", "status_code"}

func (r *bodyReader) writeSucceeded(d *WriteSucceededData) {
	r.open()
	for k := r.member(writeSucceededKeys, -1); k >= 0; k = r.member(writeSucceededKeys, k) {
		switch k {
		case 0:
			d.ExternalID = r.str()
		case 1:
			d.LiveURL = r.str()
		case 2:
			d.StatusCode = r.int()
		}
	}
}

var writeConfirmedKeys = []string{"status_code", "receipt"}

func (r *bodyReader) writeConfirmed(d *WriteConfirmedData) {
	r.open()
	for k := r.member(writeConfirmedKeys, -1); k >= 0; k = r.member(writeConfirmedKeys, k) {
		switch k {
		case 0:
			d.StatusCode = r.int()
		case 1:
			r.receipt(&d.Receipt)
		}
	}
}

var writeRejectedKeys = []string{"code", "message", "status_code", "retryable", "retry_after"}

func (r *bodyReader) writeRejected(d *WriteRejectedData) {
	r.open()
	for k := r.member(writeRejectedKeys, -1); k >= 0; k = r.member(writeRejectedKeys, k) {
		switch k {
		case 0:
			d.Code = r.str()
		case 1:
			d.Message = r.str()
		case 2:
			d.StatusCode = r.int()
		case 3:
			d.Retryable = r.bool()
		case 4:
			d.RetryAfter = r.duration()
		}
	}
}

var outcomeUnknownKeys = []string{"code", "message", "status_code"}

func (r *bodyReader) outcomeUnknown(d *OutcomeUnknownData) {
	r.open()
	for k := r.member(outcomeUnknownKeys, -1); k >= 0; k = r.member(outcomeUnknownKeys, k) {
		switch k {
		case 0:
			d.Code = r.str()
		case 1:
			d.Message = r.str()
		case 2:
			d.StatusCode = r.int()
		}
	}
}

var reconcileStartedKeys = []string{"worker", "lease_until", "strategy", "check"}

func (r *bodyReader) reconcileStarted(d *ReconcileStartedData) {
	r.open()
	for k := r.member(reconcileStartedKeys, -1); k >= 0; k = r.member(reconcileStartedKeys, k) {
		switch k {
		case 0:
			d.Worker = r.str()
		case 1:
			d.LeaseUntil = r.time()
		case 2:
			d.Strategy = r.str()
		case 3:
			d.Check = r.int()
		}
	}
}

var checkDeferredKeys = []string{"reason", "next_check_at", "candidates", "error", "candidates_omitted", "retry_after"}

func (r *bodyReader) checkDeferred(d *CheckDeferredData) {
	r.open()
	for k := r.member(checkDeferredKeys, -1); k >= 0; k = r.member(checkDeferredKeys, k) {
		switch k {
		case 0:
			d.Reason = DeferReason(r.str())
		case 1:
			d.NextCheckAt = r.time()
		case 2:
			d.Candidates = r.candidates()
		case 3:
			d.Error = r.str()
		case 4:
			d.CandidatesOmitted = r.int()
		case 5:
			d.RetryAfter = r.duration()
		}
	}
}

var candidateFoundKeys = []string{"external_id", "live_url", "source", "candidates", "created_at", "correlation_id",
	"candidates_omitted", "account"}

func (r *bodyReader) candidateFound(d *CandidateFoundData) {
	r.open()
	for k := r.member(candidateFoundKeys, -1); k >= 0; k = r.member(candidateFoundKeys, k) {
		switch k {
		case 0:
			d.ExternalID = r.str()
		case 1:
			d.LiveURL = r.str()
		case 2:
			d.Source = Source(r.str())
		case 3:
			d.Candidates = r.candidates()
		case 4:
			d.CreatedAt = r.time()
		case 5:
			d.CorrelationID = r.str()
		case 6:
			d.CandidatesOmitted = r.int()
		case 7:
			d.Account = r.str()
		}
	}
}

var readbackPassedKeys = []string{"receipt"}

func (r *bodyReader) readbackPassed(d *ReadbackPassedData) {
	r.open()
	for k := r.member(readbackPassedKeys, -1); k >= 0; k = r.member(readbackPassedKeys, k) {
		r.receipt(&d.Receipt)
	}
}

var readbackFailedKeys = []string{"external_id", "checks", "failed"}

func (r *bodyReader) readbackFailed(d *ReadbackFailedData) {
	r.open()
	for k := r.member(readbackFailedKeys, -1); k >= 0; k = r.member(readbackFailedKeys, k) {
		switch k {
		case 0:
			d.ExternalID = r.str()
		case 1:
			d.Checks = r.checks()
		case 2:
			d.Failed = r.strings()
		}
	}
}

var targetProcessingKeys = []string{"poll", "next_check_at", "deadline"}

func (r *bodyReader) targetProcessing(d *TargetProcessingData) {
	r.open()
	for k := r.member(targetProcessingKeys, -1); k >= 0; k = r.member(targetProcessingKeys, k) {
		switch k {
		case 0:
			d.Poll = r.int()
		case 1:
			d.NextCheckAt = r.time()
		case 2:
			d.Deadline = r.time()
		}
	}
}

var searchWindowElapsedKeys = []string{"window_from", "window_to", "searches", "candidates", "candidates_omitted"}

func (r *bodyReader) searchWindowElapsed(d *SearchWindowElapsedData) {
	r.open()
	for k := r.member(searchWindowElapsedKeys, -1); k >= 0; k = r.member(searchWindowElapsedKeys, k) {
		switch k {
		case 0:
			d.WindowFrom = r.time()
		case 1:
			d.WindowTo = r.time()
		case 2:
			d.Searches = r.int()
		case 3:
			d.Candidates = r.candidates()
		case 4:
			d.CandidatesOmitted = r.int()
		}
	}
}

var statusNotFoundKeys = []string{"reflection_delay", "queried"}

func (r *bodyReader) statusNotFound(d *StatusNotFoundData) {
	r.open()
	for k := r.member(statusNotFoundKeys, -1); k >= 0; k = r.member(statusNotFoundKeys, k) {
		switch k {
		case 0:
			d.ReflectionDelay = r.duration()
		case 1:
			d.Queried = r.str()
		}
	}
}

var targetFailedKeys = []string{"code", "message", "partial_effects"}

func (r *bodyReader) targetFailed(d *TargetFailedData) {
	r.open()
	for k := r.member(targetFailedKeys, -1); k >= 0; k = r.member(targetFailedKeys, k) {
		switch k {
		case 0:
			d.Code = r.str()
		case 1:
			d.Message = r.str()
		case 2:
			d.PartialEffects = r.strings()
		}
	}
}

var retryClaimedKeys = []string{"owner", "lease_until", "attempt", "budget_left", "key_valid_until", "approved_by"}

func (r *bodyReader) retryClaimed(d *RetryClaimedData) {
	r.open()
	for k := r.member(retryClaimedKeys, -1); k >= 0; k = r.member(retryClaimedKeys, k) {
		switch k {
		case 0:
			d.Owner = r.str()
		case 1:
			d.LeaseUntil = r.time()
		case 2:
			d.Attempt = r.int()
		case 3:
			d.BudgetLeft = r.int()
		case 4:
			d.KeyValidUntil = r.time()
		case 5:
			d.ApprovedBy = r.str()
		}
	}
}

var claimExpiredKeys = []string{"owner", "lease_until"}

func (r *bodyReader) claimExpired(d *ClaimExpiredData) {
	r.open()
	for k := r.member(claimExpiredKeys, -1); k >= 0; k = r.member(claimExpiredKeys, k) {
		switch k {
		case 0:
			d.Owner = r.str()
		case 1:
			d.LeaseUntil = r.time()
		}
	}
}

var manualActionRequiredKeys = []string{"reason", "message", "owner", "evidence"}

func (r *bodyReader) manualActionRequired(d *ManualActionRequiredData) {
	r.open()
	for k := r.member(manualActionRequiredKeys, -1); k >= 0; k = r.member(manualActionRequiredKeys, k) {
		switch k {
		case 0:
			d.Reason = ManualReason(r.str())
		case 1:
			d.Message = r.str()
		case 2:
			d.Owner = r.str()
		case 3:
			r.evidence(&d.Evidence)
		}
	}
}

var operatorConfirmedKeys = []string{"operator", "reason", "receipt"}

func (r *bodyReader) operatorConfirmed(d *OperatorConfirmedData) {
	r.open()
	for k := r.member(operatorConfirmedKeys, -1); k >= 0; k = r.member(operatorConfirmedKeys, k) {
		switch k {
		case 0:
			d.Operator = r.str()
		case 1:
			d.Reason = r.str()
		case 2:
			r.receipt(&d.Receipt)
		}
	}
}

var operatorReleasedKeys = []string{"operator", "reason"}

func (r *bodyReader) operatorReleased(d *OperatorReleasedData) {
	r.open()
	for k := r.member(operatorReleasedKeys, -1); k >= 0; k = r.member(operatorReleasedKeys, k) {
		switch k {
		case 0:
			d.Operator = r.str()
		case 1:
			d.Reason = r.str()
		}
	}
}

var abandonedKeys = []string{"by", "reason", "effect_possible"}

func (r *bodyReader) abandoned(d *AbandonedData) {
	r.open()
	for k := r.member(abandonedKeys, -1); k >= 0; k = r.member(abandonedKeys, k) {
		switch k {
		case 0:
			d.By = r.str()
		case 1:
			d.Reason = r.str()
		case 2:
			d.EffectPossible = r.bool()
		}
	}
}
