package audit

import (
	"cmp"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
)

// The report: violation kinds, what the audit returns, and the safe
// one-line text of each event in a timeline.

// Violation kinds: stable codes of what an audit found.
const (
	// ViolationIllegalTransition: the lifecycle table refuses the event in
	// the intent's state.
	ViolationIllegalTransition = fsm.CodeIllegalTransition
	// ViolationGuardRefused: the transition exists but an fsm guard refuses
	// it (attempt order, key, claim, budget, receipt digest).
	ViolationGuardRefused = fsm.CodeGuardRefused
	// ViolationBadHistory: versions out of order (gap, duplicate).
	ViolationBadHistory = fsm.CodeBadHistory
	// ViolationTwoExternalIDs: more than one distinct external id was
	// reported written or confirmed for one intent.
	ViolationTwoExternalIDs = "two_external_ids"
	// ViolationRetryWithoutClaim: an attempt after the first without a won
	// claim (RetryClaimed of the attempt's claim owner, inside its lease) or
	// an operator release.
	ViolationRetryWithoutClaim = "retry_without_claim"
	// ViolationOutcomeWithoutWriteStarted: a write outcome whose attempt has
	// no WriteStarted earlier on the log.
	ViolationOutcomeWithoutWriteStarted = "outcome_without_write_started"
	// ViolationStuck: an intent past its deadline, lease or recheck time.
	ViolationStuck = "stuck"
	// ViolationSecret: an event or its headers hold something that looks
	// like a credential.
	ViolationSecret = "secret"
	// ViolationMalformedEvent: an event of a schema and type this version
	// knows that does not decode (missing or invalid field, bad id).
	ViolationMalformedEvent = "malformed_event"
	// ViolationSubjectMismatch: an event off its intent's subject (foreign
	// subject, envelope of another intent, another route).
	ViolationSubjectMismatch = "subject_mismatch"
	// ViolationMsgIDMismatch: the Nats-Msg-Id header is not the event id.
	ViolationMsgIDMismatch = "msg_id_mismatch"
	// ViolationProjectionMismatch: the projected view differs from the fold
	// of the log.
	ViolationProjectionMismatch = "projection_mismatch"
)

// Violation is one broken invariant. IntentID is "" for findings that
// belong to no intent (a foreign subject, the projection's intent count).
type Violation struct {
	IntentID string `json:"intent_id"`
	Kind     string `json:"kind"`
	// Version is the event's version (0 when unknown or not event-bound).
	Version uint64 `json:"version,omitempty"`
	// Seq is the event's stream sequence (0 when not event-bound).
	Seq    uint64 `json:"seq,omitempty"`
	Detail string `json:"detail"`
}

func (v Violation) String() string {
	return fmt.Sprintf("%s %s v%d seq %d: %s", v.Kind, cmp.Or(v.IntentID, "-"), v.Version, v.Seq, v.Detail)
}

// UnreadableEvent is an event this version cannot decode. Codes are the
// decode codes of package events (events.CodeUnknownSchema, ...), which
// the projector's quarantine uses too.
type UnreadableEvent struct {
	Seq      uint64 `json:"seq"`
	Subject  string `json:"subject"`
	IntentID string `json:"intent_id,omitempty"`
	Code     string `json:"code"`
	Reason   string `json:"reason"`
}

// TimelineEntry is one event of the intent named by AuditConfig.Intent.
// Detail is a summary of the event's body with anything that looks like a
// secret redacted.
type TimelineEntry struct {
	Seq       uint64      `json:"seq"`
	Version   uint64      `json:"version,omitempty"`
	Type      events.Type `json:"type,omitempty"`
	At        time.Time   `json:"at,omitzero"`
	Actor     string      `json:"actor,omitempty"`
	AttemptID string      `json:"attempt_id,omitempty"`
	// State is the intent's state after the event; "" when the event was
	// not folded (see Refused).
	State   fsm.State `json:"state,omitempty"`
	Detail  string    `json:"detail,omitempty"`
	Refused string    `json:"refused,omitempty"`
}

