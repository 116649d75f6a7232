package projector

import (
	"container/list"

	"github.com/settle-dev/settle/fsm"
)

// folded is an intent's state after its last applied event: the fold and
// the stream sequence of that event.
type folded struct {
	intent  *fsm.Intent
	lastSeq uint64
}

// lru is a bounded cache of folded intents. It is not safe for concurrent
// use: the projector only touches it while it holds applyMu.
type lru struct {
	max   int
	ll    *list.List
	items map[string]*list.Element
}

type lruItem struct {
	id string
	f  *folded
}

func newLRU(max int) *lru {
	return &lru{max: max, ll: list.New(), items: make(map[string]*list.Element)}
}

func (c *lru) get(id string) (*folded, bool) {
	el, ok := c.items[id]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(el)
	return el.Value.(*lruItem).f, true
}

func (c *lru) put(id string, f *folded) {
	if el, ok := c.items[id]; ok {
		el.Value.(*lruItem).f = f
		c.ll.MoveToFront(el)
		return
	}
	c.items[id] = c.ll.PushFront(&lruItem{id: id, f: f})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.items, old.Value.(*lruItem).id)
	}
}

func (c *lru) remove(id string) {
	if el, ok := c.items[id]; ok {
		c.ll.Remove(el)
		delete(c.items, id)
	}
}

func (c *lru) purge() {
	c.ll.Init()
	clear(c.items)
}

func (c *lru) len() int { return c.ll.Len() }
