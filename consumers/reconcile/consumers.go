package reconcile

import (
	"context"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"
)

// consumerState is what the fetch loops know of their route consumers:
// since when each fails to fetch, and how many were made anew.
type consumerState struct {
	mu        sync.Mutex
	failing   map[string]ConsumerHealth // by route, while failing
	recreated uint64
	logged    map[string]time.Time // the last "fetch failed" line, by route
	looked    map[string]time.Time // the last consumerIdle look, by route
}

// idleLook is how often a fetch loop that gets nothing asks for its
// consumer's info.
const idleLook = 5 * time.Second

// ConsumerHealth is one route consumer's fetching, as Health reports it.
type ConsumerHealth struct {
	Route, Consumer string
	// Failing: the last fetch failed; Since is the first failure of the
	// run, Err the last one.
	Failing bool
	Since   time.Time
	Err     error
}

// Health lists the route consumers whose fetches fail now (empty: every
// fetch of the last round succeeded).
func (r *Reconciler) Health() []ConsumerHealth {
	r.consumers.mu.Lock()
	defer r.consumers.mu.Unlock()
	out := make([]ConsumerHealth, 0, len(r.consumers.failing))
	for _, h := range r.consumers.failing {
		out = append(out, h)
	}
	return out
}

// ConsumersRecreated counts the route consumers this reconciler made
// again because they had disappeared while it ran.
func (r *Reconciler) ConsumersRecreated() uint64 {
	r.consumers.mu.Lock()
	defer r.consumers.mu.Unlock()
	return r.consumers.recreated
}

// consumerIdle is called after a fetch that brought nothing: every
// idleLook it asks for the consumer's info, so that a consumer deleted or
// a server gone is noticed (and reported, and a consumer made again) even
// when the fetches themselves return no error.
func (r *Reconciler) consumerIdle(ctx context.Context, route string, cons jetstream.Consumer) jetstream.Consumer {
	c := &r.consumers
	c.mu.Lock()
	if c.looked == nil {
		c.looked = map[string]time.Time{}
	}
	due := time.Since(c.looked[route]) >= idleLook
	if due {
		c.looked[route] = time.Now()
	}
	c.mu.Unlock()
	if !due {
		return cons
	}
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := cons.Info(ictx)
	cancel()
	if err != nil && ctx.Err() == nil {
		return r.fetchFailed(ctx, route, cons, err)
	}
	c.fetched(route)
	return cons
}

func (c *consumerState) fetched(route string) {
	c.mu.Lock()
	delete(c.failing, route)
	c.mu.Unlock()
}

// apiRequestTimeout bounds one JetStream API request of a reconciler,
// whatever ctx's own deadline: a request whose answer is lost (its
// server restarting, the meta leader changing) is made again, not
// waited on until ctx ends.
const apiRequestTimeout = 5 * time.Second

// makeConsumer creates or updates route's durable consumer, the request
// bounded by apiRequestTimeout.
func (r *Reconciler) makeConsumer(ctx context.Context, route string) (jetstream.Consumer, error) {
	rctx, cancel := context.WithTimeout(ctx, apiRequestTimeout)
	defer cancel()
	return r.store.Stream().CreateOrUpdateConsumer(rctx, r.consumerConfig(route))
}

// fetchFailed records a failed fetch of route's consumer, logs it (once a
// second at most: the error in full), and, when the consumer is gone,
// makes it again — counted in ConsumersRecreated — and returns the new
// one. A consumer made again delivers the route's events from the first
// (DeliverAll): the intents they wake are stepped, the older ones acked.
func (r *Reconciler) fetchFailed(ctx context.Context, route string, cons jetstream.Consumer, err error) jetstream.Consumer {
	c := &r.consumers
	c.mu.Lock()
	if c.failing == nil {
		c.failing, c.logged = map[string]ConsumerHealth{}, map[string]time.Time{}
	}
	h, ok := c.failing[route]
	if !ok {
		h = ConsumerHealth{Route: route, Consumer: r.ConsumerName(route), Failing: true, Since: time.Now()}
	}
	h.Err = err
	c.failing[route] = h
	loud := time.Since(c.logged[route]) >= time.Second
	if loud {
		c.logged[route] = time.Now()
	}
	c.mu.Unlock()
	if loud {
		r.cfg.Logger.Warn("reconciler: fetch failed; retrying", "route", route, "consumer", h.Consumer, "err", err)
	}
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, ierr := r.store.Stream().Consumer(ictx, h.Consumer)
	cancel()
	if !errors.Is(ierr, jetstream.ErrConsumerNotFound) {
		sleep(ctx, 200*time.Millisecond)
		return cons
	}
	nc, cerr := r.makeConsumer(ctx, route)
	if cerr != nil {
		r.cfg.Logger.Warn("reconciler: the consumer of a route is gone and cannot be made again yet; retrying", "route", route, "consumer", h.Consumer, "err", cerr)
		sleep(ctx, time.Second)
		return cons
	}
	c.mu.Lock()
	c.recreated++
	c.mu.Unlock()
	r.cfg.Logger.Warn("reconciler: the consumer of a route was gone (deleted?): made it again; its intents are woken from the start of the route",
		"route", route, "consumer", h.Consumer)
	return nc
}
