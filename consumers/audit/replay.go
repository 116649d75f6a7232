package audit

import (
	"context"
	"hash/maphash"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// What can be done for one message alone (parse its subject, decode it,
// scan it for secrets) is prepared on several goroutines; what needs the
// log's order (folding, invariants, the report) is applied on one.

// preparedMsg is one stream message with what can be known of it alone.
type preparedMsg struct {
	seq     uint64
	subject string
	hdr     nats.Header
	data    []byte

	route, subjID string
	subjErr       error
	e             events.Event
	decErr        error
	hits          []secretHit
	// hold is the message's body when it is a hold marker
	// (events.HoldHeader), not an event.
	hold *events.Hold
}

// prepareMsg decodes and scans one message; it touches no shared state.
func prepareMsg(seq uint64, subject string, hdr nats.Header, data []byte) preparedMsg {
	m := preparedMsg{seq: seq, subject: subject, hdr: hdr, data: data}
	m.route, m.subjID, m.subjErr = events.ParseSubject(subject)
	if hdr.Get(events.HoldHeader) != "" {
		if h, err := events.DecodeHold(data); err == nil {
			m.hold = &h
		} else {
			m.decErr = err
		}
	} else {
		m.e, m.decErr = events.Decode(data)
	}
	// Secrets matter whether or not the event is readable.
	m.hits = scanSecrets(data)
	m.hits = append(m.hits, scanHeaders(hdr)...)
	return m
}

// auditChunk is a run of consecutive messages prepared together.
type auditChunk struct {
	msgs []preparedMsg
	err  error // the read that ended the run, if it failed
	done chan struct{}
}

// auditChunkSize is how many messages one goroutine prepares at a time.
const auditChunkSize = 256

// replay reads the stream from its first message up to target and audits
// every message: read on one goroutine (ledger.Reader: to the stream's
// end, asked of its leader, whatever copy the consumer reads), prepared
// on GOMAXPROCS goroutines, applied in stream order on the caller's.
func (a *auditor) replay(ctx context.Context, js jetstream.JetStream, target uint64) error {
	rd, err := ledger.OpenReader(ctx, js, ledger.ReaderConfig{Stream: a.cfg.Stream, Until: target, Batch: a.cfg.Batch, NamePrefix: "settle_audit"})
	if err != nil {
		return errors.Errorf("audit: %w", err)
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	workers := max(1, runtime.GOMAXPROCS(0))
	work := make(chan *auditChunk, 2*workers)
	order := make(chan *auditChunk, 4*workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				for i := range c.msgs {
					m := &c.msgs[i]
					*m = prepareMsg(m.seq, m.subject, m.hdr, m.data)
				}
				close(c.done)
			}
		}()
	}
	// The reader: chunks of consecutive messages, to the workers and, in
	// order, to the applier below, until the reader's end.
	wg.Add(1)
	go func() {
		defer wg.Done()
		readChunks(rctx, rd, work, order)
	}()
	for c := range order {
		select {
		case <-c.done:
		case <-ctx.Done():
			return errors.Errorf("audit: %w", ctx.Err())
		}
		for i := range c.msgs {
			a.apply(&c.msgs[i])
			if a.evict.err != nil {
				return a.evict.err
			}
			if a.cfg.Progress != nil && a.rep.Events-a.lastProgress >= a.cfg.ProgressEvery {
				a.lastProgress = a.rep.Events
				a.cfg.Progress(a.rep.Events, a.total)
			}
		}
		if c.err != nil {
			return c.err
		}
	}
	if err := ctx.Err(); err != nil {
		return errors.Errorf("audit: %w", err)
	}
	return nil
}

// readChunks reads rd to its end in chunks of consecutive messages, each
// sent to work (to be prepared) and, in order, to order (to be applied);
// it closes both and rd.
func readChunks(ctx context.Context, rd *ledger.Reader, work, order chan<- *auditChunk) {
	defer close(work)
	defer close(order)
	defer rd.Close()
	read := 0
	for {
		c := &auditChunk{done: make(chan struct{}), msgs: make([]preparedMsg, 0, auditChunkSize)}
		last := false
		for len(c.msgs) < auditChunkSize && !last {
			m, err := rd.Next(ctx)
			if errors.Is(err, io.EOF) {
				last = true
				break
			}
			if err != nil {
				c.err = errors.Errorf("audit: read after %d events: %w", read, err)
				break
			}
			c.msgs = append(c.msgs, preparedMsg{seq: m.Seq, subject: m.Subject, hdr: m.Header, data: m.Data})
			read++
		}
		select {
		case work <- c:
		case <-ctx.Done():
			return
		}
		select {
		case order <- c:
		case <-ctx.Done():
			return
		}
		if last || c.err != nil {
			return
		}
	}
}

