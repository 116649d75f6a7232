package events

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/errors"
)

// Type is an event type. The set is closed: Decode refuses any other.
type Type string

// SafeValue marks event types safe for redacted log lines (the
// vocabulary holds no value from outside; cockroachdb/redact keeps it).
func (Type) SafeValue() {}

// The lifecycle's event types. Each row of the lifecycle table in
// ARCHITECTURE.md names the state it enters.
const (
	IntentRecorded       Type = "IntentRecorded"       // -> recorded
	IntentStarted        Type = "IntentStarted"        // -> write_started (IntentRecorded and the first WriteStarted in one message)
	ApprovalRequired     Type = "ApprovalRequired"     // -> awaiting_approval
	Approved             Type = "Approved"             // -> approved
	WriteStarted         Type = "WriteStarted"         // -> write_started (acked before the call)
	WriteSucceeded       Type = "WriteSucceeded"       // -> verifying (response seen, readback pending)
	WriteConfirmed       Type = "WriteConfirmed"       // -> confirmed (route trusts the response)
	WriteRejected        Type = "WriteRejected"        // -> rejected (proven not executed)
	OutcomeUnknown       Type = "OutcomeUnknown"       // -> unknown
	ReconcileStarted     Type = "ReconcileStarted"     // -> reconciling
	CheckDeferred        Type = "CheckDeferred"        // -> unknown (wait, next_check_at)
	CandidateFound       Type = "CandidateFound"       // -> verifying
	ReadbackPassed       Type = "ReadbackPassed"       // -> confirmed
	ReadbackFailed       Type = "ReadbackFailed"       // -> manual_action
	TargetProcessing     Type = "TargetProcessing"     // -> in_progress
	SearchWindowElapsed  Type = "SearchWindowElapsed"  // -> not_found
	StatusNotFound       Type = "StatusNotFound"       // -> not_found
	TargetFailed         Type = "TargetFailed"         // -> failed
	RetryClaimed         Type = "RetryClaimed"         // -> retry_claimed
	ClaimExpired         Type = "ClaimExpired"         // -> unknown (reconcile again, never write)
	ManualActionRequired Type = "ManualActionRequired" // -> manual_action
	OperatorConfirmed    Type = "OperatorConfirmed"    // manual_action/abandoned -> confirmed
	OperatorReleased     Type = "OperatorReleased"     // manual_action -> recorded (proven not executed, re-approved)
	Abandoned            Type = "Abandoned"            // -> abandoned
)

// Data is the typed body of an event. Validate reports the first invalid
// field as a *FieldError whose Field is prefixed "data.".
type Data interface {
	EventType() Type
	Validate() error
}

var registry = map[Type]func() Data{
	IntentRecorded:       func() Data { return &IntentRecordedData{} },
	IntentStarted:        func() Data { return &IntentStartedData{} },
	ApprovalRequired:     func() Data { return &ApprovalRequiredData{} },
	Approved:             func() Data { return &ApprovedData{} },
	WriteStarted:         func() Data { return &WriteStartedData{} },
	WriteSucceeded:       func() Data { return &WriteSucceededData{} },
	WriteConfirmed:       func() Data { return &WriteConfirmedData{} },
	WriteRejected:        func() Data { return &WriteRejectedData{} },
	OutcomeUnknown:       func() Data { return &OutcomeUnknownData{} },
	ReconcileStarted:     func() Data { return &ReconcileStartedData{} },
	CheckDeferred:        func() Data { return &CheckDeferredData{} },
	CandidateFound:       func() Data { return &CandidateFoundData{} },
	ReadbackPassed:       func() Data { return &ReadbackPassedData{} },
	ReadbackFailed:       func() Data { return &ReadbackFailedData{} },
	TargetProcessing:     func() Data { return &TargetProcessingData{} },
	SearchWindowElapsed:  func() Data { return &SearchWindowElapsedData{} },
	StatusNotFound:       func() Data { return &StatusNotFoundData{} },
	TargetFailed:         func() Data { return &TargetFailedData{} },
	RetryClaimed:         func() Data { return &RetryClaimedData{} },
	ClaimExpired:         func() Data { return &ClaimExpiredData{} },
	ManualActionRequired: func() Data { return &ManualActionRequiredData{} },
	OperatorConfirmed:    func() Data { return &OperatorConfirmedData{} },
	OperatorReleased:     func() Data { return &OperatorReleasedData{} },
	Abandoned:            func() Data { return &AbandonedData{} },
}

// knownTypes maps each type's name to its constant.
var knownTypes = func() map[string]Type {
	m := make(map[string]Type, len(registry))
	for t := range registry {
		m[string(t)] = t
	}
	return m
}()

// AllTypes lists every event type, sorted.
func AllTypes() []Type { return slices.Sorted(maps.Keys(registry)) }

// Known reports whether t is a type this version decodes.
func (t Type) Known() bool { _, ok := registry[t]; return ok }

// NewData returns an empty Data value for t, or nil for an unknown type.
func NewData(t Type) Data {
	f, ok := registry[t]
	if !ok {
		return nil
	}
	return f()
}

// Duration is a time.Duration that travels as a Go duration string ("90s").
type Duration time.Duration

