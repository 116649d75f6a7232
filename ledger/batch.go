package ledger

import (
	"context"
	"math/bits"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/internal/errkind"
)

// Group commit.
//
// Every Append (and AppendEvents) is a unit: consecutive events of one
// intent, the first published with the per-subject CAS the caller gave, the
// others right behind it. Units of concurrent callers are handed to one
// flusher, which publishes them together as one JetStream atomic batch:
// the server checks every message's Nats-Msg-Id and CAS, stores all of
// them or none, contiguously, and syncs once.
//
// Each message keeps its own Nats-Msg-Id (<intent>:<version>) and its
// unit's append id; the first message of a unit carries its CAS. A later
// message of a unit carries none: inside an atomic batch nothing can come
// between it and the message before it (and the server refuses a CAS
// header on a subject already written in the batch).
//
// A batch is only ever taken as a whole success (the commit's ack names the
// batch and its count). Anything else falls back to the path of a lone
// append, which keeps the meaning Append always had:
//
//   - a definite refusal (one unit's CAS lost, a duplicate Msg-Id, ...)
//     hands the stale units back and publishes the others again, or splits
//     the batch in halves, so the units that did not conflict proceed; a
//     unit alone is handed back to its caller, which publishes it by itself,
//     where a CAS refusal or duplicate ack is resolved by reading the log;
//   - a lost ack (timeout, disconnect) hands every unit back to its caller:
//     the lone publish is refused as a duplicate or by its CAS if the batch
//     had landed, and the log is read to tell, message by message.
//
// A flusher publishes one batch at a time; units that arrive meanwhile
// wait for the next one, so batches grow with load. Up to BatchFlushers
// batches are in flight at once, a second one only when enough is queued
// (pipelineMin), so that a second flusher never splits the load into
// small batches, each paying the server's fixed cost. A unit whose
// subject is in a batch in flight waits for that batch to end (take): its
// CAS names the sequence before the other's, so the two can never both
// land. A flush smaller than BatchMin messages (or one the cost model
// finds cheaper that way) is handed back to its callers to be published
// alone, concurrently.

// unit is one Append call: events of one intent, versions consecutive.
type unit struct {
	subject  string
	evs      []events.Event
	data     [][]byte
	expected uint64
	appendID string

	// state is guarded by the batcher's mutex.
	state unitState
	// res receives the flusher's answer once.
	res chan unitResult
}

type unitState int

const (
	unitQueued unitState = iota
	unitTaken
	unitWithdrawn
)

// unitResult is the flusher's answer: the sequences of a committed batch,
// or alone=true: publish the unit by itself, then call done.
type unitResult struct {
	seqs  []uint64
	alone bool
	done  func()
}

func (u *unit) size() int {
	n := 0
	for _, d := range u.data {
		n += len(d)
	}
	return n
}

// batcher coalesces the units of concurrent callers into atomic batches.
type batcher struct {
	s *Store

	mu      sync.Mutex
	queue   []*unit
	queued  int // messages in queue
	running int // flushers at work
	// flying holds the subjects of the units of batches in flight (taken,
	// not yet answered, their hand-backs not yet published); inFlight
	// counts those batches.
	flying   map[string]struct{}
	inFlight int
	// wake is signalled when a batch ends or units are queued: a flusher
	// waiting for a batch in flight, or for a pipelined batch's size,
	// looks again.
	wake *sync.Cond

	// guarded by mu
	stats BatchStats
	cost  costModel
}

func newBatcher(s *Store) *batcher {
	b := &batcher{s: s, flying: map[string]struct{}{}}
	b.wake = sync.NewCond(&b.mu)
	return b
}

// costModel learns what a flush costs, to decide whether its units go as
// one atomic batch or each alone: for flushes of about n messages (buckets
// of powers of two), the time per message of each way (EWMA). It takes
// the cheaper way and, now and then, the other one, to keep both measures
// current (more often when they are close). The choice changes speed
// only, never what an append means. Flushes of 64 messages or more always
// go as a batch (costBatchAlways).
//
// A measurement can be an outlier (a cold first append, a GC pause, a slow
// sync), and trusting it would keep the dearer way for up to
// costExploreRarely flushes. So a first measurement is the figure itself
// (not a quarter of it, as an EWMA from zero would make it), the way not
// chosen is measured every costExplore flushes until it has costSettled
// measurements, a measurement that turns the choice is confirmed by taking
// the same way again at the next flush, and a measurement of the way not
// chosen that beats the chosen way's figure has it taken again at the
// next flush.
type costModel struct {
	alone, batch   [costBuckets]float64 // seconds per message
	nAlone, nBatch [costBuckets]int     // observations
	// again is the way to take at the next flush of a size (+1 batch,
	// -1 alone, 0 the cheaper): to confirm a measurement that turned the
	// choice, or one of the way not chosen that beat the chosen way.
	again   [costBuckets]int8
	flushes int
}

