package reconcile

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// ConsumerName is the durable consumer of route: Durable + "-" + route,
// shared by every worker that has the route (package doc, Waking).
func (r *Reconciler) ConsumerName(route string) string { return r.cfg.Durable + "-" + route }

// Worker is the worker name this reconciler leases and claims as
// (Config.Worker).
func (r *Reconciler) Worker() string { return r.cfg.Worker }

// consumerConfig is the durable pull consumer every worker of route
// shares: every event of the route is delivered, and the latest event's
// message is the intent's wake-up (package doc, Waking).
func (r *Reconciler) consumerConfig(route string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       r.ConsumerName(route),
		Description:   "settle reconciler of route " + route + ": wakes intents that wait for settlement",
		FilterSubject: events.SubjectPrefix + "." + route + ".*",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       r.cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: r.cfg.MaxAckPending,
	}
}

// Run consumes the stream until ctx ends, stepping every intent that its
// messages wake: one durable consumer per configured route, each fetched
// by its own loop. It returns nil when ctx is cancelled.
func (r *Reconciler) Run(ctx context.Context) error {
	names := r.names
	cons := make([]jetstream.Consumer, len(names))
	for k, name := range names {
		// A consumer that cannot be made now (a cluster electing its
		// leaders, a node restarting) is tried again until ctx ends: a
		// reconciler that gave up here would leave the process serving
		// with nothing settling its intents.
		for wait := 200 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
			c, err := r.makeConsumer(ctx, name)
			if err == nil {
				cons[k] = c
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			r.cfg.Logger.Warn("reconciler: the consumer of a route cannot be made yet; retrying", "route", name, "consumer", r.ConsumerName(name), "err", err)
			sleep(ctx, wait)
		}
	}
	var wg sync.WaitGroup
	for k, c := range cons {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.runConsumer(ctx, names[k], c)
		}()
	}
	if r.cfg.Sweep {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.sweep(ctx, names) // sweep.go
		}()
	}
	wg.Wait()
	return nil
}

// fetchesInFlight is how many fetched batches a route's loop handles at
// once: while one fetch's steps wait for their units in the group commit,
// the next fetch's intents are triaged and read.
const fetchesInFlight = 2

