package reconcile

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
)

// The start-up sweep. An intent is woken by its latest event's message on
// its route's durable consumer. That message can be gone while the intent
// still needs a reconciler: the log lost the intent's later events (whose
// messages had made the reconciler ack this one), the consumer was
// recreated past it, or it was acked by mistake. So, on start, a sweeping
// reconciler (Config.Sweep; one per process is enough) reads the last
// event of every intent of its routes — an ordered consumer delivering the
// last message per subject — and steps every intent that no reconciler
// is done with. An intent that must wait is kept in a bounded schedule
// and stepped again when due, until a step appends an event (whose message
// carries it on) or nobody has anything left to do. Intents the sweep and
// the consumers both step are safe: every step is a CAS append.

// SweepStats count what the sweep did.
type SweepStats struct {
	// Scanned: intents whose last event was read; Stepped: steps taken;
	// Waiting: intents in the schedule now; Dropped: intents left out
	// because the schedule was full (SweepMax); Done: the scan finished;
	// Rescans: scans read again because they ended below the route's last
	// event (a lagging copy of the stream).
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

// sweepRoute reads the last event of every intent of route, then steps
// those a reconciler may still have to act on.
//
// The scan ends when its ordered consumer has nothing pending. On a
// replicated stream that consumer (one replica, ephemeral) may be placed on
// a server whose copy of the stream lags (one just back from a partition):
// its scan then ends early and misses the intents whose last events are in
// the part it has not yet caught up on. So the sweep first asks the
// stream's leader for the sequence of the route's last event and, if the
// scan ends below it, reads again (a new consumer, placed anew) up to
// sweepScanAttempts times; an intent stepped twice is safe (every step is
// a CAS append), but each scan's intents are stepped only once it is
// complete.
func (r *Reconciler) sweepRoute(ctx context.Context, route string) error {
	target, err := r.routeLastSeq(ctx, route)
	if err != nil {
		// Without the mark, scan once as before.
		r.cfg.Logger.Warn("sweep: could not ask for the route's last event; scanning once", "route", route, "err", err)
	}
	var sc sweepScan
	for attempt := 1; ; attempt++ {
		sc, err = r.scanRoute(ctx, route, attempt)
		if err != nil {
			return err
		}
		if sc.maxSeq >= target || ctx.Err() != nil {
			break
		}
		if attempt == sweepScanAttempts {
			r.cfg.Logger.Warn("sweep: every scan ended below the route's last event; intents past it rely on their consumer messages",
				"route", route, "scanned_to", sc.maxSeq, "last_event", target, "attempts", attempt)
			break
		}
		r.sweepMu.Lock()
		r.sweepStats.Rescans++
		r.sweepMu.Unlock()
		r.cfg.Logger.Info("sweep: the scan read a copy of the stream that ends early; reading again",
			"route", route, "scanned_to", sc.maxSeq, "last_event", target)
		t := time.NewTimer(time.Duration(attempt) * time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	r.sweepMu.Lock()
	r.sweepStats.Scanned += sc.scanned
	r.sweepStats.Dropped += sc.dropped
	r.sweepMu.Unlock()
	for _, id := range sc.open {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.sweepStep(ctx, route, id)
	}
	return nil
}

// sweepScanAttempts bounds the scans of one route (sweepRoute).
const sweepScanAttempts = 5

// sweepScan is what one scan of a route found.
type sweepScan struct {
	open             []string // intents a reconciler may still have to act on
	scanned, dropped uint64
	maxSeq           uint64 // the highest stream sequence read
}

// routeLastSeq asks the stream (its leader, on a replicated stream: the
// store reads through the message-get API there) for the sequence of the
// route's last event; 0 when the route has none.
func (r *Reconciler) routeLastSeq(ctx context.Context, route string) (uint64, error) {
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := r.store.Stream().GetLastMsgForSubject(gctx, events.SubjectPrefix+"."+route+".*")
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return m.Sequence, nil
}

// scanRoute reads the last event of every intent of route once.
func (r *Reconciler) scanRoute(ctx context.Context, route string, attempt int) (sweepScan, error) {
	var sc sweepScan
	js := r.store.JetStream()
	cons, err := js.OrderedConsumer(ctx, r.store.Config().Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{events.SubjectPrefix + "." + route + ".*"},
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return sc, err
	}
	cut := -1 // a test's stand-in for a lagging copy (sweepScanCut)
	if r.sweepScanCut != nil {
		cut = r.sweepScanCut(attempt)
	}
	read := 0
	for last := false; !last && ctx.Err() == nil; {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return sc, err
		}
		got := 0
		for m := range batch.Messages() {
			if last {
				continue // newer events, appended since the scan began
			}
			got++
			read++
			if md, err := m.Metadata(); err == nil {
				sc.maxSeq = max(sc.maxSeq, md.Sequence.Stream)
				if md.NumPending == 0 || read == cut {
					last = true
				}
			}
			_, id, err := events.ParseSubject(m.Subject())
			if err != nil {
				continue
			}
			sc.scanned++
			// An intent no reconciler acts on (confirmed, abandoned, a
			// human's turn) is skipped without loading its history.
			if e, err := events.Decode(m.Data()); err == nil && fsm.Reconciled(fsm.StateAfter(e.Type)) {
				continue
			}
			if len(sc.open) >= r.cfg.SweepMax {
				sc.dropped++
				continue
			}
			sc.open = append(sc.open, id)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return sc, err
		}
		if got == 0 {
			break
		}
	}
	return sc, nil
}

// sweepStep steps one intent and schedules it again if it must wait.
func (r *Reconciler) sweepStep(ctx context.Context, route, id string) {
	res, err := r.step(ctx, route, id, nil)
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
	// sweepScanCut, set by tests, ends scan number attempt after that many
	// messages (as a consumer on a lagging copy would); -1: no cut.
	sweepScanCut func(attempt int) int
}
