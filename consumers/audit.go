package consumers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/projector"
)

// Violation kinds: stable codes of what an audit found.
const (
	// ViolationIllegalTransition: the lifecycle table refuses the event in
	// the intent's state.
	ViolationIllegalTransition = "illegal_transition"
	// ViolationGuardRefused: the transition exists but an fsm guard refuses
	// it (attempt order, key, claim, budget, receipt digest).
	ViolationGuardRefused = "guard_refused"
	// ViolationBadHistory: versions out of order (gap, duplicate).
	ViolationBadHistory = "bad_history"
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
	id := v.IntentID
	if id == "" {
		id = "-"
	}
	return fmt.Sprintf("%s %s v%d seq %d: %s", v.Kind, id, v.Version, v.Seq, v.Detail)
}

// UnreadableEvent is an event this version cannot decode. Codes are the
// projector's quarantine codes (projector.QuarantineUnknownSchema, ...).
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
	// AcceptedLoss counts events lost in ranges an operator accepted, and
	// AcceptedIntents the intents whose histories they broke (not
	// checked further).
	AcceptedLoss    uint64 `json:"accepted_loss,omitempty"`
	AcceptedIntents int    `json:"accepted_intents,omitempty"`
}

// OK reports whether the audit found no violation.
func (r *AuditReport) OK() bool { return len(r.Violations) == 0 }

// AuditProjection is the read side of a projection the audit compares
// with the log; *projector.Projector satisfies it. Get must return an
// error matching projector.ErrNotFound for an intent it does not hold.
type AuditProjection interface {
	Get(ctx context.Context, intentID string) (*projector.IntentView, error)
	Checkpoint(ctx context.Context) (uint64, error)
}

// stateCounter is optionally implemented by an AuditProjection (the
// projector does): the audit then also checks that the projection holds
// no intent the log lacks.
type stateCounter interface {
	CountByState(ctx context.Context) (map[fsm.State]int, error)
}

// AuditConfig configures Audit. Zero fields take their defaults.
type AuditConfig struct {
	// Stream is the intents stream (default SETTLE_INTENTS).
	Stream string
	// Now is the clock the stuck check compares with (default time.Now).
	Now func() time.Time
	// Grace is added to attempt deadlines and leases before an intent in
	// write_started, retry_claimed or reconciling is stuck (default 5m;
	// zero takes the default, so use a nanosecond for none).
	Grace time.Duration
	// StuckAfter: an unknown or in_progress intent whose next check is
	// older than this is stuck (default 1h).
	StuckAfter time.Duration
	// Intent, when set, makes the report carry that intent's timeline.
	Intent string
	// Projection, when set, is compared with the fold of every intent.
	Projection AuditProjection
	// Progress, when set, is called with the events read and the stream's
	// event count, at most every ProgressEvery events and once at the end.
	Progress func(done, total uint64)
	// ProgressEvery defaults to 10000.
	ProgressEvery uint64
	// Batch is how many messages the ordered consumer pulls at once
	// (default 512).
	Batch int
	// Known and HighWater are settle's record of the log outside it (the
	// views, the high-water mark): with them the audit names every
	// acknowledged event the log lost (audit_loss.go).
	Known     KnownEvents
	HighWater uint64
	// Accepted are sequence ranges (inclusive) an operator accepted as
	// lost (serve --accept-log-loss): counted in the report's
	// AcceptedLoss, not violations.
	Accepted [][2]uint64
}

// DefaultAuditConfig returns the defaults.
func DefaultAuditConfig() AuditConfig {
	return AuditConfig{Stream: "SETTLE_INTENTS", Now: time.Now, Grace: 5 * time.Minute, StuckAfter: time.Hour,
		ProgressEvery: 10000, Batch: 512}
}