func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.Errorf("duration must be a string like \"90s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.Errorf("duration %q: %v", s, err)
	}
	if v < 0 {
		return errors.Errorf("duration %q is negative", s)
	}
	*d = Duration(v)
	return nil
}

// Approval policies for retries and first writes.
const (
	PolicyAuto     = "auto"     // no human needed
	PolicyApproval = "approval" // an Approved event must precede
	PolicyNever    = "never"    // never retried automatically: manual_action
)

// Policy is the route policy frozen into an intent when it is recorded, so
// that a fold of the log never depends on configuration that changed later.
type Policy struct {
	// FirstWrite is the approval policy for the first attempt (auto|approval).
	FirstWrite string `json:"first_write"`
	// Retry is the approval policy for a retry after not_found (auto|approval|never).
	Retry string `json:"retry"`
	// RetryBudget is the number of attempts allowed after the first.
	RetryBudget int `json:"retry_budget"`
	// AttemptDeadline: a write_started older than this is unknown.
	AttemptDeadline Duration `json:"attempt_deadline"`
	// SearchBefore/SearchAfter: the candidate search window around planned_at
	// (and around each attempt's start).
	SearchBefore Duration `json:"search_before"`
	SearchAfter  Duration `json:"search_after"`
	// KeyRetention is how long the external API remembers an idempotency
	// key from its first receipt; 0 means the API has no idempotency key.
	KeyRetention Duration `json:"key_retention,omitempty"`
	// RetentionMargin is subtracted from KeyRetention before a retry.
	RetentionMargin Duration `json:"retention_margin,omitempty"`
	// TrustResponse: a success response confirms without readback.
	TrustResponse bool `json:"trust_response,omitempty"`
	// ClockSkew is the allowance for clocks of different instances.
	ClockSkew Duration `json:"clock_skew,omitempty"`
	// ResendBudget is how many times settle itself resends a write whose
	// last attempt was proven not executed (never sent, 429, 425), with
	// backoff, inside ExpiresAt. Such resends do not spend RetryBudget,
	// which counts only retries after an attempt that may have executed.
	ResendBudget int `json:"resend_budget,omitempty"`
	// ReadFailingAfter: external reads (search, status, readback) that keep
	// failing for this long hand the intent to a human (read_failing).
	// 0 means the default, 15 minutes.
	ReadFailingAfter Duration `json:"read_failing_after,omitempty"`
}

// DefaultReadFailingAfter is the read-failure bound of a policy that sets none.
const DefaultReadFailingAfter = 15 * time.Minute

// ReadFailingBound is ReadFailingAfter or its default.
func (p Policy) ReadFailingBound() time.Duration {
	if p.ReadFailingAfter > 0 {
		return p.ReadFailingAfter.D()
	}
	return DefaultReadFailingAfter
}

// Validate checks a policy; field names are prefixed with prefix.
func (p Policy) Validate(prefix string) error {
	switch p.FirstWrite {
	case PolicyAuto, PolicyApproval:
	default:
		return &FieldError{Field: prefix + "first_write", Reason: fmt.Sprintf("%q is not auto or approval", p.FirstWrite)}
	}
	switch p.Retry {
	case PolicyAuto, PolicyApproval, PolicyNever:
	default:
		return &FieldError{Field: prefix + "retry", Reason: fmt.Sprintf("%q is not auto, approval or never", p.Retry)}
	}
	if p.RetryBudget < 0 || p.RetryBudget > 10 {
		return &FieldError{Field: prefix + "retry_budget", Reason: fmt.Sprintf("%d is outside 0..10", p.RetryBudget)}
	}
	if p.AttemptDeadline <= 0 {
		return &FieldError{Field: prefix + "attempt_deadline", Reason: "must be positive"}
	}
	if p.SearchAfter <= 0 {
		return &FieldError{Field: prefix + "search_after", Reason: "must be positive"}
	}
	if p.KeyRetention > 0 && p.RetentionMargin >= p.KeyRetention {
		return &FieldError{Field: prefix + "retention_margin", Reason: "must be shorter than key_retention"}
	}
	if p.ResendBudget < 0 || p.ResendBudget > 20 {
		return &FieldError{Field: prefix + "resend_budget", Reason: fmt.Sprintf("%d is outside 0..20", p.ResendBudget)}
	}
	return nil
}

// Capabilities is what a route's external API offers, frozen into an intent
// when it is recorded (like its Policy): every later step is judged by the
// log alone, never by a configuration that changed since.
type Capabilities struct {
	// IdempotencyKey: the API deduplicates writes by key for KeyRetention
	// from the key's first receipt (0: the retention is unknown, so the key
	// cannot prove anything).
	IdempotencyKey bool     `json:"idempotency_key,omitempty"`
	KeyRetention   Duration `json:"key_retention,omitempty"`
	// StatusQuery: the API looks a write up by request id or key.
	StatusQuery     bool     `json:"status_query,omitempty"`
	ReflectionDelay Duration `json:"reflection_delay,omitempty"`
	// Search: the API lists objects by account in a time window.
	// SearchAuthoritative: every listed object carries author and parent,
	// so a window that closes without our object proves it absent.
	Search              bool `json:"search,omitempty"`
	SearchAuthoritative bool `json:"search_authoritative,omitempty"`
	// Correlation: every write carries a marker naming its intent.
	Correlation bool `json:"correlation,omitempty"`
	// Checks are the readback checks the route declares (empty: all of
	// url, author, payload, parent, visibility). Author, payload and
	// parent are required whatever the route declares.
	Checks []string `json:"checks,omitempty"`
}

