package reconcile

import (
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// Held intents. After an operator accepted that the log lost events
// (serve --accept-log-loss), the intents that lost some are held: the
// log's hold marker on the intent's subject says so to every process
// (ledger.History.Hold), Config.Hold to this one. Their history on the
// log may be older than what happened — a WriteStarted gone makes an
// intent that was written look recorded — so no reconciler may write for
// them again. Each is handed to a human (ManualActionRequired,
// log_events_lost) as soon as its state allows it; until then it is
// stepped as usual except that a write is never taken. The rule is
// fsm's (fsm.LossHeld, fsm.LossHandoff). A held intent whose history
// cannot be folded is left for an operator (and the audit names it).

// lossHeld reports whether i (folded from h) is held and not handed off.
func (r *Reconciler) lossHeld(h *ledger.History, i *fsm.Intent) bool {
	_, told := r.cfg.Hold[i.ID]
	return fsm.LossHeld(told || h.Hold != nil, h.Events)
}

// holdEvent is the hand-off of a held intent, when its state allows one
// and it has not been handed off for this reason before.
func (r *Reconciler) holdEvent(h *ledger.History, i *fsm.Intent) (events.Data, bool) {
	if !r.lossHeld(h, i) {
		return nil, false
	}
	d, ok := fsm.LossHandoff(i, fsm.LossMessage(h.Hold, r.cfg.Hold[i.ID]))
	return d, ok // d is used only when ok
}