// evictState keeps memory flat in finished intents (package doc): a
// confirmed intent with a clean history is dropped, its id kept in a
// Bloom filter; a later message naming it (a corrupt or hostile log)
// folds it again, silently, from the stream. Not with a projection check
// nor for the intent whose timeline is asked for.
type evictState struct {
	on       bool
	bloom    bloom
	count    int   // intents dropped and not restored
	restores int   // intents folded again from the stream
	err      error // a restore that could not read the stream
}

// evictable turns eviction on for a log of total messages.
func (a *auditor) evictable(total uint64) {
	if a.cfg.Projection != nil || a.stream == nil {
		return
	}
	a.evict.on = true
	a.evict.bloom = newBloom(total)
}

// maybeEvict drops t if it is confirmed and clean.
func (a *auditor) maybeEvict(t *auditIntent) {
	if !a.evict.on || t.fold.State != fsm.Confirmed || t.blocked || t.refused >= 0 || t.id == a.cfg.Intent {
		return
	}
	delete(a.intents, t.id)
	a.evict.bloom.add(t.id)
	a.evict.count++
}

// restored returns the dropped intent id (folded again from the stream
// messages before seq) when id may have been dropped and is not in memory;
// nil otherwise.
func (a *auditor) restored(id string, seq uint64) *auditIntent {
	if !a.evict.on || a.evict.err != nil {
		return nil
	}
	if _, ok := a.intents[id]; ok || !a.evict.bloom.has(id) {
		return nil
	}
	// A scratch auditor folds the earlier messages as the audit did
	// (its report is thrown away: they were reported when first read).
	sub := &auditor{cfg: a.cfg, intents: map[string]*auditIntent{}, rep: &AuditReport{States: map[fsm.State]int{}}}
	sub.cfg.Intent, sub.cfg.Projection = "", nil
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pattern := events.SubjectPrefix + ".*." + id
	for next := uint64(1); ; {
		m, err := a.stream.GetMsg(ctx, next, jetstream.WithGetMsgSubject(pattern))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			a.evict.err = errors.Errorf("audit: re-read intent %s: %w", id, err)
			return nil
		}
		if m.Sequence >= seq {
			break
		}
		pm := prepareMsg(m.Sequence, m.Subject, m.Header, m.Data)
		sub.apply(&pm)
		next = m.Sequence + 1
	}
	t := sub.intents[id]
	if t == nil {
		return nil // a false positive of the filter: a new intent
	}
	a.intents[id] = t
	a.evict.count--
	a.evict.restores++
	return t
}

// bloom is a Bloom filter of intent ids (double hashing, 7 probes).
type bloom struct {
	bits []uint64
	seed maphash.Seed
}

// newBloom sizes the filter at 10 bits per message of the log (an intent
// has at least one), at most 64 MiB.
func newBloom(msgs uint64) bloom {
	words := min(max(msgs*10/64, 1024), 8<<20)
	return bloom{bits: make([]uint64, words), seed: maphash.MakeSeed()}
}

func (b *bloom) probes(id string, f func(bit uint64)) {
	h := maphash.String(b.seed, id)
	h1, h2 := h, h>>29|1
	n := uint64(len(b.bits)) * 64
	for i := uint64(0); i < 7; i++ {
		f((h1 + i*h2) % n)
	}
}

func (b *bloom) add(id string) {
	b.probes(id, func(bit uint64) { b.bits[bit/64] |= 1 << (bit % 64) })
}

func (b *bloom) has(id string) bool {
	all := true
	b.probes(id, func(bit uint64) { all = all && b.bits[bit/64]&(1<<(bit%64)) != 0 })
	return all
}