// costExplore is how often the way not chosen is measured: every
// costExplore flushes until it has costSettled measurements, or when the
// two figures are within a factor 2; every costExploreRarely flushes
// after that.
const (
	costExplore       = 32
	costExploreRarely = 1024
	costSettled       = 4
)

const costBuckets = 10 // n in [2^k, 2^(k+1)), k = 0 … 9

// costBatchAlways is the first bucket (n ≥ 64) whose flushes always go as
// a batch, never measured alone: alone, such a flush costs its callers'
// 64 or more synced publishes, far more than the batch, and measuring it
// would cost every flush taken alone that much.
const costBatchAlways = 6

// ewma weight of a new observation.
const costAlpha = 0.25

func costBucket(n int) int { return min(bits.Len(uint(n))-1, costBuckets-1) }

// choose says whether a flush of n ≥ 2 messages goes as an atomic batch.
func (m *costModel) choose(n int) bool {
	k := costBucket(n)
	if k >= costBatchAlways {
		return true
	}
	switch {
	case m.nAlone[k] == 0: // measure each way once first
		return false
	case m.nBatch[k] == 0:
		return true
	}
	if w := m.again[k]; w != 0 {
		m.again[k] = 0
		return w > 0
	}
	a, b := m.alone[k], m.batch[k]
	batch := b < a
	other := m.nAlone[k] // measurements of the way not chosen
	if !batch {
		other = m.nBatch[k]
	}
	m.flushes++
	every := costExplore
	if max(a, b) > 2*min(a, b) && other >= costSettled {
		every = costExploreRarely
	}
	if m.flushes%every == 0 {
		batch = !batch
	}
	return batch
}

func (m *costModel) observe(batch bool, n int, d time.Duration) {
	if n < 2 {
		return
	}
	k := costBucket(n)
	per := d.Seconds() / float64(n)
	own, ownN, other, otherN, way := &m.alone[k], &m.nAlone[k], m.batch[k], m.nBatch[k], int8(-1)
	if batch {
		own, ownN, other, otherN, way = &m.batch[k], &m.nBatch[k], m.alone[k], m.nAlone[k], 1
	}
	chosen := *ownN > 0 && *own < other // this way was the cheaper before
	if *ownN == 0 {
		*own = per // the first measurement is the figure, not a quarter of it
	} else {
		*own += costAlpha * (per - *own)
	}
	*ownN++
	if otherN == 0 || *own < other {
		return
	}
	// This way's figure is not the cheaper (now): take it again at the
	// next flush if this measurement beat the other way's figure, or if
	// this one measurement is what turned the choice (an outlier, a
	// pause: confirm it before leaving the way for a thousand flushes).
	if per < other || chosen {
		m.again[k] = way
	}
}

// BatchStats counts what the group commit did.
type BatchStats struct {
	// Batches is the number of atomic batches committed, Messages the
	// messages they held.
	Batches, Messages int64
	// Alone counts units published by themselves (a flush not worth a
	// batch, a unit split out of a refused batch, or a lost batch ack).
	Alone int64
	// Refused counts atomic batches the server refused (then split);
	// Lost counts batch publishes whose ack was lost.
	Refused, Lost int64
}

// BatchStats returns the group commit's counters.
func (s *Store) BatchStats() BatchStats {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return s.batch.stats
}

// submit queues units (in one go: a flusher that is idle takes them
// together) and starts the flusher if it is not running.
func (b *batcher) submit(units ...*unit) {
	b.mu.Lock()
	for _, u := range units {
		u.res = make(chan unitResult, 1)
		b.queue = append(b.queue, u)
		b.queued += len(u.evs)
	}
	if b.running < b.s.cfg.flushers() {
		b.running++
		go b.loop()
	} else if b.inFlight > 0 {
		b.wake.Broadcast()
	}
	b.mu.Unlock()
}

