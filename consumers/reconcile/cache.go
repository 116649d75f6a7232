package reconcile

import (
	"container/list"
	"context"
	"sync"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
)

// DefaultSteps is how many intents of a fetched batch a worker steps at
// once by default (Config.Steps): a whole fetch (DefaultConfig's Batch),
// so that a fetch's appends meet in the group commit in one wave.
const DefaultSteps = 64

// DefaultCacheBytes bounds a reconciler's history cache by default.
const DefaultCacheBytes = 32 << 20

// historyCache keeps recently used histories so that a wake-up reads only
// the events appended since (the stream is append-only). It is bounded in
// bytes (Config.CacheBytes, an estimate of the histories' memory) and
// evicts the least recently used history first. The log stays the
// truth: a stale entry is refreshed before every use, and a CAS refusal
// makes the step reload.
type historyCache struct {
	mu    sync.Mutex
	max   int // bytes
	bytes int
	ll    *list.List // front: most recently used
	m     map[string]*list.Element
}

type cacheEntry struct {
	id    string
	h     *ledger.History
	bytes int
}

// historyBytes estimates what a history holds in memory: a fixed cost per
// event (envelope, ids, times, maps) plus the payload it carries.
func historyBytes(h *ledger.History) int {
	n := 128 + len(h.Route)
	for _, e := range h.Events {
		n += 512 + len(e.EventID) + len(e.IntentID) + len(e.Actor) + len(e.AttemptID)
		if d := events.Recorded(e); d != nil { // IntentRecorded or IntentStarted
			n += 2 * len(d.Payload)
		}
	}
	return n
}

func (c *historyCache) load(ctx context.Context, store Store, route, intentID string) (*ledger.History, error) {
	c.mu.Lock()
	var h *ledger.History
	if el, ok := c.m[intentID]; ok {
		cached := el.Value.(*cacheEntry).h
		if cached.Route == route {
			h = cached.Clone()
			c.ll.MoveToFront(el)
		}
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
		if h.Hold != nil {
			return h, nil // a hold marker alone: nothing to keep (Fold says ErrHistoryLost)
		}
		return nil, errors.Errorf("load: %w", ledger.ErrNotFound)
	}
	cp := h.Clone()
	size := historyBytes(cp)
	id := h.Events[0].IntentID
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*list.Element{}
		c.ll = list.New()
	}
	if el, ok := c.m[id]; ok {
		e := el.Value.(*cacheEntry)
		c.bytes += size - e.bytes
		e.h, e.bytes = cp, size
		c.ll.MoveToFront(el)
	} else {
		c.m[id] = c.ll.PushFront(&cacheEntry{id: id, h: cp, bytes: size})
		c.bytes += size
	}
	for c.bytes > c.max && c.ll.Len() > 1 {
		c.removeLocked(c.ll.Back())
	}
	return h, nil
}

func (c *historyCache) forget(intentID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[intentID]; ok {
		c.removeLocked(el)
	}
}

func (c *historyCache) removeLocked(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.ll.Remove(el)
	delete(c.m, e.id)
	c.bytes -= e.bytes
}

// known is how many events the cached history of intentID holds (0: not
// cached). The stream is append-only: a message of a version below it is
// not the intent's latest event, whatever the log holds now.
func (c *historyCache) known(route, intentID string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[intentID]; ok {
		if h := el.Value.(*cacheEntry).h; h.Route == route {
			return uint64(len(h.Events))
		}
	}
	return 0
}
