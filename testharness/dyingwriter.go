package testharness

import (
	"context"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// DyingWriter is a store whose writers die between an external call and
// its outcome, for the intents it is told of: the first outcome of a
// marked intent is never appended, and the writer gets an error, as if
// its process died after the call. Everything else is the wrapped
// store's; pass it where a producer or a reconciler takes its store.
type DyingWriter struct {
	*ledger.Store
	dies *sync.Map
}

// NewDyingWriter wraps s; dies holds the marked intent ids (shared by
// every writer that may be the one to die).
func NewDyingWriter(s *ledger.Store, dies *sync.Map) *DyingWriter {
	return &DyingWriter{Store: s, dies: dies}
}

// ErrDied is what a dying writer's write returns.
var ErrDied = errors.New("simulated crash of the writer after the call")

// AppendNext appends d, unless it is the outcome of a marked intent's
// call.
func (w *DyingWriter) AppendNext(ctx context.Context, h *ledger.History, intent *fsm.Intent, actor string, at time.Time, attemptID string, d events.Data) error {
	if isOutcome(d.EventType()) && attemptID != "" {
		if _, die := w.dies.LoadAndDelete(intent.ID); die {
			return ErrDied
		}
	}
	return w.Store.AppendNext(ctx, h, intent, actor, at, attemptID, d)
}

// isOutcome: t is the classified outcome of a write.
func isOutcome(t events.Type) bool {
	switch t {
	case events.WriteConfirmed, events.WriteSucceeded, events.WriteRejected, events.OutcomeUnknown:
		return true
	}
	return false
}
