package producer

import (
	"context"
	"fmt"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// Held intents. After an operator accepted that the log lost events, the
// intents that lost some are held: the hold marker on the intent's subject
// (ledger.MarkHeld) says so to every process, Config.Hold to this one.
// What a held intent's history shows may be older than what happened, so
// Execute never writes for it nor records it anew (see doc.go).

// Sentinel errors of held and unreadable histories.
var (
	// ErrIntentHeld: the intent lost events in a log loss an operator
	// accepted and what is left of it cannot be folded (or nothing is
	// left). Nothing was recorded or written; the error (*HeldError) names
	// the loss.
	ErrIntentHeld = errors.New("intent held after an accepted log loss")
	// ErrHistoryUnreadable: the log holds an event of the intent this
	// version cannot read, or a history the lifecycle refuses, with no
	// accepted loss to explain it. Nothing was recorded or written.
	ErrHistoryUnreadable = errors.New("the intent's history cannot be folded")
)

// HeldError is ErrIntentHeld or ErrHistoryUnreadable for one intent.
type HeldError struct {
	IntentID string
	// Hold is the intent's hold marker (nil when the log has none: only
	// this process was told, or the history is unreadable).
	Hold *events.Hold
	// Why the history cannot be folded.
	Why  string
	kind error
}

func (e *HeldError) Error() string {
	s := fmt.Sprintf("%s: %s: %s", e.IntentID, e.kind, e.Why)
	if e.Hold != nil {
		s += "; lost: " + e.Hold.Named()
	}
	return s
}

func (e *HeldError) Unwrap() error { return e.kind }

// unfoldable maps the error of a history that cannot be folded to
// ErrIntentHeld (a held intent) or ErrHistoryUnreadable; other errors are
// returned as they are.
func (p *Producer) unfoldable(intentID string, h *ledger.History, err error) error {
	held := errors.Is(err, ledger.ErrHistoryLost)
	if !held && !errors.Is(err, ledger.ErrCorruptHistory) {
		return err
	}
	_, told := p.cfg.Hold[intentID]
	he := &HeldError{IntentID: intentID, Why: safeWhy(err), kind: ErrHistoryUnreadable}
	if h != nil {
		he.Hold = h.Hold
	}
	if held || told {
		he.kind = ErrIntentHeld
	}
	return he
}

// safeWhy is the reason of a fold error without the ids and loss the
// HeldError names itself.
func safeWhy(err error) string {
	var te *fsm.TransitionError
	if errors.As(err, &te) {
		return te.Error()
	}
	var de *events.DecodeError
	if errors.As(err, &de) {
		return "an event cannot be read: " + de.Error()
	}
	if errors.Is(err, ledger.ErrHistoryLost) {
		return "its first events, or some in between, are gone from the log"
	}
	return "its events do not follow each other"
}

// heldUnrecorded is the error for a request whose intent this process was
// told is held and of which the log holds nothing (its marker could not
// be written): it is not recorded anew.
func (p *Producer) heldUnrecorded(id string) error {
	if _, ok := p.cfg.Hold[id]; ok {
		return &HeldError{IntentID: id, Why: "the log holds none of its events", kind: ErrIntentHeld}
	}
	return nil
}

// held reports whether intent (folded from h) is held and not handed to
// a human for its loss yet (fsm.LossHeld).
func (p *Producer) held(h *ledger.History, intent *fsm.Intent) bool {
	_, told := p.cfg.Hold[intent.ID]
	return fsm.LossHeld(told || h.Hold != nil, h.Events)
}

// handOffHeld answers a held intent: it is handed to a human for its loss
// when its state allows (the hand-off names the loss), and returned as the
// log holds it, with nothing written. ErrConflict: it moved meanwhile.
func (p *Producer) handOffHeld(ctx context.Context, h *ledger.History, intent *fsm.Intent) (*Result, error) {
	msg := fsm.LossMessage(h.Hold, p.cfg.Hold[intent.ID])
	if d, ok := fsm.LossHandoff(intent, msg); ok {
		if err := p.w.appendTo(ctx, h, intent, "", d); err != nil {
			return nil, err
		}
	}
	return p.result(h, intent, true), nil
}