// ProjectionReport summarises the projection check.
type ProjectionReport struct {
	// Checkpoint is the projection's checkpoint when the audit started.
	Checkpoint uint64 `json:"checkpoint"`
	// Compared counts intents whose view was compared with the fold.
	Compared int `json:"compared"`
	// Skipped counts intents the projection had advanced past the audited
	// log (appended during the audit): not judged.
	Skipped int `json:"skipped,omitempty"`
}

// AuditReport is the result of Audit.
type AuditReport struct {
	Stream string `json:"stream"`
	// At is the audit's notion of now (AuditConfig.Now).
	At time.Time `json:"at"`
	// LastSeq is the last stream sequence audited (the stream's last when
	// the audit started).
	LastSeq uint64 `json:"last_seq"`
	Events  uint64 `json:"events"`
	Intents int    `json:"intents"`
	// States counts intents per state of their fold (states with no intent
	// are absent; "none" counts intents none of whose events folded).
	States map[fsm.State]int `json:"states"`
	// Events this version cannot read, by kind. Unknown schemas and types
	// (a newer writer) are skipped; other decode failures are violations.
	UnknownSchema int               `json:"unknown_schema"`
	UnknownType   int               `json:"unknown_type"`
	Malformed     int               `json:"malformed"`
	Unreadable    []UnreadableEvent `json:"unreadable,omitempty"`
	// Incomplete counts intents with an unreadable event: their events
	// after it are not checked against the fsm and the invariants.
	Incomplete int               `json:"incomplete,omitempty"`
	Violations []Violation       `json:"violations"`
	Projection *ProjectionReport `json:"projection,omitempty"`
	Intent     string            `json:"intent,omitempty"`
	Timeline   []TimelineEntry   `json:"timeline,omitempty"`
	// ByKind counts violations per kind.
	ByKind map[string]int `json:"violations_by_kind,omitempty"`
	// AcceptedLoss counts events lost in ranges an operator accepted.
	AcceptedLoss uint64 `json:"accepted_loss,omitempty"`
	// Held are the intents held after an accepted loss (held.go), by id:
	// findings for an operator, each saying whether what is left of it
	// folds. HeldUnfoldable counts those that do not.
	Held           []HeldIntent `json:"held,omitempty"`
	HeldUnfoldable int          `json:"held_unfoldable,omitempty"`
}

// OK reports whether the audit found no violation.
func (r *AuditReport) OK() bool { return len(r.Violations) == 0 }

