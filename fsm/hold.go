package fsm

import "github.com/settle-dev/settle/events"

// The log-loss hold, decided once (events.Hold says what it is). A held
// intent may show an older history than what happened, so no write is
// made for it by anyone; it is handed to a human (log_events_lost) as
// soon as its state allows, and an operator's release lifts the hold.
// Whether an intent lost events is not in its history (those events are
// the ones lost): the caller knows it from the hold marker or from the
// accepted loss.

// LossHeld reports whether an intent that lost events in an accepted loss
// (marked) is still held: it has not been handed to a human for the loss
// yet. history is what the log holds of the intent.
func LossHeld(marked bool, history []events.Event) bool {
	return marked && !HandedOffFor(history, events.ReasonLogEventsLost)
}

// HandedOffFor reports whether history holds a hand-off
// (ManualActionRequired) for reason.
func HandedOffFor(history []events.Event, reason events.ManualReason) bool {
	for _, e := range history {
		if d, ok := e.Data.(*events.ManualActionRequiredData); ok && d.Reason == reason {
			return true
		}
	}
	return false
}

// LossHandoff is the hand-off of a held intent (LossHeld) whose state
// allows one: ManualActionRequired{log_events_lost} with message (which
// names the loss) and what cannot be verified. ok is false when the
// intent's state allows none (it is then only kept from writing, and
// handed off once its state allows).
func LossHandoff(i *Intent, message string) (d *events.ManualActionRequiredData, ok bool) {
	if !i.Can(events.ManualActionRequired) {
		return nil, false
	}
	var unverified []string
	if a := i.LastAttempt(); a != nil {
		unverified = []string{"whether attempt " + a.ID + " executed"}
	}
	unverified = append(unverified, "every event the log lost; see settle audit")
	return &events.ManualActionRequiredData{Reason: events.ReasonLogEventsLost, Message: message, Owner: "operators",
		Evidence: events.Evidence{Attempts: AttemptRefs(i), Unverified: unverified}}, true
}

// LossMessage is the message of a held intent's hand-off: the hold
// marker's, naming the loss, or else told (what the process that accepted
// the loss was told), or else a general one.
func LossMessage(hold *events.Hold, told string) string {
	switch {
	case hold != nil:
		return hold.Message + " Lost: " + hold.Named() + "."
	case told != "":
		return told
	}
	return "the log lost some of this intent's events (the loss was accepted): what it shows may be older than what happened — check the external system before resolving"
}
