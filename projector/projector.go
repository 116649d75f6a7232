package projector

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
)

// Sentinel errors.
var (
	// ErrNotFound: no intent (or no event) matches.
	ErrNotFound = errors.New("projector: not found")
	// ErrSchema: the database was written by another schema version.
	ErrSchema = errors.New("projector: schema mismatch")
	// ErrStreamMismatch: the database projects another stream, or a stream
	// shorter than its checkpoint (recreated): rebuild it.
	ErrStreamMismatch = errors.New("projector: database does not match the stream")
	// ErrClosed: the projector was closed.
	ErrClosed = errors.New("projector: closed")
)

// Stats are counters since Open.
type Stats struct {
	// Checkpoint is the stream sequence of the last event applied or
	// quarantined.
	Checkpoint uint64
	// Applied counts events folded into the views.
	Applied uint64
	// Quarantined counts events written to the quarantine table.
	Quarantined uint64
	// Skipped counts deliveries at or below the checkpoint (redeliveries
	// after a consumer reset or a competing projector).
	Skipped uint64
	// Batches counts committed transactions.
	Batches uint64
	// CacheHits and CacheMisses count lookups of folded intents; a miss
	// re-folds the intent from the events table.
	CacheHits   uint64
	CacheMisses uint64
	// Reapplied counts batches applied a second time, looking every
	// intent up, because an event of version 1 taken for a new intent's
	// found its intent's row already there (only a damaged log repeats a
	// first event).
	Reapplied uint64
	// Cached is the number of folded intents in memory now.
	Cached int
	// UnsyncedCatchUps counts catch-ups run without syncs (see
	// Config.UnsyncedBacklog).
	UnsyncedCatchUps uint64
	// Unsynced reports whether one is in progress.
	Unsynced bool
}

// Projector keeps the receipt views of one stream in one SQLite database.
// Queries are safe for concurrent use with each other and with Run or
// CatchUp; Run and CatchUp serialise with each other.
type Projector struct {
	cfg    Config
	log    *slog.Logger
	js     jetstream.JetStream
	stream jetstream.Stream
	w      *sql.DB // the single writer connection
	r      *sql.DB // read-only pool
	st     stmts
	rows   rowStmts // the row writers' statements (applyMu)

	consumeMu sync.Mutex // held by the one Run/CatchUp that consumes

	applyMu    sync.Mutex // held while a batch is applied
	cache      *lru
	checkpoint uint64
	closed     bool
	unsynced   bool          // the writer runs with synchronous=OFF; the marker is on disk
	done       chan struct{} // closed by Close: stops Run and CatchUp

	spare chan []rawMsg // batches the applier is done with, for the read-ahead

	progressMu sync.Mutex
	progress   chan struct{} // closed and replaced after every commit

	applied, quarantined, skipped, batches, hits, misses, careful atomic.Uint64
	unsyncedRuns                                                  atomic.Uint64
	cachedN                                                       atomic.Int64
	cp                                                            atomic.Uint64
	unsyncedNow, noBootID                                         atomic.Bool

	// test hooks, called inside applyMu with the batch's new checkpoint.
	beforeCommit func(seq uint64)
	afterCommit  func(seq uint64)
}

// Open opens (or creates) the database at cfg.DBPath and checks that it
// projects cfg.Stream. Zero fields of cfg take their DefaultConfig values.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Projector, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	stream, err := ledger.CheckedStream(ctx, js, cfg.Stream, "open projector")
	if err != nil {
		return nil, err
	}
	found, removed, why, err := recoverUnsynced(cfg.DBPath)
	if err != nil {
		return nil, errors.Errorf("open projector: an unsynced catch-up was interrupted: %w", err)
	}
	switch {
	case removed:
		cfg.Logger.Warn("projector: an unsynced catch-up was interrupted and the database may be torn: removed it, the views are rebuilt from the log",
			"db", cfg.DBPath, "why", why)
	case found:
		cfg.Logger.Info("projector: an unsynced catch-up was interrupted by a stop of the process (the machine did not restart): synced the database, resuming from its checkpoint",
			"db", cfg.DBPath)
	}
	w, r, err := openDBs(ctx, cfg.DBPath)
	if err != nil {
		return nil, errors.Errorf("open projector: %w", err)
	}
	p := &Projector{cfg: cfg, log: cfg.Logger, js: js, stream: stream, w: w, r: r,
		cache: newLRU(cfg.CacheSize), progress: make(chan struct{}), done: make(chan struct{}),
		spare: make(chan []rawMsg, 1)}
	if err := p.init(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, errors.Errorf("open projector: %w", err)
	}
	return p, nil
}

