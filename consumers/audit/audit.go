package audit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
)

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
	// acknowledged event the log lost (loss.go).
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
	c.Stream = cmp.Or(c.Stream, d.Stream)
	if c.Now == nil {
		c.Now = d.Now
	}
	c.Grace = cmp.Or(c.Grace, d.Grace)
	c.StuckAfter = cmp.Or(c.StuckAfter, d.StuckAfter)
	c.ProgressEvery = cmp.Or(c.ProgressEvery, d.ProgressEvery)
	c.Batch = cmp.Or(c.Batch, d.Batch)
	return c
}

// Validate checks the config (after defaults); errors name the field.
func (c AuditConfig) Validate() error {
	if c.Stream == "" || strings.ContainsAny(c.Stream, ".*> \t\r\n") {
		return errors.Errorf("audit config: Stream: %q is not a stream name", c.Stream)
	}
	if c.Grace < 0 {
		return errors.Errorf("audit config: Grace: %s is negative", c.Grace)
	}
	if c.StuckAfter < 0 {
		return errors.Errorf("audit config: StuckAfter: %s is negative", c.StuckAfter)
	}
	if c.Batch < 1 || c.Batch > 10000 {
		return errors.Errorf("audit config: Batch: %d is outside 1..10000", c.Batch)
	}
	if c.Intent != "" {
		if err := events.ValidateIntentID(c.Intent); err != nil {
			return errors.Errorf("audit config: Intent: %w", err)
		}
	}
	return nil
}

