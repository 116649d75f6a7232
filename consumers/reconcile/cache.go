package reconcile

import (
	"context"
	"sync"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
)

// historyCache keeps recently used histories so that a wake-up reads only
// the events appended since (the stream is append-only). It is bounded:
// past maxCached entries it is dropped whole and refilled from the log.
// The log stays the truth: a stale entry is refreshed before every use, and
// a CAS refusal makes the step reload.
type historyCache struct {
	mu sync.Mutex
	m  map[string]*ledger.History
}

const maxCached = 20_000

func (c *historyCache) load(ctx context.Context, store *ledger.Store, route, intentID string) (*ledger.History, error) {
	c.mu.Lock()
	cached := c.m[intentID]
	var h *ledger.History
	if cached != nil && cached.Route == route {
		h = &ledger.History{Route: route, Events: append([]events.Event(nil), cached.Events...), LastSeq: cached.LastSeq}
	}
	c.mu.Unlock()
	if h == nil {
		return c.put(store.Load(ctx, route, intentID))
	}
	if err := store.Refresh(ctx, h, intentID); err != nil {
		c.forget(intentID)
		return nil, err
	}
	return c.put(h, nil)
}

func (c *historyCache) put(h *ledger.History, err error) (*ledger.History, error) {
	if err != nil {
		return nil, err
	}
	if len(h.Events) == 0 {
		return nil, errors.Errorf("load: %w", ledger.ErrNotFound)
	}
	cp := &ledger.History{Route: h.Route, Events: append([]events.Event(nil), h.Events...), LastSeq: h.LastSeq}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[string]*ledger.History{}
	}
	c.m[h.Events[0].IntentID] = cp
	c.mu.Unlock()
	return h, nil
}

func (c *historyCache) forget(intentID string) {
	c.mu.Lock()
	delete(c.m, intentID)
	c.mu.Unlock()
}