// withdraw takes u out of the queue if the flusher has not taken it yet.
func (b *batcher) withdraw(u *unit) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if u.state != unitQueued {
		return false
	}
	u.state = unitWithdrawn
	b.queued -= len(u.evs)
	for i, q := range b.queue {
		if q == u {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			break
		}
	}
	return true
}

// take removes the next batch from the queue: units in order, at most
// BatchMax messages and BatchBytes bytes (at least one unit), never two
// units on one subject, nor a unit on a subject of a batch in flight (the
// later one waits for a next batch). The subjects taken are in flight
// until done gives them back. mu is held.
func (b *batcher) take() []*unit {
	var out []*unit
	msgs, bytes := 0, 0
	rest := b.queue[:0]
	for i, u := range b.queue {
		n, sz := len(u.evs), u.size()
		full := len(out) > 0 && (msgs+n > b.s.cfg.BatchMax || bytes+sz > b.s.cfg.BatchBytes)
		if full {
			rest = append(rest, b.queue[i:]...)
			break
		}
		if _, busy := b.flying[u.subject]; busy {
			rest = append(rest, u)
			continue
		}
		b.flying[u.subject] = struct{}{}
		u.state = unitTaken
		out = append(out, u)
		msgs += n
		bytes += sz
	}
	clear(b.queue[len(rest):])
	b.queue = rest
	b.queued -= msgs
	return out
}

// pipelineMin is the fewest messages that go as a batch while another is
// in flight: on a replicated stream one (a batch waits on a RAFT round
// trip, which the next one overlaps), else BatchMax: a single server
// commits batches one at a time, each paying a fixed cost, so a second
// batch goes early only when a full one is waiting.
func (b *batcher) pipelineMin() int {
	if b.s.cfg.Replicas > 1 {
		return 1
	}
	return b.s.cfg.BatchMax
}

// next waits until a batch can go and takes it; ok is false when the
// queue is empty (the flusher ends). mu is held.
func (b *batcher) next() (units []*unit, ok bool) {
	for len(b.queue) > 0 {
		if b.inFlight == 0 || b.queued >= b.pipelineMin() {
			if units = b.take(); len(units) > 0 {
				return units, true
			}
		}
		// Another batch is in flight: wait for it to end, or for the
		// queue to make a batch worth pipelining.
		b.wake.Wait()
	}
	return nil, false
}

// loop flushes until the queue is empty, then ends.
func (b *batcher) loop() {
	b.mu.Lock()
	for {
		units, ok := b.next()
		if !ok {
			b.running--
			b.mu.Unlock()
			return
		}
		n := msgCount(units)
		batch := b.worth(n)
		b.inFlight++
		b.mu.Unlock()
		var alone sync.WaitGroup
		start := time.Now()
		clean := true
		if batch {
			clean = b.flush(units, &alone)
		} else {
			b.handBack(units, &alone)
		}
		// Units handed back are published by their callers; wait for them
		// so that what arrives meanwhile makes the next batch, and so that
		// their subjects stay in flight until they are on the log.
		alone.Wait()
		took := time.Since(start)
		b.mu.Lock()
		b.done(units)
		if clean { // a failed batch measures nothing
			b.cost.observe(batch, n, took)
		}
	}
}

// done ends a batch: its subjects are no longer in flight. mu is held.
func (b *batcher) done(units []*unit) {
	for _, u := range units {
		delete(b.flying, u.subject)
	}
	b.inFlight--
	b.wake.Broadcast()
}

func msgCount(units []*unit) int {
	n := 0
	for _, u := range units {
		n += len(u.evs)
	}
	return n
}

// worth says whether a flush of n messages goes as an atomic batch:
// BatchMin when set, else the cost model's answer. mu is held.
func (b *batcher) worth(n int) bool {
	if b.s.cfg.BatchMin > 0 {
		return n >= b.s.cfg.BatchMin
	}
	return n >= 2 && b.cost.choose(n)
}