func (p *Projector) init(ctx context.Context) error {
	have, err := metaValue(ctx, p.w, "stream")
	if err != nil {
		return err
	}
	if have != "" && have != p.cfg.Stream {
		return errors.Errorf("%w: %s projects stream %q, not %q", ErrStreamMismatch, p.cfg.DBPath, have, p.cfg.Stream)
	}
	if have == "" {
		if _, err := p.w.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('stream', ?)`, p.cfg.Stream); err != nil {
			return err
		}
	}
	if err := p.w.QueryRowContext(ctx, `SELECT seq FROM checkpoint WHERE id = 1`).Scan(&p.checkpoint); err != nil {
		return err
	}
	p.cp.Store(p.checkpoint)
	if last := p.stream.CachedInfo().State.LastSeq; p.checkpoint > last {
		return errors.Errorf("%w: checkpoint %d is past the stream's last sequence %d (was the stream recreated?): rebuild %s",
			ErrStreamMismatch, p.checkpoint, last, p.cfg.DBPath)
	}
	if err := p.checkLastApplied(ctx); err != nil {
		return err
	}
	return p.st.prepare(ctx, p.w)
}

// checkLastApplied compares the message at the checkpoint with the bytes
// the database recorded for it: a recreated stream that grew past the
// checkpoint would otherwise be projected on top of another history.
func (p *Projector) checkLastApplied(ctx context.Context) error {
	if p.checkpoint == 0 {
		return nil
	}
	var stored []byte
	err := p.w.QueryRowContext(ctx, `SELECT raw FROM events WHERE seq = ?1
		UNION ALL SELECT raw FROM quarantine WHERE seq = ?1`, int64(p.checkpoint)).Scan(&stored)
	if err != nil {
		return errors.Errorf("read the event at checkpoint %d: %w", p.checkpoint, err)
	}
	m, err := p.stream.GetMsg(ctx, p.checkpoint)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		p.log.Warn("projector: the event at the checkpoint is no longer in the stream; cannot prove the database projects it",
			"stream", p.cfg.Stream, "checkpoint", p.checkpoint)
		return nil
	}
	if err != nil {
		return errors.Errorf("read stream seq %d: %w", p.checkpoint, err)
	}
	if !bytes.Equal(m.Data, stored) {
		return errors.Errorf("%w: stream %s holds another event at the checkpoint %d than %s applied (was the stream recreated?): rebuild it",
			ErrStreamMismatch, p.cfg.Stream, p.checkpoint, p.cfg.DBPath)
	}
	return nil
}

// Config returns the effective config.
func (p *Projector) Config() Config { return p.cfg }

// Close closes the database after the batch in progress, if any: a Run or
// CatchUp in progress returns ErrClosed.
func (p *Projector) Close() error {
	p.applyMu.Lock()
	if p.closed {
		p.applyMu.Unlock()
		return nil
	}
	endErr := p.endUnsyncedLocked(context.Background())
	p.closed = true
	close(p.done)
	rowsErr := p.rows.close(p.w)
	p.applyMu.Unlock()
	p.st.close()
	return errors.Join(endErr, rowsErr, p.w.Close(), p.r.Close())
}

// Stats returns the counters.
func (p *Projector) Stats() Stats {
	return Stats{
		Checkpoint:  p.cp.Load(),
		Applied:     p.applied.Load(),
		Quarantined: p.quarantined.Load(),
		Skipped:     p.skipped.Load(),
		Batches:     p.batches.Load(),
		CacheHits:   p.hits.Load(),
		CacheMisses: p.misses.Load(),
		Reapplied:   p.careful.Load(),
		Cached:      int(p.cachedN.Load()),

		UnsyncedCatchUps: p.unsyncedRuns.Load(),
		Unsynced:         p.unsyncedNow.Load(),
	}
}

// Run applies the stream from the checkpoint on, as events arrive, until
// ctx ends (it then returns nil). Consumer errors (a server restart, a
// lost connection) are logged and the consumer is recreated at the
// checkpoint; a database error ends Run with that error.
func (p *Projector) Run(ctx context.Context) error {
	p.consumeMu.Lock()
	defer p.release()
	err := p.consume(ctx, false, 0)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// CatchUp applies every event the stream holds when it is called and
// returns. When a Run is in progress it waits for Run to get there.
func (p *Projector) CatchUp(ctx context.Context) error {
	info, err := p.stream.Info(ctx)
	if err != nil {
		return errors.Errorf("catch up: stream %s: %w", p.cfg.Stream, err)
	}
	target := info.State.LastSeq
	for {
		if p.cp.Load() >= target {
			return nil
		}
		if p.consumeMu.TryLock() {
			err := p.consume(ctx, true, target)
			p.release()
			if err != nil {
				return errors.Errorf("catch up to %d: %w", target, err)
			}
			return nil
		}
		// Another Run/CatchUp consumes: wait for its progress.
		ch := p.progressCh()
		if p.cp.Load() >= target {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Errorf("catch up to %d: %w", target, ctx.Err())
		case <-p.done:
			return errors.Errorf("catch up to %d: %w", target, ErrClosed)
		case <-ch:
		}
	}
}

func (p *Projector) release() {
	p.consumeMu.Unlock()
	p.notify()
}

func (p *Projector) progressCh() <-chan struct{} {
	p.progressMu.Lock()
	defer p.progressMu.Unlock()
	return p.progress
}

func (p *Projector) notify() {
	p.progressMu.Lock()
	close(p.progress)
	p.progress = make(chan struct{})
	p.progressMu.Unlock()
}

// applyError is a database failure: consuming cannot go on.
type applyError struct{ err error }

func (e *applyError) Error() string { return e.err.Error() }
func (e *applyError) Unwrap() error { return e.err }

// consume reads the stream from checkpoint+1 (ledger.Reader) and applies
// it in batches. With untilCaughtUp it returns once the checkpoint reaches
// target or the reader reaches the stream's end (where its messages end,
// asked of its leader: a consumer on a copy that lags does not end it).
func (p *Projector) consume(parent context.Context, untilCaughtUp bool, target uint64) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	go func() {
		select {
		case <-p.done:
			cancel(ErrClosed)
		case <-ctx.Done():
		}
	}()
	err := p.consumeLoop(ctx, untilCaughtUp, target)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

func (p *Projector) consumeLoop(ctx context.Context, untilCaughtUp bool, target uint64) error {
	backoff := 50 * time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if untilCaughtUp && p.cp.Load() >= target {
			return nil
		}
		done, err := p.consumeOnce(ctx, untilCaughtUp, target)
		if err == nil && done {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ae *applyError
		if errors.As(err, &ae) || errors.Is(err, ErrClosed) {
			return err
		}
		if err == nil {
			backoff = 50 * time.Millisecond
			continue // the checkpoint moved on: resume there at once
		}
		p.log.Warn("projector: consumer error, resuming from checkpoint", "stream", p.cfg.Stream, "checkpoint", p.cp.Load(), "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (p *Projector) consumeOnce(ctx context.Context, untilCaughtUp bool, target uint64) (done bool, err error) {
	// The reader (see consume) reads to target, or on as events come (Run).
	rc := ledger.ReaderConfig{Stream: p.cfg.Stream, From: p.cp.Load() + 1, Batch: max(2*p.cfg.Batch, 64), NamePrefix: p.cfg.Durable}
	if untilCaughtUp {
		rc.Until = target
	} else {
		rc.Follow = true
	}
	rd, err := ledger.OpenReader(ctx, p.js, rc)
	if err != nil {
		return false, err
	}
	rctx, cancel := context.WithCancel(ctx)
	batches, wait := p.readAhead(rctx, rd)
	defer func() {
		// However consuming ends, the views are synced again.
		if uerr := p.endUnsynced(ctx); uerr != nil && err == nil {
			err = &applyError{uerr}
		}
		cancel()
		wait()
		// An idle projector keeps no batch slice.
		select {
		case <-p.spare:
		default:
		}
	}()
	for rb := range batches {
		batch, err := rb.msgs, rb.err
		if len(batch) > 0 {
			if last := batch[len(batch)-1]; last.pending > 0 && p.shouldGoUnsynced(uint64(len(batch))+last.pending) {
				if uerr := p.beginUnsynced(ctx, uint64(len(batch))+last.pending); uerr != nil {
					return false, uerr
				}
			}
			if aerr := p.applyBatch(ctx, batch); aerr != nil {
				return false, aerr
			}
			if batch[len(batch)-1].pending == 0 {
				if uerr := p.endUnsynced(ctx); uerr != nil {
					return false, &applyError{uerr}
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return true, nil // the reader's end: target, or where the stream's messages end
		}
		if err != nil {
			return false, err
		}
		last := batch[len(batch)-1]
		if untilCaughtUp && p.cp.Load() >= target {
			return true, nil
		}
		if p.cp.Load() > last.seq {
			// Another projector wrote this database past what we read:
			// resume from its checkpoint rather than skip our way there.
			return false, nil
		}
		p.recycle(batch)
	}
	return false, ctx.Err()
}

// rawMsg is one stream message as the projector needs it, and (decoded)
// what it says.
type rawMsg struct {
	seq     uint64
	subject string
	data    []byte
	pending uint64
	// held: the message is a hold marker (events.HoldHeader), not an event.
	held bool

	decoded       bool
	route, subjID string
	subjErr       error
	e             events.Event
	decErr        error
}

// decode parses the subject and decodes the event (no shared state).
func (m *rawMsg) decode() {
	m.route, m.subjID, m.subjErr = events.ParseSubject(m.subject)
	if m.subjErr == nil && !m.held {
		m.e, m.decErr = events.Decode(m.data)
	}
	m.decoded = true
}