func (r *Reconciler) runConsumer(ctx context.Context, route string, cons jetstream.Consumer) {
	// The fetches in flight share Config.Steps: the route's steps that may
	// call the external API (a step waiting for its append holds none).
	calls := make(chan struct{}, r.cfg.Steps)
	inFlight := make(chan struct{}, fetchesInFlight)
	var handling sync.WaitGroup
	defer handling.Wait()
	for ctx.Err() == nil {
		// A process that cannot append (its clock off, its disk full, its
		// log being verified or damaged) takes no work: what it fetched it
		// could only hold while another process could step it.
		if r.store.Blocked() != nil {
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		select {
		case inFlight <- struct{}{}:
		case <-ctx.Done():
			return
		}
		// Take what is pending at once; when nothing is, block for the
		// first message, then take whatever else is pending with it.
		msgs, err := fetch(cons.FetchNoWait(r.cfg.Batch))
		if err == nil && len(msgs) == 0 {
			msgs, err = fetch(cons.Fetch(1, jetstream.FetchMaxWait(time.Second)))
			if err == nil && len(msgs) == 1 && r.cfg.Batch > 1 {
				more, merr := fetch(cons.FetchNoWait(r.cfg.Batch - 1))
				if merr == nil {
					msgs = append(msgs, more...)
				}
			}
		}
		if err != nil || len(msgs) == 0 {
			<-inFlight
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// A consumer that is gone (deleted by hand, lost by the
			// server) is made again (consumers.go).
			cons = r.fetchFailed(ctx, route, cons, err)
			continue
		}
		if len(msgs) == 0 {
			// A quiet route, or a consumer or server gone without an
			// error (a fetch while disconnected just waits): look.
			cons = r.consumerIdle(ctx, route, cons)
			continue
		}
		r.consumers.fetched(route)
		handling.Add(1)
		go func() {
			defer func() { <-inFlight; handling.Done() }()
			r.handleBatch(ctx, msgs, calls)
		}()
	}
}

func fetch(batch jetstream.MessageBatch, err error) ([]jetstream.Msg, error) {
	if err != nil {
		return nil, err
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	return msgs, batch.Error()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

type wake struct {
	msg      jetstream.Msg
	route    string
	intentID string
	// read is the intent as triage read it, where the step starts (one
	// read of the log fewer: a step's appends are CAS'd on what it read,
	// so a history that grew meanwhile costs a reload, nothing more).
	read *stepUnit
}

// handleBatch steps the intents woken by one fetch. Intents that will
// search the same route and account share list calls. calls bounds the
// triages and steps under way (Config.Steps; nil: a bound of its own).
func (r *Reconciler) handleBatch(ctx context.Context, msgs []jetstream.Msg, calls chan struct{}) {
	sc := newSearchCache()
	if calls == nil {
		calls = make(chan struct{}, r.cfg.Steps)
	}
	// Triage, Config.Steps messages at once: each reads (at most) its own
	// intent's history, and the search plans merge under the cache's lock.
	// Every plan is made before the first step lists.
	woken := make([]wake, len(msgs))
	isLive := make([]bool, len(msgs))
	var tw sync.WaitGroup
	for k, m := range msgs {
		calls <- struct{}{}
		tw.Add(1)
		go func() {
			defer func() { <-calls; tw.Done() }()
			woken[k], isLive[k] = r.triage(ctx, m, sc)
		}()
	}
	tw.Wait()
	var live []wake
	for k, w := range woken {
		if isLive[k] {
			live = append(live, w)
		}
	}
	// Config.Steps at once: each step is CAS'd on its own intent, so the
	// order among them does not matter; the search cache is shared. A
	// step gives its place up while its unit is in the group commit.
	var wg sync.WaitGroup
	defer wg.Wait()
	gate := newCommitGate(len(live))
	for _, w := range live {
		t := &ticket{calls: calls, gate: gate}
		t.acquire(ctx)
		if ctx.Err() != nil {
			t.done()
			return // unacked: redelivered to a live worker after AckWait
		}
		wg.Add(1)
		go func() {
			defer func() { t.done(); wg.Done() }()
			r.settleWake(ctx, w, sc, t)
		}()
	}
}

// ticket is one step's place in its fetch: among the Config.Steps steps
// that may call the external API at once (held while it reads or writes,
// given up while its unit waits for the group commit, so that other
// intents are read meanwhile), and at the fetch's commit gate. Used by one
// goroutine; a nil ticket bounds and gates nothing.
type ticket struct {
	calls   chan struct{}
	held    bool
	gate    *commitGate
	arrived bool
}

func (t *ticket) acquire(ctx context.Context) {
	if t == nil || t.held {
		return
	}
	select {
	case t.calls <- struct{}{}:
		t.held = true
	case <-ctx.Done():
	}
}

func (t *ticket) release() {
	if t == nil || !t.held {
		return
	}
	<-t.calls
	t.held = false
}

// ready gives the step's place up before it appends what it decided and,
// the first time, waits at the fetch's commit gate.
func (t *ticket) ready(ctx context.Context) {
	if t.done() {
		t.gate.wait(ctx)
	}
}

// done gives the step's place up and, the first time, tells the gate the
// step has arrived; it reports whether this was that first time.
func (t *ticket) done() bool {
	if t == nil {
		return false
	}
	t.release()
	if t.arrived {
		return false
	}
	t.arrived = true
	t.gate.arrive()
	return true
}

// gateLinger is how long the first unit of a fetch waits at the gate for
// the fetch's other steps still reading.
const gateLinger = 50 * time.Millisecond

// commitGate lets the units of one fetch go to the group commit together:
// a step that has decided its unit waits until every step of the fetch has
// decided its own (or ended), at most gateLinger after the first came, so
// that they share the group commit's syncs. Waiting changes when a unit
// is appended, never what: it is still CAS'd on the last event its step
// read.
type commitGate struct {
	mu      sync.Mutex
	reading int           // steps of the fetch that have not come yet
	open    chan struct{} // closed when the gate opens
	opened  bool
	timer   *time.Timer
}

func newCommitGate(steps int) *commitGate {
	g := &commitGate{reading: steps, open: make(chan struct{})}
	if steps <= 0 {
		g.openLocked()
	}
	return g
}

func (g *commitGate) arrive() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reading--
	switch {
	case g.opened:
	case g.reading <= 0:
		g.openLocked()
	case g.timer == nil:
		g.timer = time.AfterFunc(gateLinger, func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.openLocked()
		})
	}
}

func (g *commitGate) openLocked() {
	if g.opened {
		return
	}
	g.opened = true
	if g.timer != nil {
		g.timer.Stop()
	}
	close(g.open)
}

func (g *commitGate) wait(ctx context.Context) {
	select {
	case <-g.open:
	case <-ctx.Done():
	}
}

// settleWake steps one woken intent and acks, or naks with a delay, its
// message by what the step did.
func (r *Reconciler) settleWake(ctx context.Context, w wake, sc *searchCache, t *ticket) {
	res, err := r.step(ctx, w.route, w.intentID, sc, t, w.read)
	switch {
	case ctx.Err() != nil:
		return
	case errors.Is(err, ledger.ErrLogUnavailable):
		// This process cannot append now: hand the intent back at once
		// for a process that can (runConsumer fetches nothing until the
		// log takes appends again).
		r.cfg.Logger.Warn("reconciler: the log takes no appends from this process; intent handed back", "intent", w.intentID, "err", err)
		_ = w.msg.Nak()
	case errors.Is(err, ErrRouteMissing):
		// Never ack what this worker cannot do: leave it for one that
		// can (or for this one, once its configuration has it).
		r.cfg.Logger.Warn("reconciler: intent left for a worker that has its route", "intent", w.intentID, "route", w.route, "err", err)
		_ = w.msg.NakWithDelay(r.cfg.MaxWait)
	case err != nil:
		r.cfg.Logger.Warn("reconciler: step failed; will retry", "intent", w.intentID, "err", err)
		_ = w.msg.NakWithDelay(r.cfg.Recheck)
	case len(res.Appended) > 0, res.Done:
		// The appended events' own messages carry the intent on, or
		// nothing is left to do.
		_ = w.msg.Ack()
	default:
		_ = w.msg.NakWithDelay(min(res.Wait, r.cfg.MaxWait))
	}
}

// triage acks messages that no longer matter (an older event of the
// intent, a settled intent, an undecodable subject) and plans the
// searches of the rest.
func (r *Reconciler) triage(ctx context.Context, m jetstream.Msg, sc *searchCache) (wake, bool) {
	route, intentID, err := events.ParseSubject(m.Subject())
	if err != nil {
		r.cfg.Logger.Warn("reconciler: message on a foreign subject is skipped", "subject", m.Subject())
		_ = m.Ack()
		return wake{}, false
	}
	_, version, err := events.ParseMsgID(m.Headers().Get(jetstream.MsgIDHeader))
	if m.Headers().Get(events.HoldHeader) != "" {
		// The intent's hold marker (hold.go): a wake-up whatever its
		// history holds, to hand it off.
		version, err = math.MaxUint64, nil
	}
	if err != nil {
		r.cfg.Logger.Warn("reconciler: message without a valid Nats-Msg-Id is skipped", "subject", m.Subject())
		_ = m.Ack()
		return wake{}, false
	}
	if r.cache.known(route, intentID) > version {
		_ = m.Ack() // a newer event's message carries the intent (no read)
		return wake{}, false
	}
	h, err := r.cache.load(ctx, r.store, route, intentID)
	if err != nil {
		if errors.Is(err, ledger.ErrCorruptHistory) || errors.Is(err, ledger.ErrHistoryLost) {
			r.cfg.Logger.Error("reconciler: intent history cannot be folded; left for audit", "intent", intentID, "err", err)
			_ = m.Ack()
			return wake{}, false
		}
		_ = m.NakWithDelay(r.cfg.Recheck)
		return wake{}, false
	}
	if uint64(len(h.Events)) > version {
		_ = m.Ack() // a newer event's message carries the intent
		return wake{}, false
	}
	intent, err := h.Fold()
	if errors.Is(err, ledger.ErrHistoryLost) {
		r.cfg.Logger.Warn("reconciler: a held intent's history cannot be folded (the log lost events of it, the loss was accepted); left for an operator", "intent", intentID, "err", err)
		_ = m.Ack()
		return wake{}, false
	}
	if err != nil {
		r.cfg.Logger.Error("reconciler: intent history cannot be folded; left for audit", "intent", intentID, "err", err)
		_ = m.Ack()
		return wake{}, false
	}
	if rt, ok := r.routes[route]; ok {
		searching := intent.State == fsm.Reconciling ||
			((intent.State == fsm.Unknown || intent.State == fsm.InProgress) && !r.cfg.Now().Before(intent.NextCheckAt))
		caps := intent.Caps()
		if searching && !intent.WriteProven && fsm.StrategyOf(caps) == fsm.StrategySearch {
			from, to := fsm.Window(intent)
			sc.plan(route, searchKey(rt, intent), intent.Recorded.Account, from, to)
		}
	}
	return wake{msg: m, route: route, intentID: intentID, read: &stepUnit{h: h, i: intent}}, true
}