// Check is one readback check with its result. Detail is a safe,
// human-readable note (never a secret or a raw response body).
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Source says what proved a receipt or found a candidate.
type Source string

// The sources.
const (
	// SourceResponse: the write's own response.
	SourceResponse Source = "response"
	// SourceReadback: the object read back and checked.
	SourceReadback Source = "readback"
	// SourceStatus: the API's status of the request.
	SourceStatus Source = "status"
	// SourceSearch: a search of the account's objects.
	SourceSearch Source = "search"
	// SourceOperator: an operator's resolution.
	SourceOperator Source = "operator"
)

// Receipt is the proven result of an intent. It holds no secret.
type Receipt struct {
	ExternalID     string    `json:"external_id"`
	LiveURL        string    `json:"live_url,omitempty"`
	Checks         []Check   `json:"checks,omitempty"`
	ReadbackAt     time.Time `json:"readback_at,omitzero"`
	PayloadSHA256  string    `json:"payload_sha256"`
	Source         Source    `json:"source"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	RequestID      string    `json:"request_id,omitempty"`
	AttemptID      string    `json:"attempt_id,omitempty"`
}

// Validate checks a receipt.
func (r *Receipt) Validate(prefix string) error {
	if r.ExternalID == "" {
		return &FieldError{Field: prefix + "external_id", Reason: "is required"}
	}
	if r.Source == "" {
		return &FieldError{Field: prefix + "source", Reason: "is required"}
	}
	for i, c := range r.Checks {
		if !c.OK && r.Source == SourceReadback {
			return &FieldError{Field: fmt.Sprintf("%schecks[%d]", prefix, i), Reason: "a receipt cannot hold a failed check"}
		}
	}
	return nil
}

// CandidateRef is a candidate seen by a search or a status query.
type CandidateRef struct {
	ExternalID string `json:"external_id"`
	LiveURL    string `json:"live_url,omitempty"`
	Match      bool   `json:"match"`
	// Mismatch lists the identity fields that differed (author, payload,
	// parent, correlation) and "pre_existing" for an object created before
	// the intent's first attempt (minus the clock-skew allowance).
	Mismatch []string `json:"mismatch,omitempty"`
	// CreatedAt is the object's creation time, when the API gives it;
	// FromFirstAttempt is how long after (+) or before (-) the intent's
	// first attempt started it was created ("" when either is unknown).
	CreatedAt        time.Time `json:"created_at,omitzero"`
	FromFirstAttempt string    `json:"from_first_attempt,omitempty"`
	// Author and Parent are as the API showed them; ParentFrom names the
	// field the route read the parent from ("" when it does not say).
	Author     string `json:"author,omitempty"`
	Parent     string `json:"parent,omitempty"`
	ParentFrom string `json:"parent_from,omitempty"`
	// Normalised names the route's declared normalisations under which
	// its payload equals the intent's.
	Normalised []string `json:"normalised,omitempty"`
	// Why says, for each check that failed or could not be made, what was
	// seen ("parent read as empty from $.issue_url").
	Why []string `json:"why,omitempty"`
}

// Evidence is what an operator needs to decide a manual action.
type Evidence struct {
	Candidates   []CandidateRef `json:"candidates,omitempty"`
	Checks       []Check        `json:"checks,omitempty"`
	Attempts     []AttemptRef   `json:"attempts,omitempty"`
	Queried      []string       `json:"queried,omitempty"`
	Unverified   []string       `json:"unverified,omitempty"`
	LastVersion  string         `json:"last_confirmed_version,omitempty"`
	CurrentState string         `json:"current_state,omitempty"`
	// Errors are the last failed reads (safe codes, no body).
	Errors []string `json:"errors,omitempty"`
	// CandidatesOmitted counts candidates left out to bound the event.
	CandidatesOmitted int `json:"candidates_omitted,omitempty"`
}

// AttemptRef is one attempt in evidence.
type AttemptRef struct {
	AttemptID string    `json:"attempt_id"`
	StartedAt time.Time `json:"started_at"`
	Outcome   string    `json:"outcome,omitempty"`
}

func required(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return &FieldError{Field: field, Reason: "is required"}
	}
	return nil
}

func requiredTime(field string, t time.Time) error {
	if t.IsZero() {
		return &FieldError{Field: field, Reason: "is required"}
	}
	return nil
}

// firstErr is the first non-nil of errs: field checks in the order their
// fields are reported.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// --- event bodies ---

// IntentRecordedData freezes everything the intent needs: the payload, its
// canonical hash, the ids and the route policy.
type IntentRecordedData struct {
	Tenant           string          `json:"tenant"`
	Route            string          `json:"route"`
	Account          string          `json:"account"`
	RequestID        string          `json:"request_id"`
	IdempotencyKey   string          `json:"idempotency_key"`
	ParentExternalID string          `json:"parent_external_id,omitempty"`
	Payload          json.RawMessage `json:"payload"`
	PayloadSHA256    string          `json:"payload_sha256"`
	Canon            string          `json:"canon"`
	PlannedAt        time.Time       `json:"planned_at"`
	ExpiresAt        time.Time       `json:"expires_at,omitzero"`
	Policy           Policy          `json:"policy"`
	// Caps is the route's capabilities when the intent was recorded: the
	// guards and the decision function judge every later step by them.
	Caps *Capabilities `json:"caps,omitempty"`
}

func (*IntentRecordedData) EventType() Type { return IntentRecorded }
func (d *IntentRecordedData) Validate() error {
	if err := firstErr(
		ValidateToken("data.tenant", d.Tenant),
		ValidateToken("data.route", d.Route),
		ValidateFreeform("data.account", d.Account),
		ValidateFreeform("data.request_id", d.RequestID),
		required("data.idempotency_key", d.IdempotencyKey),
	); err != nil {
		return err
	}
	if d.ParentExternalID != "" {
		if err := ValidateFreeform("data.parent_external_id", d.ParentExternalID); err != nil {
			return err
		}
	}
	if len(d.Payload) == 0 {
		return &FieldError{Field: "data.payload", Reason: "is required"}
	}
	if len(d.PayloadSHA256) != 64 {
		return &FieldError{Field: "data.payload_sha256", Reason: "must be 64 hex characters"}
	}
	if d.Canon != CanonV1 {
		return &FieldError{Field: "data.canon", Reason: fmt.Sprintf("%q is not %s", d.Canon, CanonV1)}
	}
	if err := requiredTime("data.planned_at", d.PlannedAt); err != nil {
		return err
	}
	return d.Policy.Validate("data.policy.")
}

// IntentStartedData is a new intent recorded and its first write started
// in one message (version 1): an IntentRecorded and its first
// WriteStarted, acknowledged before the call and folded as that pair. An
// intent not started at once (approval needed, expired) is recorded by
// IntentRecorded alone.
//
// Traceparent, optional, is the W3C traceparent of the request that
// submitted the intent (its caller's, or settle's own submit span): the
// intent's reconciliation, on any node, continues that trace.
type IntentStartedData struct {
	Recorded    IntentRecordedData `json:"recorded"`
	Started     WriteStartedData   `json:"started"`
	Traceparent string             `json:"traceparent,omitempty"`
}

func (*IntentStartedData) EventType() Type { return IntentStarted }
func (d *IntentStartedData) Validate() error {
	if err := d.Recorded.Validate(); err != nil {
		return nestField(err, "data.recorded.")
	}
	if err := d.Started.Validate(); err != nil {
		return nestField(err, "data.started.")
	}
	if d.Started.Attempt != 1 {
		return &FieldError{Field: "data.started.attempt", Reason: "an intent starts with attempt 1"}
	}
	if d.Started.ClaimOwner != "" {
		return &FieldError{Field: "data.started.claim_owner", Reason: "a first attempt has no claim"}
	}
	if d.Started.IdempotencyKey != d.Recorded.IdempotencyKey {
		return &FieldError{Field: "data.started.idempotency_key", Reason: "must be the intent's idempotency key"}
	}
	if d.Traceparent != "" && !ValidTraceparent(d.Traceparent) {
		return &FieldError{Field: "data.traceparent", Reason: "must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lower case)"}
	}
	return nil
}

// ValidTraceparent reports whether tp has the form of a W3C traceparent of
// version 00: "00-" 32 lower-case hex digits "-" 16 "-" 2, its trace and
// span ids not all zero.
func ValidTraceparent(tp string) bool {
	if len(tp) != 55 || tp[:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return false
	}
	zeroTrace, zeroSpan := true, true
	for i := 3; i < 55; i++ {
		c := tp[i]
		switch {
		case i == 35 || i == 52:
			continue
		case (c < '0' || c > '9') && (c < 'a' || c > 'f'):
			return false
		case c != '0' && i < 35:
			zeroTrace = false
		case c != '0' && i < 52:
			zeroSpan = false
		}
	}
	return !zeroTrace && !zeroSpan
}

// nestField moves a body's "data." field name under prefix.
func nestField(err error, prefix string) error {
	if fe, ok := err.(*FieldError); ok {
		return &FieldError{Field: prefix + strings.TrimPrefix(fe.Field, "data."), Reason: fe.Reason}
	}
	return err
}

// StartsWrite reports whether an event of type t starts a write attempt
// (WriteStarted, or IntentStarted for a new intent's first).
func (t Type) StartsWrite() bool { return t == WriteStarted || t == IntentStarted }

// Split returns the IntentRecorded and WriteStarted that an IntentStarted
// e stands for, as the pair holds them when written apart: at
// versions e.Version and e.Version+1, at e's time, by e's actor. ok is
// false for any other event.
func Split(e Event) (recorded, started Event, ok bool) {
	d, isStarted := e.Data.(*IntentStartedData)
	if !isStarted || d == nil {
		return Event{}, Event{}, false
	}
	rec, ws := d.Recorded, d.Started
	recorded = New(e.IntentID, e.Version, e.At, e.Actor, "", &rec)
	started = New(e.IntentID, e.Version+1, e.At, e.Actor, e.AttemptID, &ws)
	return recorded, started, true
}

// SplitStarted returns h with each IntentStarted replaced by its
// IntentRecorded and WriteStarted (Split), the events after it one version
// later (their event ids those of that version): a reader of the pair
// reads the result as it reads an intent recorded and started apart; h
// itself is returned when it holds no IntentStarted.
func SplitStarted(h []Event) []Event {
	if !slices.ContainsFunc(h, func(e Event) bool { return e.Type == IntentStarted }) {
		return h
	}
	out := make([]Event, 0, len(h)+1)
	shift := map[string]uint64{}
	for _, e := range h {
		if rec, ws, ok := Split(e); ok {
			rec.Version += shift[e.IntentID]
			rec.EventID = MsgID(rec.IntentID, rec.Version)
			ws.Version += shift[e.IntentID]
			ws.EventID = MsgID(ws.IntentID, ws.Version)
			out = append(out, rec, ws)
			shift[e.IntentID]++
			continue
		}
		if n := shift[e.IntentID]; n > 0 {
			e.Version += n
			e.EventID = MsgID(e.IntentID, e.Version)
		}
		out = append(out, e)
	}
	return out
}

// Join is Split's inverse: the IntentStarted that stands for an
// IntentRecorded and its intent's first WriteStarted right after it, at
// the same time, by the same actor. ok is false for any other pair.
func Join(recorded, started Event) (Event, bool) {
	rec, ok1 := recorded.Data.(*IntentRecordedData)
	ws, ok2 := started.Data.(*WriteStartedData)
	if !ok1 || !ok2 || rec == nil || ws == nil || started.IntentID != recorded.IntentID ||
		started.Version != recorded.Version+1 || !started.At.Equal(recorded.At) || started.Actor != recorded.Actor {
		return Event{}, false
	}
	return New(recorded.IntentID, recorded.Version, recorded.At, recorded.Actor, started.AttemptID,
		&IntentStartedData{Recorded: *rec, Started: *ws}), true
}

// Recorded is the frozen intent an event records (an IntentRecorded's
// body, or an IntentStarted's record), or nil.
func Recorded(e Event) *IntentRecordedData {
	switch d := e.Data.(type) {
	case *IntentRecordedData:
		return d
	case *IntentStartedData:
		return &d.Recorded
	}
	return nil
}

// Started is the write start an event records (a WriteStarted's body, or
// an IntentStarted's first write), or nil.
func Started(e Event) *WriteStartedData {
	switch d := e.Data.(type) {
	case *WriteStartedData:
		return d
	case *IntentStartedData:
		return &d.Started
	}
	return nil
}

// ApprovalRequiredData: a human must approve before the next write.
type ApprovalRequiredData struct {
	For    string `json:"for"` // first_write | retry
	Reason string `json:"reason"`
}

func (*ApprovalRequiredData) EventType() Type { return ApprovalRequired }
func (d *ApprovalRequiredData) Validate() error {
	if d.For != "first_write" && d.For != "retry" {
		return &FieldError{Field: "data.for", Reason: fmt.Sprintf("%q is not first_write or retry", d.For)}
	}
	return nil
}

// ApprovedData records who approved and why.
type ApprovedData struct {
	Operator string `json:"operator"`
	Reason   string `json:"reason,omitempty"`
}

func (*ApprovedData) EventType() Type   { return Approved }
func (d *ApprovedData) Validate() error { return required("data.operator", d.Operator) }

// WriteStartedData is appended and acknowledged before the external call.
type WriteStartedData struct {
	Attempt        int       `json:"attempt"`
	IdempotencyKey string    `json:"idempotency_key"`
	Deadline       time.Time `json:"deadline"`
	// ClaimOwner is the worker whose RetryClaimed this attempt uses (retries only).
	ClaimOwner string `json:"claim_owner,omitempty"`
	// Request is the request this attempt sends, as the first attempt
	// rendered it (nil: not recorded, by an adapter that cannot render a
	// write apart from sending it). Every retry sends it again, byte for
	// byte, never one rendered from a route edited since.
	Request *SentRequest `json:"request,omitempty"`
}

func (*WriteStartedData) EventType() Type { return WriteStarted }
func (d *WriteStartedData) Validate() error {
	if d.Attempt < 1 {
		return &FieldError{Field: "data.attempt", Reason: "must be ≥ 1"}
	}
	if err := required("data.idempotency_key", d.IdempotencyKey); err != nil {
		return err
	}
	if d.Request != nil {
		if err := required("data.request.method", d.Request.Method); err != nil {
			return err
		}
	}
	return requiredTime("data.deadline", d.Deadline)
}

// SentRequest is a write's request as rendered for sending, without any
// credential: its method, its URL after the route's base URL, its own
// headers (the route's credential headers and the idempotency key's and
// attempt id's headers are added when it is sent), its content type and
// body. It is recorded in WriteStarted so that a retry sends the very
// bytes the first attempt sent.
type SentRequest struct {
	Method string `json:"method"`
	// Path is the URL after the route's base URL (its path and query).
	Path        string        `json:"path"`
	Headers     []HeaderField `json:"headers,omitempty"`
	ContentType string        `json:"content_type,omitempty"`
	Body        string        `json:"body,omitempty"`
}

// HeaderField is one header of a SentRequest.
type HeaderField struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MaxSentRequestSize bounds a SentRequest recorded in WriteStarted, as
// JSON: a larger rendering is not recorded (its retries render it again).
const MaxSentRequestSize = 256 << 10

// Recordable reports whether r may be recorded: its body is UTF-8 (JSON
// text keeps it byte for byte) and its JSON stays within
// MaxSentRequestSize.
func (r *SentRequest) Recordable() bool {
	if r == nil || !utf8.ValidString(r.Body) {
		return false
	}
	n := 64 + len(r.Method) + len(r.Path) + len(r.ContentType) + len(r.Body)
	for _, h := range r.Headers {
		n += 24 + len(h.Name) + len(h.Value)
	}
	if 6*n <= MaxSentRequestSize { // even if every byte were escaped
		return true
	}
	b, err := json.Marshal(r)
	return err == nil && len(b) <= MaxSentRequestSize
}

// Equal reports whether r and o are the same request.
func (r *SentRequest) Equal(o *SentRequest) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.Method == o.Method && r.Path == o.Path && r.ContentType == o.ContentType && r.Body == o.Body &&
		slices.Equal(r.Headers, o.Headers)
}

// WriteSucceededData: a success response; readback still pending.
type WriteSucceededData struct {
	ExternalID string `json:"external_id"`
	LiveURL    string `json:"live_url,omitempty"`
	StatusCode int    `json:"status_code"`
}

func (*WriteSucceededData) EventType() Type   { return WriteSucceeded }
func (d *WriteSucceededData) Validate() error { return required("data.external_id", d.ExternalID) }

// WriteConfirmedData: a success response on a route that trusts it.
type WriteConfirmedData struct {
	StatusCode int     `json:"status_code"`
	Receipt    Receipt `json:"receipt"`
}

func (*WriteConfirmedData) EventType() Type   { return WriteConfirmed }
func (d *WriteConfirmedData) Validate() error { return d.Receipt.Validate("data.receipt.") }

// WriteRejectedData: the write is proven not executed.
type WriteRejectedData struct {
	Code       string `json:"code"`
	Message    string `json:"message,omitempty"`
	StatusCode int    `json:"status_code,omitempty"`
	Retryable  bool   `json:"retryable"`
	// RetryAfter is how long the API asked to wait before the next
	// request (Retry-After, or a declared rate-limit reset), as honoured:
	// no resend starts earlier.
	RetryAfter Duration `json:"retry_after,omitempty"`
}

func (*WriteRejectedData) EventType() Type   { return WriteRejected }
func (d *WriteRejectedData) Validate() error { return required("data.code", d.Code) }

// OutcomeUnknownData: the request may have been executed.
type OutcomeUnknownData struct {
	Code       string `json:"code"`
	Message    string `json:"message,omitempty"`
	StatusCode int    `json:"status_code,omitempty"`
}

func (*OutcomeUnknownData) EventType() Type   { return OutcomeUnknown }
func (d *OutcomeUnknownData) Validate() error { return required("data.code", d.Code) }

// ReconcileStartedData: a worker took the intent for one reconciliation step.
type ReconcileStartedData struct {
	Worker     string    `json:"worker"`
	LeaseUntil time.Time `json:"lease_until"`
	Strategy   string    `json:"strategy"` // search | status | none
	Check      int       `json:"check"`    // 1-based count of reconciliation steps
}

func (*ReconcileStartedData) EventType() Type { return ReconcileStarted }
func (d *ReconcileStartedData) Validate() error {
	return firstErr(required("data.worker", d.Worker), required("data.strategy", d.Strategy),
		requiredTime("data.lease_until", d.LeaseUntil))
}

// CheckDeferredData: nothing conclusive yet; check again at NextCheckAt.
type CheckDeferredData struct {
	Reason      DeferReason    `json:"reason"`
	NextCheckAt time.Time      `json:"next_check_at"`
	Candidates  []CandidateRef `json:"candidates,omitempty"`
	// Error is the failed read's safe code (read_failed only).
	Error string `json:"error,omitempty"`
	// CandidatesOmitted counts candidates left out to bound the event.
	CandidatesOmitted int `json:"candidates_omitted,omitempty"`
	// RetryAfter is how long the API asked to wait before the next read
	// (read_failed only), as honoured: NextCheckAt is no earlier.
	RetryAfter Duration `json:"retry_after,omitempty"`
}

// DeferReason says why a check was deferred.
type DeferReason string

// The reasons of a CheckDeferred.
const (
	// DeferEventualConsistency: the object may not be visible yet.
	DeferEventualConsistency DeferReason = "eventual_consistency"
	// DeferLeaseExpired: a worker's lease ran out.
	DeferLeaseExpired DeferReason = "lease_expired"
	// DeferReadFailed: an external read failed.
	DeferReadFailed DeferReason = "read_failed"
	// DeferReflectionDelay: the API reflects a write only after a delay.
	DeferReflectionDelay DeferReason = "reflection_delay"
	// DeferReadbackNotVisible: the object is not readable yet.
	DeferReadbackNotVisible DeferReason = "readback_not_visible"
)

func (*CheckDeferredData) EventType() Type { return CheckDeferred }
func (d *CheckDeferredData) Validate() error {
	return firstErr(required("data.reason", string(d.Reason)), requiredTime("data.next_check_at", d.NextCheckAt))
}

// CandidateFoundData: exactly one exact match; readback follows.
type CandidateFoundData struct {
	ExternalID string         `json:"external_id"`
	LiveURL    string         `json:"live_url,omitempty"`
	Source     Source         `json:"source"`
	Candidates []CandidateRef `json:"candidates,omitempty"`
	// CreatedAt is the object's creation time when the API gives it; the
	// guard refuses an object created before the intent's first attempt.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// CorrelationID is the intent the object's marker names (routes with
	// a correlation marker); the guard requires it to be this intent.
	CorrelationID string `json:"correlation_id,omitempty"`
	// CandidatesOmitted counts candidates left out to bound the event.
	CandidatesOmitted int `json:"candidates_omitted,omitempty"`
	// Account is the account the object belongs to as the API told it
	// (a search candidate's author, a status answer's account; "" when
	// the API does not say); the guard refuses another account's.
	Account string `json:"account,omitempty"`
}

func (*CandidateFoundData) EventType() Type { return CandidateFound }
func (d *CandidateFoundData) Validate() error {
	return firstErr(required("data.external_id", d.ExternalID), required("data.source", string(d.Source)))
}

// ReadbackPassedData carries the receipt.
type ReadbackPassedData struct {
	Receipt Receipt `json:"receipt"`
}

func (*ReadbackPassedData) EventType() Type { return ReadbackPassed }
func (d *ReadbackPassedData) Validate() error {
	if len(d.Receipt.Checks) == 0 && d.Receipt.Source == SourceReadback {
		return &FieldError{Field: "data.receipt.checks", Reason: "a readback receipt needs its checks"}
	}
	return d.Receipt.Validate("data.receipt.")
}

// ReadbackFailedData names the failed checks.
type ReadbackFailedData struct {
	ExternalID string   `json:"external_id"`
	Checks     []Check  `json:"checks"`
	Failed     []string `json:"failed"`
}

func (*ReadbackFailedData) EventType() Type { return ReadbackFailed }
func (d *ReadbackFailedData) Validate() error {
	if len(d.Failed) == 0 {
		return &FieldError{Field: "data.failed", Reason: "must name at least one failed check"}
	}
	return nil
}

// TargetProcessingData: the status query says the target is still working.
type TargetProcessingData struct {
	Poll        int       `json:"poll"`
	NextCheckAt time.Time `json:"next_check_at"`
	Deadline    time.Time `json:"deadline"`
}

func (*TargetProcessingData) EventType() Type { return TargetProcessing }
func (d *TargetProcessingData) Validate() error {
	return requiredTime("data.next_check_at", d.NextCheckAt)
}

// SearchWindowElapsedData: the window closed with no exact match.
type SearchWindowElapsedData struct {
	WindowFrom time.Time      `json:"window_from"`
	WindowTo   time.Time      `json:"window_to"`
	Searches   int            `json:"searches"`
	Candidates []CandidateRef `json:"candidates,omitempty"`
	// CandidatesOmitted counts candidates left out to bound the event.
	CandidatesOmitted int `json:"candidates_omitted,omitempty"`
}

func (*SearchWindowElapsedData) EventType() Type { return SearchWindowElapsed }
func (d *SearchWindowElapsedData) Validate() error {
	return requiredTime("data.window_to", d.WindowTo)
}

// StatusNotFoundData: the status query said not found after the reflection delay.
type StatusNotFoundData struct {
	ReflectionDelay Duration `json:"reflection_delay"`
	Queried         string   `json:"queried"`
}

func (*StatusNotFoundData) EventType() Type   { return StatusNotFound }
func (d *StatusNotFoundData) Validate() error { return required("data.queried", d.Queried) }

// TargetFailedData: a definite failure. PartialEffects lists what exists anyway.
type TargetFailedData struct {
	Code           string   `json:"code"`
	Message        string   `json:"message,omitempty"`
	PartialEffects []string `json:"partial_effects,omitempty"`
}

func (*TargetFailedData) EventType() Type   { return TargetFailed }
func (d *TargetFailedData) Validate() error { return required("data.code", d.Code) }

// RetryClaimedData: the CAS-won right to make the next attempt.
type RetryClaimedData struct {
	Owner         string    `json:"owner"`
	LeaseUntil    time.Time `json:"lease_until"`
	Attempt       int       `json:"attempt"`
	BudgetLeft    int       `json:"budget_left"`
	KeyValidUntil time.Time `json:"key_valid_until,omitzero"`
	ApprovedBy    string    `json:"approved_by,omitempty"`
}

func (*RetryClaimedData) EventType() Type { return RetryClaimed }
func (d *RetryClaimedData) Validate() error {
	if err := required("data.owner", d.Owner); err != nil {
		return err
	}
	if d.Attempt < 2 {
		return &FieldError{Field: "data.attempt", Reason: "a retry is attempt 2 or later"}
	}
	return requiredTime("data.lease_until", d.LeaseUntil)
}

// ClaimExpiredData: the claim's lease passed without a WriteStarted.
type ClaimExpiredData struct {
	Owner      string    `json:"owner"`
	LeaseUntil time.Time `json:"lease_until"`
}

func (*ClaimExpiredData) EventType() Type   { return ClaimExpired }
func (d *ClaimExpiredData) Validate() error { return required("data.owner", d.Owner) }

// ManualReason says why an intent was handed to a human: the stable code
// of a ManualActionRequired (and of a hold).
type ManualReason string

// The reasons of a ManualActionRequired.
const (
	ReasonDuplicateExactMatches ManualReason = "duplicate_exact_matches"
	ReasonReadbackFailed        ManualReason = "readback_failed"
	ReasonKeyRetentionExpired   ManualReason = "key_retention_expired"
	ReasonNoQueryNoDedup        ManualReason = "no_query_no_dedup"
	ReasonRetryBudgetSpent      ManualReason = "retry_budget_spent"
	ReasonRetryNever            ManualReason = "retry_policy_never"
	ReasonPartialEffects        ManualReason = "partial_effects"
	ReasonProcessingDeadline    ManualReason = "processing_deadline"
	ReasonIntentExpired         ManualReason = "intent_expired"
	// ReasonNearMatch: no exact match, but a candidate differs from the
	// intent in one identity field only (author, parent, or a payload the
	// route calls a damaged copy): a retry could duplicate it.
	ReasonNearMatch ManualReason = "near_match"
	// ReasonNoDedupProof: proven not found, but nothing proves a retry
	// cannot duplicate the write (no key inside its retention, no
	// authoritative search): "not found" alone never licenses a resend.
	ReasonNoDedupProof ManualReason = "no_dedup_proof"
	// ReasonWrittenUnverified: an attempt was proven written, but the object
	// could not be read back before the window closed, nor once after it.
	// Never retried.
	ReasonWrittenUnverified ManualReason = "written_unverified"
	// ReasonNoExternalID: the API says the write completed (or a candidate
	// matched) but gives no external id to read it back by.
	ReasonNoExternalID ManualReason = "no_external_id"
	// ReasonReadFailing: external reads kept failing for longer than the
	// policy's ReadFailingAfter.
	ReasonReadFailing ManualReason = "read_failing"
	// ReasonLogEventsLost: the log lost some of the intent's events (a
	// damaged store, accepted by an operator): what it shows may be older
	// than what happened, so nothing more is written without a human.
	ReasonLogEventsLost ManualReason = "log_events_lost"
	// ReasonKeyReused: the API answered that the intent's idempotency key
	// was already used (with other parameters): an earlier request with
	// the key reached it and may have executed. Never a proven rejection.
	ReasonKeyReused ManualReason = "key_reused"
	// ReasonWrittenModified: an object our marker names, by the intent's
	// account, is this intent's effect but differs from the intent (edited,
	// or rewritten by the API). Never written again; a human decides.
	ReasonWrittenModified ManualReason = "written_modified"
	// ReasonStatusNotOurs: the status query answered with a write of
	// another account or whose marker names another intent.
	ReasonStatusNotOurs ManualReason = "status_not_ours"
	// ReasonStatusUnverifiable: the status query's answer cannot be
	// checked to be this intent's (no correlation marker where the route
	// writes one).
	ReasonStatusUnverifiable ManualReason = "status_unverifiable"
	// ReasonAmbiguousMatch: on a route without a correlation marker, the
	// only matching object was created inside the clock-skew allowance
	// before the first attempt: the write, or a look-alike made just before.
	ReasonAmbiguousMatch ManualReason = "ambiguous_match"
)

// CodeKeyReused is the outcome code of an answer saying the idempotency key
// was already used with another request (Stripe's idempotency_error, a 422
// "key reused"): evidence that an earlier request reached the API, so the
// attempt's outcome is unknown, never rejected (adapter.CodeKeyReused).
const CodeKeyReused = "idempotency_key_reused"

// ManualActionRequiredData hands the intent to a human.
type ManualActionRequiredData struct {
	Reason   ManualReason `json:"reason"`
	Message  string       `json:"message,omitempty"`
	Owner    string       `json:"owner,omitempty"`
	Evidence Evidence     `json:"evidence"`
}

func (*ManualActionRequiredData) EventType() Type   { return ManualActionRequired }
func (d *ManualActionRequiredData) Validate() error { return required("data.reason", string(d.Reason)) }

// OperatorConfirmedData: a human proved the effect and names it.
type OperatorConfirmedData struct {
	Operator string  `json:"operator"`
	Reason   string  `json:"reason"`
	Receipt  Receipt `json:"receipt"`
}

func (*OperatorConfirmedData) EventType() Type { return OperatorConfirmed }
func (d *OperatorConfirmedData) Validate() error {
	return firstErr(required("data.operator", d.Operator), required("data.reason", d.Reason),
		d.Receipt.Validate("data.receipt."))
}

// OperatorReleasedData: a human proved the write was not executed and
// approves a new attempt.
type OperatorReleasedData struct {
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
}

func (*OperatorReleasedData) EventType() Type { return OperatorReleased }
func (d *OperatorReleasedData) Validate() error {
	return firstErr(required("data.operator", d.Operator), required("data.reason", d.Reason))
}

// AbandonedData: the intent will not be written (cancellation is not
// rollback). EffectPossible: an earlier attempt may have executed (its
// outcome was not a proven rejection), so the external system may still
// hold the effect; if it proves executed, OperatorConfirmed records it.
type AbandonedData struct {
	By             string `json:"by"`
	Reason         string `json:"reason"`
	EffectPossible bool   `json:"effect_possible,omitempty"`
}

func (*AbandonedData) EventType() Type   { return Abandoned }
func (d *AbandonedData) Validate() error { return required("data.by", d.By) }