// Audit replays the whole stream, as it stands when Audit is called, folds
// every intent with the fsm and checks the invariants the package doc
// lists: on the events as logged, independently of the fsm, so a history
// the fsm refuses is still checked (two external ids count the ids
// reported written or confirmed, a CandidateFound only once read back;
// settle's own idempotency keys, sk_ + 32 base32, are no secret). Events
// of an unknown schema or type are counted and listed, never a crash; an
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
// (replay.go).
func audit(ctx context.Context, js jetstream.JetStream, cfg AuditConfig, evict bool) (*auditor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	stream, err := ledger.CheckedStream(ctx, js, cfg.Stream, "audit")
	if err != nil {
		return nil, err
	}
	a := &auditor{cfg: cfg, intents: map[string]*auditIntent{}, stream: stream, rep: &AuditReport{
		Stream: cfg.Stream, At: cfg.Now().UTC(), States: map[fsm.State]int{}, Violations: []Violation{}, Intent: cfg.Intent,
	}}
	if cfg.Projection != nil {
		cp, err := cfg.Projection.Checkpoint(ctx)
		if err != nil {
			return nil, errors.Errorf("audit: projection: %w", err)
		}
		a.cpStart = cp
		a.rep.Projection = &ProjectionReport{Checkpoint: cp}
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, errors.Errorf("audit: stream %s info: %w", cfg.Stream, err)
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
	loss         lossState // loss.go
	// excused are indexes in Violations a hold marker explained (held.go).
	excused map[int]bool
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
	// sequence (loss.go).
	seen, seenSeq uint64
	// refused is the index in Violations of the first fsm refusal; later
	// refusals of the intent are counted in moreRefused instead.
	refused     int
	moreRefused int
	// hold is the intent's hold marker (held.go), holdSeq its sequence;
	// lossHandedOff and lossReleased: a hand-off for the loss followed it,
	// and an operator release after that (the operator lifted the hold).
	hold                        *events.Hold
	holdSeq                     uint64
	lossHandedOff, lossReleased bool
	// acceptedGap: the intent's versions skip over an accepted loss;
	// unfolded counts its events the fold refused.
	acceptedGap bool
	unfolded    int
	// vidx are the indexes in Violations of the intent's violations.
	vidx []int
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
	idx := len(a.rep.Violations) - 1
	if t := a.intents[v.IntentID]; t != nil && v.IntentID != "" {
		t.vidx = append(t.vidx, idx)
	}
	return idx
}

func (a *auditor) intent(id, route string) *auditIntent {
	t, ok := a.intents[id]
	if !ok {
		t = &auditIntent{id: id, route: route, fold: &fsm.Intent{State: fsm.None}, refused: -1, started: map[string]bool{}}
		a.intents[id] = t
	}
	return t
}

// apply audits one prepared message, in log order.
func (a *auditor) apply(m *preparedMsg) {
	seq, subject, subjID, subjErr := m.seq, m.subject, m.subjID, m.subjErr
	a.noteSeq(seq)
	a.rep.Events++
	if m.hold != nil && subjErr == nil {
		a.held(m)
		return
	}
	if len(m.hits) > 0 {
		a.secretHits(m)
	}
	if subjErr != nil {
		a.violate(Violation{Kind: ViolationSubjectMismatch, Seq: seq,
			Detail: fmt.Sprintf("message on %q, not settle.intents.<route>.<intent_id>: %v", clipText(subject), subjErr)})
		return
	}
	t := a.restored(subjID, seq)
	if t == nil {
		t = a.intent(subjID, m.route)
	}
	var tl *TimelineEntry
	if a.cfg.Intent == subjID {
		a.rep.Timeline = append(a.rep.Timeline, TimelineEntry{Seq: seq})
		tl = &a.rep.Timeline[len(a.rep.Timeline)-1]
	}
	if m.decErr != nil {
		a.unreadable(m, t, tl)
		return
	}
	e := m.e
	if tl != nil {
		tl.Version, tl.Type, tl.At, tl.Actor, tl.AttemptID = e.Version, e.Type, e.At, e.Actor, e.AttemptID
		tl.Detail = summarize(e)
	}
	if refused := a.misplaced(m, t); refused != "" {
		if tl != nil {
			tl.Refused = refused
		}
		return
	}
	a.checkVersion(t, e.Version, seq)
	if d, ok := e.Data.(*events.ManualActionRequiredData); ok && d.Reason == events.ReasonLogEventsLost {
		t.lossHandedOff = true // wherever it stands: the log says a human has it
	}
	if t.hold != nil {
		a.afterHold(t, e, seq) // held.go
	}
	if !t.blocked {
		a.checkInvariants(t, e, seq)
	}
	if err := t.fold.Apply(e); err != nil {
		t.unfolded++
		if !t.blocked {
			if t.refused < 0 {
				t.refused = a.violate(Violation{IntentID: subjID, Kind: fsm.FoldCode(err), Version: e.Version, Seq: seq, Detail: err.Error()})
			} else {
				t.moreRefused++
			}
		}
		if tl != nil {
			tl.Refused = fsm.FoldCode(err) + ": " + err.Error()
		}
		return
	}
	t.fold.Recorded.Payload = nil // not needed to fold on; events keep it
	t.lastApplied = seq
	if tl != nil {
		tl.State = t.fold.State
	}
	a.maybeEvict(t)
	if a.cfg.Projection != nil {
		a.keepHistory(t, e, seq)
	}
}

// secretHits reports what looks like a secret in the message.
func (a *auditor) secretHits(m *preparedMsg) {
	var version uint64
	typ := events.Type("unreadable")
	if m.decErr == nil {
		version, typ = m.e.Version, m.e.Type
	}
	var what []string
	for _, h := range m.hits {
		switch h.offset {
		case hitInHeader:
			what = append(what, h.name+" in header "+h.header)
		case hitUnescaped:
			what = append(what, h.name+" in an escaped string")
		default:
			what = append(what, fmt.Sprintf("%s at byte %d", h.name, h.offset))
		}
	}
	a.violate(Violation{IntentID: m.subjID, Kind: ViolationSecret, Version: version, Seq: m.seq,
		Detail: fmt.Sprintf("%s event holds what looks like %s (value not shown)", typ, strings.Join(slices.Compact(what), ", "))})
}

// unreadable counts an event that does not decode and blocks its intent.
func (a *auditor) unreadable(m *preparedMsg, t *auditIntent, tl *TimelineEntry) {
	code, reason := classifyUnreadable(m.data, m.decErr)
	a.rep.Unreadable = append(a.rep.Unreadable, UnreadableEvent{Seq: m.seq, Subject: m.subject, IntentID: m.subjID, Code: code, Reason: reason})
	switch code {
	case events.CodeUnknownSchema:
		a.rep.UnknownSchema++
	case events.CodeUnknownType:
		a.rep.UnknownType++
	default:
		a.rep.Malformed++
		a.violate(Violation{IntentID: m.subjID, Kind: ViolationMalformedEvent, Seq: m.seq, Detail: reason})
	}
	if !t.blocked {
		t.blocked = true
		a.rep.Incomplete++
	}
	if tl != nil {
		tl.Refused = code + ": " + reason
	}
}

// misplaced checks the event against its message id, subject and route;
// it returns why the event is not folded ("" when it is in its place).
func (a *auditor) misplaced(m *preparedMsg, t *auditIntent) string {
	e, seq, subjID := m.e, m.seq, m.subjID
	if id := m.hdr.Get(jetstream.MsgIDHeader); id != "" && id != e.EventID {
		a.violate(Violation{IntentID: subjID, Kind: ViolationMsgIDMismatch, Version: e.Version, Seq: seq,
			Detail: fmt.Sprintf("Nats-Msg-Id %q, event id %q", clipText(id), e.EventID)})
	}
	if e.IntentID != subjID {
		a.violate(Violation{IntentID: subjID, Kind: ViolationSubjectMismatch, Version: e.Version, Seq: seq,
			Detail: fmt.Sprintf("%s of intent %s on the subject of %s", e.Type, e.IntentID, subjID)})
		return "subject_mismatch"
	}
	recRoute := t.fold.Recorded.Route
	if d := events.Recorded(e); d != nil { // IntentRecorded or IntentStarted
		recRoute = d.Route
	}
	if recRoute != "" && recRoute != m.route {
		a.violate(Violation{IntentID: subjID, Kind: ViolationSubjectMismatch, Version: e.Version, Seq: seq,
			Detail: fmt.Sprintf("%s on a %q subject; the intent is recorded on route %q", e.Type, m.route, recRoute)})
		return "route_mismatch"
	}
	return ""
}

// keepHistory keeps the intent's folded events for the projection check.
func (a *auditor) keepHistory(t *auditIntent, e events.Event, seq uint64) {
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