// flush publishes units as one atomic batch and, when the server refuses
// it, splits it; a lost ack, or a unit refused alone, is handed back to be
// published alone.
// It reports whether the batch committed at the first try.
func (b *batcher) flush(units []*unit, alone *sync.WaitGroup) bool {
	if len(units) == 0 {
		return true
	}
	seqs, err := b.s.publishAtomic(units)
	if err == nil {
		b.mu.Lock()
		b.stats.Batches++
		b.stats.Messages += int64(msgCount(units))
		b.mu.Unlock()
		for i, u := range units {
			u.res <- unitResult{seqs: seqs[i]}
		}
		return true
	}
	refused := apiError(err) != nil
	b.mu.Lock()
	if refused {
		b.stats.Refused++
	} else {
		b.stats.Lost++
	}
	b.mu.Unlock()
	if !refused || len(units) == 1 {
		// A lost ack (or one unit refused): each unit alone, resolved
		// by its own publish and, if need be, by reading the log.
		b.handBack(units, alone)
		return false
	}
	// Refused for (at least) one unit. The usual cause is a unit's CAS
	// (a new intent recorded meanwhile by another caller, an intent moved
	// on): read each unit's subject once, hand back those whose CAS would
	// fail (their callers resolve them alone, by reading the log), and
	// publish the others again, without them.
	if stale, fresh := b.s.staleUnits(units); len(stale) > 0 {
		b.handBack(stale, alone)
		b.flushPart(fresh, alone)
		return false
	}
	// No unit's CAS explains it (a duplicate Msg-Id, say): split so the
	// others proceed.
	half := len(units) / 2
	b.flushPart(units[:half], alone)
	b.flushPart(units[half:], alone)
	return false
}

// flushPart publishes part of a refused batch again: as a batch when it
// still holds two units (or BatchMin is 1), else handed back.
func (b *batcher) flushPart(part []*unit, alone *sync.WaitGroup) {
	if len(part) > 1 || (len(part) == 1 && b.s.cfg.BatchMin == 1) {
		b.flush(part, alone)
	} else {
		b.handBack(part, alone)
	}
}

// staleUnits reads the last sequence of each unit's subject (concurrently)
// and splits units into those whose expected last subject sequence no
// longer holds (stale: the server refuses their CAS) and the others. A
// subject that cannot be read counts as stale: its unit goes alone, where
// its own publish and the log decide.
func (s *Store) staleUnits(units []*unit) (stale, fresh []*unit) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.AppendTimeout)
	defer cancel()
	ok := make([]bool, len(units))
	var wg sync.WaitGroup
	for i, u := range units {
		wg.Go(func() {
			m, err := s.getLastMsgForSubject(ctx, u.subject)
			switch {
			case errors.Is(err, jetstream.ErrMsgNotFound):
				ok[i] = u.expected == 0
			case err == nil:
				ok[i] = m.Sequence == u.expected
			}
		})
	}
	wg.Wait()
	for i, u := range units {
		if ok[i] {
			fresh = append(fresh, u)
		} else {
			stale = append(stale, u)
		}
	}
	return stale, fresh
}

// handBack tells each unit's caller to publish it alone.
func (b *batcher) handBack(units []*unit, alone *sync.WaitGroup) {
	b.mu.Lock()
	b.stats.Alone += int64(len(units))
	b.mu.Unlock()
	for _, u := range units {
		alone.Add(1)
		u.res <- unitResult{alone: true, done: alone.Done}
	}
}

// errBatchUnresolved: the batch's answer was lost or not understood.
var errBatchUnresolved = errors.New("atomic batch unresolved")

