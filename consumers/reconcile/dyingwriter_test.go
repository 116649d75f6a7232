package reconcile

import (
	"context"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// dyingWriter is a store whose writers die between an external call and
// its outcome, for the intents it is told of: the first outcome of a
// marked intent is never appended, and the writer gets errDied, as if
// its process died after the call. Everything else is the wrapped
// store's; pass it where a producer or a reconciler takes its store.
type dyingWriter struct {
	*ledger.Store
	dies *sync.Map // the marked intent ids, shared by every writer that may die
}

var errDied = errors.New("simulated crash of the writer after the call")

func (w *dyingWriter) AppendNext(ctx context.Context, h *ledger.History, intent *fsm.Intent, actor string, at time.Time, attemptID string, d events.Data) error {
	switch d.EventType() {
	case events.WriteConfirmed, events.WriteSucceeded, events.WriteRejected, events.OutcomeUnknown:
		if attemptID == "" {
			break
		}
		if _, die := w.dies.LoadAndDelete(intent.ID); die {
			return errDied
		}
	}
	return w.Store.AppendNext(ctx, h, intent, actor, at, attemptID, d)
}