// summarize renders the safe, useful fields of an event's body.
func summarize(e events.Event) string {
	var s string
	switch d := e.Data.(type) {
	case *events.IntentRecordedData:
		s = fmt.Sprintf("tenant %s route %s account %q request %q payload %s… planned %s policy first_write=%s retry=%s budget=%d",
			d.Tenant, d.Route, d.Account, d.RequestID, d.PayloadSHA256[:min(12, len(d.PayloadSHA256))], fmtT(d.PlannedAt),
			d.Policy.FirstWrite, d.Policy.Retry, d.Policy.RetryBudget)
		if d.ParentExternalID != "" {
			s += fmt.Sprintf(" parent %q", d.ParentExternalID)
		}
	case *events.IntentStartedData:
		rec := e
		rec.Data = &d.Recorded
		ws := e
		ws.Data = &d.Started
		s = summarize(rec) + "; " + summarize(ws)
	case *events.ApprovalRequiredData:
		s = fmt.Sprintf("for %s: %s", d.For, d.Reason)
	case *events.ApprovedData:
		s = fmt.Sprintf("by %s: %s", d.Operator, d.Reason)
	case *events.WriteStartedData:
		s = fmt.Sprintf("attempt %d deadline %s", d.Attempt, fmtT(d.Deadline))
		if d.ClaimOwner != "" {
			s += " claim owner " + d.ClaimOwner
		}
	case *events.WriteSucceededData:
		s = fmt.Sprintf("external id %q status %d", d.ExternalID, d.StatusCode)
	case *events.WriteConfirmedData:
		s = fmt.Sprintf("status %d %s", d.StatusCode, receiptSummary(d.Receipt))
	case *events.WriteRejectedData:
		s = fmt.Sprintf("code %s status %d retryable %t %s", d.Code, d.StatusCode, d.Retryable, d.Message)
	case *events.OutcomeUnknownData:
		s = fmt.Sprintf("code %s status %d %s", d.Code, d.StatusCode, d.Message)
	case *events.ReconcileStartedData:
		s = fmt.Sprintf("worker %s strategy %s check %d lease until %s", d.Worker, d.Strategy, d.Check, fmtT(d.LeaseUntil))
	case *events.CheckDeferredData:
		s = fmt.Sprintf("reason %s next check %s candidates %d", d.Reason, fmtT(d.NextCheckAt), len(d.Candidates))
	case *events.CandidateFoundData:
		s = fmt.Sprintf("external id %q via %s", d.ExternalID, d.Source)
	case *events.ReadbackPassedData:
		s = receiptSummary(d.Receipt)
	case *events.ReadbackFailedData:
		s = fmt.Sprintf("external id %q failed %s", d.ExternalID, strings.Join(d.Failed, ","))
	case *events.TargetProcessingData:
		s = fmt.Sprintf("poll %d next check %s deadline %s", d.Poll, fmtT(d.NextCheckAt), fmtT(d.Deadline))
	case *events.SearchWindowElapsedData:
		s = fmt.Sprintf("window %s … %s searches %d", fmtT(d.WindowFrom), fmtT(d.WindowTo), d.Searches)
	case *events.StatusNotFoundData:
		s = fmt.Sprintf("queried %s reflection delay %s", d.Queried, d.ReflectionDelay.D())
	case *events.TargetFailedData:
		s = fmt.Sprintf("code %s partial effects %d %s", d.Code, len(d.PartialEffects), d.Message)
	case *events.RetryClaimedData:
		s = fmt.Sprintf("owner %s attempt %d lease until %s budget left %d", d.Owner, d.Attempt, fmtT(d.LeaseUntil), d.BudgetLeft)
		if d.ApprovedBy != "" {
			s += " approved by " + d.ApprovedBy
		}
	case *events.ClaimExpiredData:
		s = fmt.Sprintf("owner %s lease until %s", d.Owner, fmtT(d.LeaseUntil))
	case *events.ManualActionRequiredData:
		s = fmt.Sprintf("reason %s %s", d.Reason, d.Message)
	case *events.OperatorConfirmedData:
		s = fmt.Sprintf("by %s: %s; %s", d.Operator, d.Reason, receiptSummary(d.Receipt))
	case *events.OperatorReleasedData:
		s = fmt.Sprintf("by %s: %s", d.Operator, d.Reason)
	case *events.AbandonedData:
		s = fmt.Sprintf("by %s: %s", d.By, d.Reason)
	}
	return clipLong(redact(strings.TrimSpace(s)))
}

func receiptSummary(r events.Receipt) string {
	s := fmt.Sprintf("receipt external id %q source %s", r.ExternalID, r.Source)
	if r.LiveURL != "" {
		s += " url " + r.LiveURL
	}
	if len(r.Checks) > 0 {
		names := make([]string, len(r.Checks))
		for k, c := range r.Checks {
			names[k] = c.Name
		}
		s += " checks " + strings.Join(names, ",")
	}
	return s
}

func fmtT(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func quoteAll(xs []string) string {
	q := make([]string, len(xs))
	for k, x := range xs {
		q[k] = fmt.Sprintf("%q", clipText(x))
	}
	return strings.Join(q, ", ")
}

func clipText(s string) string { return clipAt(s, 120) }

func clipLong(s string) string { return clipAt(s, 400) }

// clipAt cuts s to at most n bytes on a rune boundary.
func clipAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