// publishAtomic publishes units as one atomic batch and waits for the
// commit's ack: the sequences of each unit's messages, or the server's
// refusal (a jetstream.JetStreamError), or another error when the answer
// was lost.
func (s *Store) publishAtomic(units []*unit) ([][]uint64, error) {
	id := nuid.Next()
	total := msgCount(units)
	commit, err := s.publishBatch(units, id, total)
	if err != nil {
		return nil, errkind.Wrap(errBatchUnresolved, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.AppendTimeout)
	defer cancel()
	var rt committer = s.js.Conn()
	if c, ok := s.js.(committer); ok {
		rt = c
	}
	resp, err := rt.RequestMsgWithContext(ctx, commit)
	if err != nil {
		return nil, errkind.Wrap(errBatchUnresolved, err)
	}
	ack, err := parseAck(resp.Data)
	if err != nil {
		return nil, errkind.Wrap(errBatchUnresolved, errors.Wrapf(err, "ack %q", resp.Data))
	}
	if ack.Error != nil {
		return nil, ack.Error
	}
	if ack.BatchID != id || ack.Count != total || ack.Sequence < uint64(total) {
		return nil, errors.Errorf("%w: ack for batch %q count %d seq %d, sent %q with %d", errBatchUnresolved, ack.BatchID, ack.Count, ack.Sequence, id, total)
	}
	out := make([][]uint64, len(units))
	seqs := make([]uint64, total) // one allocation for every unit's
	for i := range seqs {
		seqs[i] = ack.Sequence - uint64(total) + uint64(i) + 1
	}
	for j, u := range units {
		out[j], seqs = seqs[:len(u.evs):len(u.evs)], seqs[len(u.evs):]
	}
	return out, nil
}

// publishBatch publishes every message of units but the last, batch id
// id, and returns the last, the commit, unsent. The messages are written
// one after the other through one nats.Msg and one header, which the
// connection copies into its buffer at each publish: the header values
// are the only allocations per message.
func (s *Store) publishBatch(units []*unit, id string, total int) (*nats.Msg, error) {
	nc := s.js.Conn()
	// The header as nats.Header.Set builds it (one value per key), the
	// values of the whole batch in one allocation.
	vals := make([]string, 0, 4*total+3)
	one := func(v string) []string {
		vals = append(vals, v)
		return vals[len(vals)-1 : len(vals) : len(vals)]
	}
	m := &nats.Msg{Header: make(nats.Header, 7)}
	m.Header[batchIDHeader] = one(id)
	// The batch's first message names the stream: every message of an
	// atomic batch lands in the stream its first does, or the batch has a
	// gap and is refused.
	m.Header[jetstream.ExpectedStreamHeader] = one(s.cfg.Stream)
	k := 0
	for _, u := range units {
		appendID := one(u.appendID)
		for i, e := range u.evs {
			k++
			if k == 2 {
				delete(m.Header, jetstream.ExpectedStreamHeader)
			}
			m.Subject, m.Data = u.subject, u.data[i]
			m.Header[jetstream.MsgIDHeader] = one(e.EventID)
			m.Header[AppendIDHeader] = appendID
			m.Header[batchSeqHeader] = one(strconv.Itoa(k))
			// A unit's first message carries its CAS; the others none
			// (nothing can come between them inside the batch).
			if i == 0 {
				m.Header[jetstream.ExpectedLastSubjSeqHeader] = one(strconv.FormatUint(u.expected, 10))
			} else {
				delete(m.Header, jetstream.ExpectedLastSubjSeqHeader)
			}
			if k == total {
				m.Header[batchCommitHeader] = one("1")
				return m, nil
			}
			if err := nc.PublishMsg(m); err != nil {
				return nil, err
			}
		}
	}
	return nil, errors.New("atomic batch: no message")
}

// committer sends an atomic batch's commit and waits for the server's
// answer. The store's NATS connection does; a JetStream value given to
// OpenStore that has this method does instead (a wrapper that watches or
// fails the round trip, as a connection lost mid-batch would).
type committer interface {
	RequestMsgWithContext(ctx context.Context, m *nats.Msg) (*nats.Msg, error)
}

var _ committer = (*nats.Conn)(nil)

// The atomic batch headers of JetStream (nats.go does not name them).
const (
	batchIDHeader     = "Nats-Batch-Id"
	batchSeqHeader    = "Nats-Batch-Sequence"
	batchCommitHeader = "Nats-Batch-Commit"
)

// appendUnit appends u: through the group commit, or alone.
func (s *Store) appendUnit(ctx context.Context, u *unit) (seqs []uint64, err error) {
	if berr := s.Blocked(); berr != nil { // health.go
		return nil, errors.Wrapf(errkind.Wrap(ErrLogUnavailable, berr), "append %s", u.evs[0].EventID)
	}
	if cerr := s.connected(ctx); cerr != nil {
		return nil, errors.Wrapf(errkind.Wrap(ErrLogUnavailable, cerr), "append %s", u.evs[0].EventID)
	}
	defer func() { s.observe(ctx, err) }()
	if s.cfg.BatchMax < 2 || !s.atomic {
		return s.appendAlone(ctx, u)
	}
	if len(u.evs) == 1 && s.batch.takeIdle() {
		// The flusher is idle and nothing is queued: this one message
		// would be its whole flush, published alone. Publish it here,
		// holding the flusher's place so that what arrives meanwhile
		// waits for the next flush, without a goroutine and two hand-offs.
		defer s.batch.releaseIdle()
		return s.appendAlone(ctx, u)
	}
	s.batch.submit(u)
	return s.await(ctx, u)
}

// takeIdle takes a flusher's place for a lone unit when no flusher is at
// work and nothing is queued, unless every flush is to be batched
// (BatchMin 1). It says whether the place was taken.
func (b *batcher) takeIdle() bool {
	if b.s.cfg.BatchMin == 1 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running > 0 || len(b.queue) > 0 {
		return false
	}
	b.running++
	b.inFlight++ // as a batch in flight: a second flusher waits behind it
	b.stats.Alone++
	return true
}

// releaseIdle gives back the place takeIdle took, starting a flusher
// for what was queued meanwhile unless one waits for it.
func (b *batcher) releaseIdle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running--
	b.inFlight--
	b.wake.Broadcast()
	if len(b.queue) > 0 && b.running == 0 {
		b.running++
		go b.loop()
	}
}

