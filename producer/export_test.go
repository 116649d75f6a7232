package producer

import (
	"context"

	"github.com/settle-dev/settle/events"
)

// AppendAs is Append under a given append id: a test plays a writer whose
// earlier publish (with that id) landed but whose ack was lost.
func (s *Store) AppendAs(ctx context.Context, route string, e events.Event, expectedLastSeq uint64, appendID string) (uint64, error) {
	return s.appendAs(ctx, route, e, expectedLastSeq, appendID)
}