func (c AuditConfig) withDefaults() AuditConfig {
	d := DefaultAuditConfig()
	if c.Stream == "" {
		c.Stream = d.Stream
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	if c.Grace == 0 {
		c.Grace = d.Grace
	}
	if c.StuckAfter == 0 {
		c.StuckAfter = d.StuckAfter
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = d.ProgressEvery
	}
	if c.Batch == 0 {
		c.Batch = d.Batch
	}
	return c
}

// Validate checks the config (after defaults); errors name the field.
func (c AuditConfig) Validate() error {
	if c.Stream == "" || strings.ContainsAny(c.Stream, ".*> \t\r\n") {
		return fmt.Errorf("audit config: Stream: %q is not a stream name", c.Stream)
	}
	if c.Grace < 0 {
		return fmt.Errorf("audit config: Grace: %s is negative", c.Grace)
	}
	if c.StuckAfter < 0 {
		return fmt.Errorf("audit config: StuckAfter: %s is negative", c.StuckAfter)
	}
	if c.Batch < 1 || c.Batch > 10000 {
		return fmt.Errorf("audit config: Batch: %d is outside 1..10000", c.Batch)
	}
	if c.Intent != "" {
		if err := events.ValidateIntentID(c.Intent); err != nil {
			return fmt.Errorf("audit config: Intent: %w", err)
		}
	}
	return nil
}

// Audit replays the whole stream, as it stands when Audit is called, with
// an ordered consumer, folds every intent with the fsm and checks what the
// log can prove:
//
//   - every event is a legal transition (fsm table and guards);
//   - at most one distinct external id is reported written or confirmed per
//     intent (WriteSucceeded, WriteConfirmed, a CandidateFound that passed
//     readback, ReadbackPassed, OperatorConfirmed);
//   - every attempt after the first follows a won claim (a RetryClaimed
//     whose owner is the attempt's claim_owner, inside its lease) or an
//     OperatorReleased;
//   - every write outcome follows the WriteStarted of its attempt;
//   - no intent is stuck: write_started past the attempt deadline + Grace,
//     retry_claimed or reconciling past the lease + Grace, unknown or
//     in_progress whose next check (or, without one, its last event) is
//     older than StuckAfter;
//   - no event (body or headers) holds something that looks like a
//     credential; settle's own idempotency keys (sk_ + 32 base32) are not;
//   - every event is on its intent's subject and carries its id as
//     Nats-Msg-Id;
//   - with a Projection, its view of every intent equals
//     projector.FoldView of the intent's history up to the projection's
//     checkpoint.
//
// The invariants are checked on the events as logged, independently of the
// fsm, so a history the fsm refuses is still checked for them. Events of
// an unknown schema or type are counted and listed, never a crash; an
// intent's later events are then not checked (the unreadable one may be
// what made them legal). Violations are sorted by intent, version, kind.
// An error means the audit itself could not run (stream, consumer,
// projection unreadable).
func Audit(ctx context.Context, js jetstream.JetStream, cfg AuditConfig) (*AuditReport, error) {
	a, err := audit(ctx, js, cfg, true)
	if err != nil {
		return nil, err
	}
	return a.rep, nil
}

// audit runs the audit; evict lets it drop confirmed intents from memory
// (audit_fast.go).
func audit(ctx context.Context, js jetstream.JetStream, cfg AuditConfig, evict bool) (*auditor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if js == nil {
		return nil, errors.New("audit: JetStream is nil")
	}
	stream, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("audit: stream %s: %w", cfg.Stream, err)
	}
	a := &auditor{cfg: cfg, intents: map[string]*auditIntent{}, stream: stream, rep: &AuditReport{
		Stream: cfg.Stream, At: cfg.Now().UTC(), States: map[fsm.State]int{}, Violations: []Violation{}, Intent: cfg.Intent,
	}}
	if cfg.Projection != nil {
		cp, err := cfg.Projection.Checkpoint(ctx)
		if err != nil {
			return nil, fmt.Errorf("audit: projection: %w", err)
		}
		a.cpStart = cp
		a.rep.Projection = &ProjectionReport{Checkpoint: cp}
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: stream %s info: %w", cfg.Stream, err)
	}
	a.total = info.State.Msgs
	a.rep.LastSeq = info.State.LastSeq
	if evict {
		a.evictable(info.State.Msgs)
	}
	if info.State.Msgs > 0 {
		if err := a.replay(ctx, js, info.State.LastSeq); err != nil {
			return nil, err
		}
	}
	if cfg.Progress != nil && a.lastProgress != a.rep.Events {
		cfg.Progress(a.rep.Events, a.total)
	}
	if err := a.checkLoss(ctx); err != nil {
		return nil, err
	}
	if err := a.finish(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

type auditor struct {
	cfg          AuditConfig
	rep          *AuditReport
	intents      map[string]*auditIntent
	stream       jetstream.Stream
	evict        evictState // audit_fast.go
	total        uint64
	lastProgress uint64
	cpStart      uint64
	loss         lossState // audit_loss.go
}

// auditIntent is what the audit keeps of one intent.
type auditIntent struct {
	id    string
	route string
	// fold holds the events the fsm accepted, each applied in log order and
	// refused ones skipped: the way the projector folds.
	fold        *fsm.Intent
	lastApplied uint64
	// hist and seqs are the applied events (kept only for the projection
	// check); final is the view of a terminal intent once hist is dropped.
	hist  []events.Event
	seqs  []uint64
	final *projector.IntentView
	// blocked: an unreadable event was met; later events are not checked.
	blocked bool
	// seen is the highest version met on the log and seenSeq its
	// sequence (audit_loss.go).
	seen, seenSeq uint64
	// refused is the index in Violations of the first fsm refusal; later
	// refusals of the intent are counted in moreRefused instead.
	refused     int
	moreRefused int
	// Invariant trackers over the events as logged.
	started  map[string]bool
	writes   int
	claim    *fsm.Claim
	released bool
	ids      []string
	pending  string // external id awaiting readback
}

func (a *auditor) violate(v Violation) int {
	a.rep.Violations = append(a.rep.Violations, v)
	return len(a.rep.Violations) - 1
}

func (a *auditor) intent(id, route string) *auditIntent {
	t, ok := a.intents[id]
	if !ok {
		t = &auditIntent{id: id, route: route, fold: &fsm.Intent{State: fsm.None}, refused: -1, started: map[string]bool{}}
		a.intents[id] = t
	}
	return t
}

// event audits one stream message.
func (a *auditor) event(seq uint64, subject string, hdr nats.Header, data []byte) {
	m := prepareMsg(seq, subject, hdr, data)
	a.apply(&m)
}

// apply audits one prepared message, in log order.
func (a *auditor) apply(m *preparedMsg) {
	seq, subject, hdr, data := m.seq, m.subject, m.hdr, m.data
	route, subjID, subjErr := m.route, m.subjID, m.subjErr
	e, decErr, hits := m.e, m.decErr, m.hits
	a.noteSeq(seq)
	a.rep.Events++
	if len(hits) > 0 {
		var version uint64
		typ := events.Type("unreadable")
		if decErr == nil {
			version, typ = e.Version, e.Type
		}
		var what []string
		for _, h := range hits {
			switch h.offset {
			case hitInHeader:
				what = append(what, h.name+" in header "+h.header)
			case hitUnescaped:
				what = append(what, h.name+" in an escaped string")
			default:
				what = append(what, fmt.Sprintf("%s at byte %d", h.name, h.offset))
			}
		}
		a.violate(Violation{IntentID: subjID, Kind: ViolationSecret, Version: version, Seq: seq,
			Detail: fmt.Sprintf("%s event holds what looks like %s (value not shown)", typ, strings.Join(slices.Compact(what), ", "))})
	}
	if subjErr != nil {
		a.violate(Violation{Kind: ViolationSubjectMismatch, Seq: seq,
			Detail: fmt.Sprintf("message on %q, not settle.intents.<route>.<intent_id>: %v", clipText(subject), subjErr)})
		return
	}
	t := a.restored(subjID, seq)
	if t == nil {
		t = a.intent(subjID, route)
	}
	var tl *TimelineEntry
	if a.cfg.Intent == subjID {
		a.rep.Timeline = append(a.rep.Timeline, TimelineEntry{Seq: seq})
		tl = &a.rep.Timeline[len(a.rep.Timeline)-1]
	}
	if decErr != nil {
		code, reason := classifyUnreadable(data, decErr)
		a.rep.Unreadable = append(a.rep.Unreadable, UnreadableEvent{Seq: seq, Subject: subject, IntentID: subjID, Code: code, Reason: reason})
		switch code {
		case projector.QuarantineUnknownSchema:
			a.rep.UnknownSchema++
		case projector.QuarantineUnknownType:
			a.rep.UnknownType++
		default:
			a.rep.Malformed++
			a.violate(Violation{IntentID: subjID, Kind: ViolationMalformedEvent, Seq: seq, Detail: reason})
		}
		if !t.blocked {
			t.blocked = true
			a.rep.Incomplete++
		}
		if tl != nil {
			tl.Refused = code + ": " + reason
		}
		return
	}
	if tl != nil {
		tl.Version, tl.Type, tl.At, tl.Actor, tl.AttemptID = e.Version, e.Type, e.At, e.Actor, e.AttemptID
		tl.Detail = summarize(e)
	}
	if id := hdr.Get(jetstream.MsgIDHeader); id != "" && id != e.EventID {
		a.violate(Violation{IntentID: subjID, Kind: ViolationMsgIDMismatch, Version: e.Version, Seq: seq,
			Detail: fmt.Sprintf("Nats-Msg-Id %q, event id %q", clipText(id), e.EventID)})
	}
	refuse := func(why string) {
		if tl != nil {
			tl.Refused = why
		}
	}
	if e.IntentID != subjID {
		a.violate(Violation{IntentID: subjID, Kind: ViolationSubjectMismatch, Version: e.Version, Seq: seq,
			Detail: fmt.Sprintf("%s of intent %s on the subject of %s", e.Type, e.IntentID, subjID)})
		refuse("subject_mismatch")
		return
	}
	recRoute := t.fold.Recorded.Route
	if d, ok := e.Data.(*events.IntentRecordedData); ok {
		recRoute = d.Route
	}
	if recRoute != "" && recRoute != route {
		a.violate(Violation{IntentID: subjID, Kind: ViolationSubjectMismatch, Version: e.Version, Seq: seq,
			Detail: fmt.Sprintf("%s on a %q subject; the intent is recorded on route %q", e.Type, route, recRoute)})
		refuse("route_mismatch")
		return
	}
	a.checkVersion(t, e.Version, seq)
	if !t.blocked {
		a.checkInvariants(t, e, seq)
	}
	if err := t.fold.Apply(e); err != nil {
		if !t.blocked {
			if t.refused < 0 {
				t.refused = a.violate(Violation{IntentID: subjID, Kind: fsmKind(err), Version: e.Version, Seq: seq, Detail: err.Error()})
			} else {
				t.moreRefused++
			}
		}
		refuse(fsmKind(err) + ": " + err.Error())
		return
	}
	t.fold.Recorded.Payload = nil // not needed to fold on; events keep it
	t.lastApplied = seq
	if tl != nil {
		tl.State = t.fold.State
	}
	a.maybeEvict(t)
	if a.cfg.Projection != nil {
		t.hist = append(t.hist, e)
		t.seqs = append(t.seqs, seq)
		if t.fold.State.Terminal() && seq <= a.cpStart {
			// Nothing folds after a terminal state and the projection is
			// past it: keep the view, drop the history.
			if v, err := projector.FoldView(t.hist); err == nil {
				v.LastSeq = seq
				t.final, t.hist, t.seqs = v, nil, nil
			}
		}
	}
}

// checkInvariants checks e against the invariants the fsm also guards,
// on the events as logged (whether or not the fsm accepts them).
func (a *auditor) checkInvariants(t *auditIntent, e events.Event, seq uint64) {
	v := func(kind, detail string) {
		a.violate(Violation{IntentID: t.id, Kind: kind, Version: e.Version, Seq: seq, Detail: detail})
	}
	addID := func(id string, how events.Type) {
		if id == "" || slices.Contains(t.ids, id) {
			return
		}
		t.ids = append(t.ids, id)
		if len(t.ids) > 1 {
			v(ViolationTwoExternalIDs, fmt.Sprintf("%s names external id %q; the intent already has %s",
				how, clipText(id), quoteAll(t.ids[:len(t.ids)-1])))
		}
	}
	switch d := e.Data.(type) {
	case *events.WriteStartedData:
		n := max(d.Attempt, t.writes+1)
		if n > 1 || t.writes > 0 {
			switch {
			case t.released:
			case t.claim == nil:
				v(ViolationRetryWithoutClaim, fmt.Sprintf("attempt %d (%s) with no claim and no operator release", d.Attempt, e.AttemptID))
			case t.claim.Owner != d.ClaimOwner:
				v(ViolationRetryWithoutClaim, fmt.Sprintf("attempt %d by claim owner %q; the claim was won by %q", d.Attempt, d.ClaimOwner, t.claim.Owner))
			case t.claim.Attempt != d.Attempt:
				v(ViolationRetryWithoutClaim, fmt.Sprintf("attempt %d under a claim for attempt %d", d.Attempt, t.claim.Attempt))
			case e.At.After(t.claim.LeaseUntil):
				v(ViolationRetryWithoutClaim, fmt.Sprintf("attempt %d started at %s, after the claim's lease ended at %s",
					d.Attempt, e.At.UTC().Format(time.RFC3339), t.claim.LeaseUntil.UTC().Format(time.RFC3339)))
			}
		}
		t.claim, t.released = nil, false
		t.writes++
		t.started[e.AttemptID] = true
	case *events.WriteSucceededData, *events.WriteConfirmedData, *events.WriteRejectedData, *events.OutcomeUnknownData:
		if !t.started[e.AttemptID] {
			att := e.AttemptID
			if att == "" {
				att = "(none)"
			}
			v(ViolationOutcomeWithoutWriteStarted, fmt.Sprintf("%s for attempt %s, which has no WriteStarted before it", e.Type, att))
		}
		switch d := d.(type) {
		case *events.WriteSucceededData:
			addID(d.ExternalID, e.Type)
			t.pending = d.ExternalID
		case *events.WriteConfirmedData:
			addID(d.Receipt.ExternalID, e.Type)
		}
	case *events.CandidateFoundData:
		t.pending = d.ExternalID
	case *events.ReadbackPassedData:
		addID(t.pending, events.CandidateFound)
		addID(d.Receipt.ExternalID, e.Type)
		t.pending = ""
	case *events.ReadbackFailedData, *events.CheckDeferredData:
		t.pending = ""
	case *events.OperatorConfirmedData:
		addID(d.Receipt.ExternalID, e.Type)
	case *events.RetryClaimedData:
		t.claim = &fsm.Claim{Owner: d.Owner, LeaseUntil: d.LeaseUntil, Attempt: d.Attempt}
	case *events.ClaimExpiredData, *events.ManualActionRequiredData:
		t.claim = nil
	case *events.OperatorReleasedData:
		t.released = true
	}
}

func (a *auditor) finish(ctx context.Context) error {
	ids := make([]string, 0, len(a.intents))
	for id := range a.intents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	now := a.rep.At
	grace, stuckAfter := a.cfg.Grace, a.cfg.StuckAfter
	if a.evict.count > 0 {
		a.rep.States[fsm.Confirmed] += a.evict.count
	}
	for _, id := range ids {
		t := a.intents[id]
		a.rep.States[t.fold.State]++
		if t.refused >= 0 && t.moreRefused > 0 {
			a.rep.Violations[t.refused].Detail += fmt.Sprintf(" (%d later event(s) of the intent not folded after it)", t.moreRefused)
		}
		if t.blocked {
			continue
		}
		stuck := func(detail string) {
			a.violate(Violation{IntentID: id, Kind: ViolationStuck, Version: t.fold.Version, Seq: t.lastApplied, Detail: detail})
		}
		i := t.fold
		switch i.State {
		case fsm.WriteStarted:
			if at := i.LastAttempt(); at != nil && now.After(at.Deadline.Add(grace)) {
				stuck(fmt.Sprintf("write_started: attempt %s deadline %s passed %s ago (grace %s)",
					at.ID, fmtT(at.Deadline), now.Sub(at.Deadline).Round(time.Second), grace))
			}
		case fsm.RetryClaimed:
			if i.Claim != nil && now.After(i.Claim.LeaseUntil.Add(grace)) {
				stuck(fmt.Sprintf("retry_claimed: %q's lease ended %s, %s ago (grace %s)",
					i.Claim.Owner, fmtT(i.Claim.LeaseUntil), now.Sub(i.Claim.LeaseUntil).Round(time.Second), grace))
			}
		case fsm.Reconciling:
			if now.After(i.LeaseUntil.Add(grace)) {
				stuck(fmt.Sprintf("reconciling: %q's lease ended %s, %s ago (grace %s)",
					i.LeaseOwner, fmtT(i.LeaseUntil), now.Sub(i.LeaseUntil).Round(time.Second), grace))
			}
		case fsm.Unknown, fsm.InProgress:
			due, what := i.NextCheckAt, "next check"
			if due.IsZero() {
				due, what = i.UpdatedAt, "last event (no next check)"
			}
			if now.Sub(due) > stuckAfter {
				stuck(fmt.Sprintf("%s: %s at %s is %s old (limit %s)", i.State, what, fmtT(due), now.Sub(due).Round(time.Second), stuckAfter))
			}
		}
	}
	if a.cfg.Projection != nil {
		if err := a.checkProjection(ctx, ids); err != nil {
			return err
		}
	}
	sort.SliceStable(a.rep.Violations, func(x, y int) bool {
		p, q := a.rep.Violations[x], a.rep.Violations[y]
		if p.IntentID != q.IntentID {
			return p.IntentID < q.IntentID
		}
		if p.Version != q.Version {
			return p.Version < q.Version
		}
		return p.Kind < q.Kind
	})
	a.rep.Intents = len(a.intents) + a.evict.count
	if len(a.rep.Violations) > 0 {
		a.rep.ByKind = map[string]int{}
		for _, v := range a.rep.Violations {
			a.rep.ByKind[v.Kind]++
		}
	}
	return nil
}

// checkProjection compares each intent's projected view with the fold of
// its applied events up to the projection's checkpoint (or further, up to
// the view's own last sequence, when the projector moved on during the
// audit).
func (a *auditor) checkProjection(ctx context.Context, ids []string) error {
	p := a.cfg.Projection
	pr := a.rep.Projection
	expected := 0
	for _, id := range ids {
		t := a.intents[id]
		got, err := p.Get(ctx, id)
		if errors.Is(err, projector.ErrNotFound) {
			got, err = nil, nil
		}
		if err != nil {
			return fmt.Errorf("audit: projection: %w", err)
		}
		want := t.view(a.cpStart)
		if want != nil {
			expected++
		}
		bound := a.cpStart
		if got != nil && got.LastSeq > bound {
			// The projector moved on during the audit: compare with the log
			// as far as the view goes.
			bound = got.LastSeq
			if bound > a.rep.LastSeq {
				pr.Skipped++
				continue
			}
			want = t.view(bound)
		}
		pr.Compared++
		mismatch := func(detail string) {
			var version uint64
			if want != nil {
				version = want.Version
			}
			a.violate(Violation{IntentID: id, Kind: ViolationProjectionMismatch, Version: version, Detail: detail})
		}
		switch {
		case want == nil && got == nil:
		case want == nil:
			mismatch(fmt.Sprintf("projected (state %s, last seq %d) but no event of it folds at or below seq %d", got.State, got.LastSeq, bound))
		case got == nil:
			mismatch(fmt.Sprintf("missing from the projection (checkpoint %d); the log folds it to %s at seq %d", a.cpStart, want.State, want.LastSeq))
		default:
			if diffs := diffViews(want, got); len(diffs) > 0 {
				mismatch("fields differ: " + strings.Join(diffs, "; "))
			}
		}
	}
	if sc, ok := p.(stateCounter); ok {
		cp, err := p.Checkpoint(ctx)
		if err != nil {
			return fmt.Errorf("audit: projection: %w", err)
		}
		if cp == a.cpStart {
			counts, err := sc.CountByState(ctx)
			if err != nil {
				return fmt.Errorf("audit: projection: %w", err)
			}
			n := 0
			for _, c := range counts {
				n += c
			}
			if n != expected {
				a.violate(Violation{Kind: ViolationProjectionMismatch,
					Detail: fmt.Sprintf("the projection holds %d intents; the log folds %d at checkpoint %d", n, expected, cp)})
			}
		}
	}
	return nil
}

// view is the reference view of the intent folded from its applied events
// at or below seq bound; nil when none.
func (t *auditIntent) view(bound uint64) *projector.IntentView {
	if t.final != nil {
		if t.final.LastSeq <= bound {
			return t.final
		}
		return nil // only dropped when ≤ the checkpoint, so not reached
	}
	n := sort.Search(len(t.seqs), func(k int) bool { return t.seqs[k] > bound })
	if n == 0 {
		return nil
	}
	v, err := projector.FoldView(t.hist[:n])
	if err != nil {
		return nil // cannot happen: every kept event folded
	}
	v.LastSeq = t.seqs[n-1]
	return v
}

// diffViews names every field of IntentView whose value differs, as
// "json_name: projection X, log Y".
func diffViews(want, got *projector.IntentView) []string {
	var out []string
	wv, gv := reflect.ValueOf(*want), reflect.ValueOf(*got)
	typ := wv.Type()
	for k := 0; k < typ.NumField(); k++ {
		f := typ.Field(k)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		wj, err1 := json.Marshal(wv.Field(k).Interface())
		gj, err2 := json.Marshal(gv.Field(k).Interface())
		if err1 != nil || err2 != nil {
			if !reflect.DeepEqual(wv.Field(k).Interface(), gv.Field(k).Interface()) {
				out = append(out, name)
			}
			continue
		}
		if string(wj) != string(gj) {
			out = append(out, fmt.Sprintf("%s: projection %s, log %s", name, clipText(redact(string(gj))), clipText(redact(string(wj)))))
		}
	}
	return out
}

func fsmKind(err error) string {
	switch {
	case errors.Is(err, fsm.ErrIllegalTransition):
		return ViolationIllegalTransition
	case errors.Is(err, fsm.ErrGuard):
		return ViolationGuardRefused
	default:
		return ViolationBadHistory
	}
}

// classifyUnreadable maps a decode error to the projector's quarantine
// code and a safe reason. The strict decoder refuses a future envelope
// with new fields as malformed before it looks at the schema; a lenient
// look at "schema" tells such an event from a broken one.
func classifyUnreadable(raw []byte, err error) (code, reason string) {
	if errors.Is(err, events.ErrMalformed) {
		var peek struct {
			Schema string `json:"schema"`
		}
		if json.Unmarshal(raw, &peek) == nil && peek.Schema != "" && peek.Schema != events.SchemaV1 {
			return projector.QuarantineUnknownSchema, redact(fmt.Sprintf("schema %q (this version reads %s)", clipText(peek.Schema), events.SchemaV1))
		}
	}
	return decodeCode(err), redact(err.Error())
}

// decodeCode maps a decode error to the projector's quarantine code.
func decodeCode(err error) string {
	switch {
	case errors.Is(err, events.ErrUnknownSchema):
		return projector.QuarantineUnknownSchema
	case errors.Is(err, events.ErrUnknownType):
		return projector.QuarantineUnknownType
	case errors.Is(err, events.ErrMissingField):
		return projector.QuarantineMissingField
	case errors.Is(err, events.ErrBadID):
		return projector.QuarantineBadID
	case errors.Is(err, events.ErrInvalidField):
		return projector.QuarantineInvalidField
	default:
		return projector.QuarantineMalformed
	}
}

// --- secrets ---

// secretPattern is one shape of credential. A pattern with a capture
// group names the secret value in it; a value that is one of settle's own
// idempotency keys is not a secret.
type secretPattern struct {
	name string
	re   *regexp.Regexp
	// hints: the pattern can only match text whose lower-case form holds
	// one of these (every match contains one); the regexp runs only then
	// (most events hold none).
	hints []string
}

var secretPatterns = []secretPattern{
	{"an Authorization header", regexp.MustCompile(`(?i)\b(?:proxy-)?authorization\\?"?\s*[:=]`), []string{"authorization"}},
	{"a bearer token", regexp.MustCompile(`(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{8,}=*)`), []string{"bearer"}},
	{"a Stripe key", regexp.MustCompile(`\b[sr]k_(?:live|test)_[0-9A-Za-z]{8,}`), []string{"k_live_", "k_test_"}},
	{"a GitHub token", regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`), []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}},
	{"a Slack token", regexp.MustCompile(`\bxox[bpars]-[A-Za-z0-9-]{10,}`), []string{"xox"}},
	{"an AWS access key id", regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), []string{"akia", "asia"}},
	{"a private key", regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----`), []string{"private key"}},
	{"a password", regexp.MustCompile(`(?i)\bpass(?:word|wd)?\\?"\s*:\s*\\?"([^"\\]+)`), []string{`pass"`, `pass\`, "password", "passwd"}},
	{"an API key", regexp.MustCompile(`(?i)\b(?:x-)?api[_-]?key\\?"?\s*[:=]\s*\\?"?([A-Za-z0-9\-._~+/=]{8,})`), []string{"api_key", "api-key", "apikey"}},
	{"a token", regexp.MustCompile(`(?i)(?:\b|_)(?:access_|auth_|refresh_|id_)?token\\?"\s*:\s*\\?"([A-Za-z0-9\-._~+/=]{16,})`), []string{`token"`, `token\`}},
	{"a client secret", regexp.MustCompile(`(?i)\b(?:client_secret|secret_key|api_secret)\\?"\s*:\s*\\?"([^"\\]{8,})`), []string{"client_secret", "secret_key", "api_secret"}},
}

func hinted(lower string, hints []string) bool {
	for _, h := range hints {
		if strings.Contains(lower, h) {
			return true
		}
	}
	return false
}

// settleKey is the shape of settle's idempotency keys: not a secret.
var settleKey = regexp.MustCompile(`^sk_[a-z2-7]{32}$`)

type secretHit struct {
	name   string
	offset int    // byte offset in the scanned text, or hitUnescaped, hitInHeader
	header string // the header's name (hitInHeader)
}

const (
	hitUnescaped = -1 // found in a JSON string after resolving its escapes
	hitInHeader  = -2 // found in a message header
)

// scanSecrets looks for credential-shaped text in b (an event's raw JSON
// or a header line). Strings with \u escapes are also scanned unescaped,
// so an escaped secret is still found.
func scanSecrets(b []byte) []secretHit {
	var hits []secretHit
	if mask := hintMask(b); mask != 0 {
		hits = scanMasked(string(b), 0, mask)
	}
	if bytes.Contains(b, []byte(`\u`)) {
		var v any
		if json.Unmarshal(b, &v) == nil {
			walkStrings(v, func(s string) {
				for _, h := range scanText(s, 0) {
					h.offset = hitUnescaped
					hits = append(hits, h)
				}
			})
		}
	}
	return hits
}

func scanText(s string, base int) []secretHit {
	return scanMasked(s, base, hintMask(s))
}

// scanMasked runs the patterns of mask (bit i: secretPatterns[i] is
// hinted in s) over s.
func scanMasked(s string, base int, mask uint64) []secretHit {
	var hits []secretHit
	for i, p := range secretPatterns {
		if mask&(1<<i) == 0 {
			continue
		}
		for _, m := range p.re.FindAllStringSubmatchIndex(s, -1) {
			if len(m) >= 4 && m[2] >= 0 && settleKey.MatchString(s[m[2]:m[3]]) {
				continue
			}
			hits = append(hits, secretHit{name: p.name, offset: base + m[0]})
			break
		}
	}
	return hits
}

func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	case map[string]any:
		for k, e := range x {
			f(k)
			walkStrings(e, f)
		}
	}
}

// redact replaces anything that looks like a secret with [redacted]: the
// whole word it is part of, up to the next delimiter on either side, so
// that no head or tail of a token the pattern did not cover (after an
// underscore, say) is left standing.
func redact(s string) string {
	for _, p := range secretPatterns {
		for from := 0; from < len(s); {
			m := p.re.FindStringSubmatchIndex(s[from:])
			if m == nil {
				break
			}
			i, j := from+m[0], from+m[1]
			if len(m) >= 4 && m[2] >= 0 && settleKey.MatchString(s[from+m[2]:from+m[3]]) {
				from = j
				continue
			}
			for i > 0 && !redactStop(s[i-1]) {
				i--
			}
			for j < len(s) && !redactStop(s[j]) {
				j++
			}
			s = s[:i] + "[redacted]" + s[j:]
			from = i + len("[redacted]")
		}
	}
	return s
}

// redactStop: a byte that ends a token-like word (white space, quotes,
// JSON and list punctuation).
func redactStop(c byte) bool {
	return strings.IndexByte(" \t\r\n\"'`\\,;{}[]()<>", c) >= 0
}

// --- timeline ---

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
