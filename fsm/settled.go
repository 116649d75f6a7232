package fsm

import "github.com/settle-dev/settle/events"

// "Is it settled?", answered once.

// Settled reports whether an intent in state s waits for nothing: its
// write's outcome is known (confirmed, rejected, failed, abandoned) or a
// human must act (manual_action, awaiting_approval). It is what a caller
// waits for (the API's ?wait=, an agent's answer) and what a settlement
// is counted at.
//
// Two settled states may still see a step of settle's own: a retryable
// rejection inside its resend budget is resent, and a failure that left
// partial effects is handed to a human (Decider.Next says when). Reconciled
// leaves them out.
func Settled(s State) bool {
	switch s {
	case Confirmed, Abandoned, Rejected, Failed, ManualAction, AwaitingApproval:
		return true
	}
	return false
}

// Reconciled reports whether no reconciler acts on an intent in state s,
// whatever else its history holds: Settled, but neither rejected nor
// failed (see Settled). A reader that knows only an intent's last event
// asks Reconciled(StateAfter(type)) (the start-up sweep skips those
// intents without loading them).
func Reconciled(s State) bool {
	return Settled(s) && s != Rejected && s != Failed
}

// StateAfter is the state an event of type t leads to (the lifecycle
// table's target); None for a type the table does not know.
func StateAfter(t events.Type) State {
	for _, tr := range Transitions {
		if tr.Type == t {
			return tr.To
		}
	}
	return None
}
