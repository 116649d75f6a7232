package reconcile

import (
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// Held intents. After an operator accepted that the log lost events
// (serve --accept-log-loss), the intents that lost some are held
// (Config.Hold): their history on the log may be older than what
// happened — a WriteStarted gone makes an intent that was written look
// recorded — so no reconciler may write for them again. Each is handed
// to a human (ManualActionRequired, log_events_lost) as soon as its state
// allows it; until then it is stepped as usual except that a write is
// never taken.

// holdEvent is the hand-off of a held intent, when its state allows one
// and it has not been handed off for this reason before.
func (r *Reconciler) holdEvent(h *ledger.History, i *fsm.Intent) (events.Data, bool) {
	msg, held := r.cfg.Hold[i.ID]
	if !held || !i.Can(events.ManualActionRequired) || handedOffFor(h, events.ReasonLogEventsLost) {
		return nil, false
	}
	var unverified []string
	if a := i.LastAttempt(); a != nil {
		unverified = []string{"whether attempt " + a.ID + " executed"}
	}
	unverified = append(unverified, "every event the log lost; see settle audit")
	return &events.ManualActionRequiredData{Reason: events.ReasonLogEventsLost, Message: msg, Owner: "operators",
		Evidence: events.Evidence{Attempts: fsm.AttemptRefs(i), Unverified: unverified}}, true
}

// heldWrite reports whether a write step must not be taken for i.
func (r *Reconciler) heldWrite(h *ledger.History, i *fsm.Intent) bool {
	_, held := r.cfg.Hold[i.ID]
	return held && !handedOffFor(h, events.ReasonLogEventsLost)
}

// handedOffFor reports whether i was handed off for reason before (an
// operator may have released it since: the hold is then theirs to lift).
func handedOffFor(h *ledger.History, reason string) bool {
	for _, e := range h.Events {
		if d, ok := e.Data.(*events.ManualActionRequiredData); ok && d.Reason == reason {
			return true
		}
	}
	return false
}
