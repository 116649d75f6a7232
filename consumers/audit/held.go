package audit

import (
	"fmt"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
)

// Held intents (package doc): each carries the hold marker on its subject
// (events.Hold, written by serve when it accepted the loss) or its
// versions skip over an accepted range. They are findings, not
// violations: what a broken history seems to break (a version gap, an
// outcome whose WriteStarted is gone) is the loss itself. A write made
// for one after its marker is a violation (ViolationHeldWritten).

// ViolationHeldWritten: an intent held after an accepted log loss was
// recorded anew or written for after its hold marker.
const ViolationHeldWritten = "held_written"

// HeldIntent is one held intent: a finding, not a violation.
type HeldIntent struct {
	IntentID string `json:"intent_id"`
	// Marked: its subject carries the hold marker; otherwise only its
	// versions skip over an accepted loss.
	Marked bool `json:"marked"`
	// Folds: what the log holds of the intent folds, to State. Otherwise
	// Why says why not.
	Folds bool      `json:"folds"`
	State fsm.State `json:"state,omitempty"`
	Why   string    `json:"why,omitempty"`
	// HandedOff: a human has it (ManualActionRequired, log_events_lost).
	HandedOff bool `json:"handed_off"`
	// Lost names what it lost, as its marker says.
	Lost string `json:"lost,omitempty"`
}

// excusable are the violation kinds a loss produces by itself.
var excusable = map[string]bool{
	ViolationVersionGap: true, ViolationIllegalTransition: true, ViolationGuardRefused: true, ViolationBadHistory: true,
	ViolationOutcomeWithoutWriteStarted: true, ViolationRetryWithoutClaim: true,
}

// held audits a hold marker: the intent is held from here on, and what
// its history seemed to break before is the loss.
func (a *auditor) held(m *preparedMsg) {
	t := a.restored(m.subjID, m.seq)
	if t == nil {
		t = a.intent(m.subjID, m.route)
	}
	if a.cfg.Intent == m.subjID {
		a.rep.Timeline = append(a.rep.Timeline, TimelineEntry{Seq: m.seq, Type: "hold marker",
			Detail: clipLong(redact("held after an accepted log loss; lost: " + m.hold.Named()))})
	}
	if m.hold.IntentID != m.subjID {
		a.violate(Violation{IntentID: m.subjID, Kind: ViolationSubjectMismatch, Seq: m.seq,
			Detail: fmt.Sprintf("hold marker of intent %s on the subject of %s", m.hold.IntentID, m.subjID)})
		return
	}
	if t.hold == nil {
		t.hold, t.holdSeq = m.hold, m.seq
	}
	if a.excused == nil {
		a.excused = map[int]bool{}
	}
	for _, i := range t.vidx {
		if excusable[a.rep.Violations[i].Kind] {
			a.excused[i] = true
		}
	}
	if t.refused >= 0 && a.excused[t.refused] {
		t.refused = -1
	}
	t.blocked = true // the history is broken: its later events are checked for writes only
}

// afterHold checks an event of a held intent after its marker.
func (a *auditor) afterHold(t *auditIntent, e events.Event, seq uint64) {
	switch d := e.Data.(type) {
	case *events.ManualActionRequiredData:
		if d.Reason == events.ReasonLogEventsLost {
			t.lossHandedOff = true
		}
	case *events.OperatorReleasedData:
		t.lossReleased = t.lossReleased || t.lossHandedOff
	case *events.IntentRecordedData, *events.IntentStartedData:
		a.violate(Violation{IntentID: t.id, Kind: ViolationHeldWritten, Version: e.Version, Seq: seq,
			Detail: fmt.Sprintf("recorded anew after its hold marker (seq %d): the intent lost events in an accepted log loss and is never recorded or written again", t.holdSeq)})
	case *events.WriteStartedData:
		if !t.lossReleased {
			a.violate(Violation{IntentID: t.id, Kind: ViolationHeldWritten, Version: e.Version, Seq: seq,
				Detail: fmt.Sprintf("attempt %s started after its hold marker (seq %d) with no operator release after a hand-off", e.AttemptID, t.holdSeq)})
		}
	}
}

// heldFinding is t's finding, when it is held.
func heldFinding(t *auditIntent) (HeldIntent, bool) {
	if t.hold == nil && !t.acceptedGap {
		return HeldIntent{}, false
	}
	h := HeldIntent{IntentID: t.id, Marked: t.hold != nil, HandedOff: t.lossHandedOff || handedOff(t.fold)}
	if t.hold != nil {
		h.Lost = t.hold.Named()
	}
	switch {
	case t.fold.State == fsm.None:
		h.Why = "the log holds none of its events"
	case t.acceptedGap || t.unfolded > 0:
		h.Why = "its first events, or some in between, are gone"
	default:
		h.Folds, h.State = true, t.fold.State
	}
	return h, true
}

func handedOff(i *fsm.Intent) bool {
	return i.State == fsm.ManualAction && i.ManualReason == events.ReasonLogEventsLost
}
