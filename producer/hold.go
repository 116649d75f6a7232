package producer

import (
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// held reports whether intent lost events in a log loss an operator
// accepted (Config.Hold) and has not been handed to a human for it yet:
// Execute then writes nothing and answers the stored state (a reconciler
// hands it off; see consumers/reconcile/hold.go).
func (p *Producer) held(h *ledger.History, intent *fsm.Intent) bool {
	if _, ok := p.cfg.Hold[intent.ID]; !ok {
		return false
	}
	for _, e := range h.Events {
		if d, ok := e.Data.(*events.ManualActionRequiredData); ok && d.Reason == events.ReasonLogEventsLost {
			return false // handed off: the operator decides from here
		}
	}
	return true
}
