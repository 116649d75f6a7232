package reconcile

import (
	"container/heap"
	"context"
	"io"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// The start-up sweep (package doc). An intent's wake-up message can be
// gone while it still needs a reconciler (the log lost its later events,
// the consumer was recreated past it, it was acked by mistake). An intent
// the sweep finds waiting is kept in a bounded schedule and stepped again
// when due, until a step appends an event (whose message carries it on)
// or nobody has anything left to do. Intents the sweep and the consumers
// both step are safe: every step is a CAS append.

// SweepStats count what the sweep did.
type SweepStats struct {
	// Scanned: intents whose last event was read; Stepped: steps taken;
	// Waiting: intents in the schedule now; Dropped: intents left out
	// because the schedule was full (SweepMax); Done: the scan finished;
	// Rescans: the scan's consumers made again because they read a copy
	// of the stream that lagged (ledger.Reader).
	Scanned, Stepped, Dropped, Rescans uint64
	Waiting                            int
	Done                               bool
}

// SweepStats returns the sweep's counters.
func (r *Reconciler) SweepStats() SweepStats {
	r.sweepMu.Lock()
	defer r.sweepMu.Unlock()
	s := r.sweepStats
	s.Waiting = len(r.sweepQ)
	return s
}

// sweep scans every route, then works its schedule until ctx ends.
func (r *Reconciler) sweep(ctx context.Context, routes []string) {
	for _, route := range routes {
		if err := r.sweepRoute(ctx, route); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("sweep: scanning a route failed; its intents rely on their consumer messages", "route", route, "err", err)
		}
	}
	r.sweepMu.Lock()
	r.sweepStats.Done = true
	n := r.sweepStats.Scanned
	r.sweepMu.Unlock()
	r.cfg.Logger.Info("sweep: every intent's last event read", "intents", n, "waiting", r.SweepStats().Waiting)
	for ctx.Err() == nil {
		r.sweepMu.Lock()
		var next *sweepItem
		if len(r.sweepQ) > 0 {
			next = r.sweepQ[0]
		}
		r.sweepMu.Unlock()
		if next == nil {
			return
		}
		if d := next.due.Sub(r.cfg.Now()); d > 0 {
			t := time.NewTimer(min(d, r.cfg.MaxWait))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		r.sweepMu.Lock()
		heap.Pop(&r.sweepQ)
		r.sweepMu.Unlock()
		r.sweepStep(ctx, next.route, next.id)
	}
}

// sweepRoute reads the last event of every intent of route (a
// ledger.Reader, last message per subject, to the end the stream's leader
// knows: a lagging copy does not end it early, SweepStats.Rescans), then
// steps those a reconciler may still have to act on.
func (r *Reconciler) sweepRoute(ctx context.Context, route string) error {
	rc := ledger.ReaderConfig{Stream: r.store.Config().Stream, Subject: events.RouteSubjects(route), LastPerSubject: true, NamePrefix: "settle_sweep"}
	js := r.store.JetStream()
	if r.sweepRead != nil {
		js = r.sweepRead(js, &rc)
	}
	rd, err := ledger.OpenReader(ctx, js, rc)
	if err != nil {
		return err
	}
	defer rd.Close()
	// The last message read of each intent is its last event (a later
	// message of an intent, read after the first, replaces it).
	quiet := map[string]bool{}
	var order []string
	for {
		m, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		_, id, err := events.ParseSubject(m.Subject)
		if err != nil {
			continue
		}
		if _, seen := quiet[id]; !seen {
			order = append(order, id)
		}
		// An intent no reconciler acts on (confirmed, abandoned, a
		// human's turn) is skipped without loading its history; a hold
		// marker is no event: its intent is stepped (hold.go).
		e, err := events.Decode(m.Data)
		quiet[id] = err == nil && m.Header.Get(events.HoldHeader) == "" && fsm.Reconciled(fsm.StateAfter(e.Type))
	}
	var open []string
	var dropped uint64
	for _, id := range order {
		switch {
		case quiet[id]:
		case len(open) >= r.cfg.SweepMax:
			dropped++
		default:
			open = append(open, id)
		}
	}
	r.sweepMu.Lock()
	r.sweepStats.Scanned += uint64(len(order))
	r.sweepStats.Dropped += dropped
	r.sweepStats.Rescans += rd.Recreated()
	r.sweepMu.Unlock()
	for _, id := range open {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.sweepStep(ctx, route, id)
	}
	return nil
}

// sweepStep steps one intent and schedules it again if it must wait.
func (r *Reconciler) sweepStep(ctx context.Context, route, id string) {
	res, err := r.step(ctx, route, id, nil, nil, nil)
	r.sweepMu.Lock()
	defer r.sweepMu.Unlock()
	r.sweepStats.Stepped++
	var wait time.Duration
	switch {
	case ctx.Err() != nil:
		return
	case errors.Is(err, ErrRouteMissing):
		return // another worker's
	case err != nil:
		wait = r.cfg.Recheck
	case len(res.Appended) > 0, res.Done:
		return // its new event's message carries it on, or nobody acts
	default:
		wait = res.Wait
	}
	if len(r.sweepQ) >= r.cfg.SweepMax {
		r.sweepStats.Dropped++
		if r.sweepStats.Dropped == 1 {
			r.cfg.Logger.Warn("sweep: schedule full; further waiting intents rely on their consumer messages", "max", r.cfg.SweepMax)
		}
		return
	}
	heap.Push(&r.sweepQ, &sweepItem{due: r.cfg.Now().Add(wait), route: route, id: id})
}

type sweepItem struct {
	due       time.Time
	route, id string
}

// sweepQueue is a min-heap by due time.
type sweepQueue []*sweepItem

func (q sweepQueue) Len() int           { return len(q) }
func (q sweepQueue) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q sweepQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *sweepQueue) Push(x any)        { *q = append(*q, x.(*sweepItem)) }
func (q *sweepQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return it
}

// sweepState is the sweep's part of a Reconciler.
type sweepState struct {
	sweepMu    sync.Mutex
	sweepQ     sweepQueue
	sweepStats SweepStats
	// sweepRead, set by tests, changes the scan's reader and the
	// JetStream it reads (a lagging copy: testharness.LaggingCopy).
	sweepRead func(jetstream.JetStream, *ledger.ReaderConfig) jetstream.JetStream
}