// await waits for the flusher's answer on a submitted unit, and publishes
// the unit alone when it is handed back.
func (s *Store) await(ctx context.Context, u *unit) ([]uint64, error) {
	var r unitResult
	select {
	case r = <-u.res:
	case <-ctx.Done():
		if s.batch.withdraw(u) {
			return nil, errors.Errorf("append %s: not published: %w", u.evs[0].EventID, ctx.Err())
		}
		// Taken by the flusher: its answer comes within its publish
		// timeout; a hand-back then fails fast on the cancelled ctx.
		r = <-u.res
	}
	if !r.alone {
		return r.seqs, nil
	}
	defer r.done()
	return s.appendAlone(ctx, u)
}

// appendAlone publishes u's events one at a time, each with CAS on the
// previous one: the path of a lone Append, with its lost-ack resolution.
// It returns the sequences of the events that landed (a prefix) and the
// first error.
func (s *Store) appendAlone(ctx context.Context, u *unit) ([]uint64, error) {
	seqs := make([]uint64, 0, len(u.evs))
	expected := u.expected
	for i, e := range u.evs {
		seq, err := s.publishOne(ctx, u.subject, e, u.data[i], expected, u.appendID)
		if err != nil {
			return seqs, err
		}
		seqs = append(seqs, seq)
		expected = seq
	}
	return seqs, nil
}

// newUnit encodes evs (consecutive versions of one intent) as a unit.
func (s *Store) newUnit(route string, evs []events.Event, expectedLastSeq uint64, appendID string) (*unit, error) {
	if len(evs) == 0 {
		return nil, errors.New("append: no events")
	}
	u := &unit{subject: events.Subject(route, evs[0].IntentID), evs: evs, expected: expectedLastSeq, appendID: appendID,
		data: make([][]byte, len(evs))}
	for i, e := range evs {
		if i > 0 && (e.IntentID != evs[0].IntentID || e.Version != evs[i-1].Version+1) {
			return nil, errors.Errorf("append %s: events of one append must be consecutive versions of one intent", e.EventID)
		}
		data, err := events.Encode(e)
		if err != nil {
			return nil, errors.Errorf("append: %w", err)
		}
		u.data[i] = data
	}
	return u, nil
}

// AppendEvents appends consecutive events of one intent together: the first
// with CAS on expectedLastSeq (0: the subject must be empty), each next one
// right behind the one before. Through the group commit they go into one
// atomic batch (one sync); alone, one publish each, CAS on the previous.
// It returns the sequences of the events that landed, in order: all of them,
// or (with an error) a prefix, possibly empty. Errors mean what Append's do.
func (s *Store) AppendEvents(ctx context.Context, route string, evs []events.Event, expectedLastSeq uint64) ([]uint64, error) {
	u, err := s.newUnit(route, evs, expectedLastSeq, s.newAppendID())
	if err != nil {
		return nil, err
	}
	return s.appendUnit(ctx, u)
}
