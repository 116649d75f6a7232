package projector

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
)

// Quarantine codes: why an event was not applied. The decode and fold
// codes are events' (events.DecodeCode) and fsm's (fsm.FoldCode); the
// subject checks and the hold marker are the projector's own.
const (
	QuarantineBadSubject      = "bad_subject"      // not settle.intents.<route>.<intent_id>
	QuarantineSubjectMismatch = "subject_mismatch" // envelope intent_id is not the subject's
	QuarantineRouteMismatch   = "route_mismatch"   // recorded route is not the subject's
	// QuarantineHeld: the message is an intent's hold marker
	// (events.HoldHeader), not an event: the intent lost events in a log
	// loss an operator accepted. The row is the views' record of the hold.
	QuarantineHeld = "held"
)

// stmts are the writer's prepared statements (database/sql). The rows of
// events and intents (with their receipts) are written by rowWriter, with
// statements of its own.
type stmts struct {
	insertQuarantine, loadEvents *sql.Stmt
}

// Rows per multi-row statement (each under SQLite's 32766 variables). The
// driver grows its list of a statement's text and blob buffers by a
// quarter past 256, so 8 intent rows (216 such arguments) allocate less
// per row than 32.
const (
	eventRows  = 64
	intentRows = 8
)

// insertSQL is INSERT OR FAIL INTO table (cols) VALUES (?, …) × rows, then
// tail. OR FAIL: a statement that fails keeps the rows it wrote before
// (the default, ABORT, undoes them), which is safe here because a failed
// statement fails its whole batch, rolled back; and it spares every
// multi-row statement a statement journal, a copy of each page it is the
// first to change (the random intent_id index pages of each intent).
func insertSQL(table string, cols []string, rows int, tail string) string {
	one := "(?" + strings.Repeat(", ?", len(cols)-1) + ")"
	return "INSERT OR FAIL INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES " +
		one + strings.Repeat(", "+one, rows-1) + tail
}

var (
	eventRowCols  = []string{"seq", "intent_id", "version", "type", "raw"}
	intentRowCols = []string{"intent_id", "tenant", "route", "account", "request_id", "idempotency_key",
		"state", "attempts", "external_id", "live_url", "last_event_type", "last_event_at", "version", "last_seq", "next_check_at",
		"manual_reason", "manual_owner", "evidence", "failure", "unknown_since", "created_at", "updated_at", "payload_sha256", "planned_at", "event_seqs",
		"receipt_source", "receipt_external_id", "receipt_live_url", "receipt_payload_sha256", "receipt_readback_at",
		"receipt_checks", "receipt_request_id", "receipt_idempotency_key", "receipt_attempt_id"}
)

// upsertIntentTail updates what an event can change; event_seqs gets the
// batch's sequences appended ("[1,5]" and "[9]" give "[1,5,9]").
const upsertIntentTail = ` ON CONFLICT (intent_id) DO UPDATE SET
	state = excluded.state, attempts = excluded.attempts, external_id = excluded.external_id,
	live_url = excluded.live_url, last_event_type = excluded.last_event_type,
	last_event_at = excluded.last_event_at, version = excluded.version, last_seq = excluded.last_seq,
	next_check_at = excluded.next_check_at, manual_reason = excluded.manual_reason,
	manual_owner = excluded.manual_owner, evidence = excluded.evidence, failure = excluded.failure,
	unknown_since = excluded.unknown_since, updated_at = excluded.updated_at,
	event_seqs = substr(intents.event_seqs, 1, length(intents.event_seqs) - 1) || ',' || substr(excluded.event_seqs, 2),
	receipt_source = excluded.receipt_source, receipt_external_id = excluded.receipt_external_id,
	receipt_live_url = excluded.receipt_live_url, receipt_payload_sha256 = excluded.receipt_payload_sha256,
	receipt_readback_at = excluded.receipt_readback_at, receipt_checks = excluded.receipt_checks,
	receipt_request_id = excluded.receipt_request_id, receipt_idempotency_key = excluded.receipt_idempotency_key,
	receipt_attempt_id = excluded.receipt_attempt_id`

// insertIntentTail: the rows of intents taken for new change nothing
// where a row is there (RowsAffected tells).
const insertIntentTail = ` ON CONFLICT (intent_id) DO NOTHING`

// loadEventsSQL reads an intent's applied events in version order (which
// is stream order: the fold accepts only the next version).
const loadEventsSQL = `SELECT seq, raw FROM events WHERE seq IN
	(SELECT value FROM json_each((SELECT event_seqs FROM intents WHERE intent_id = ?))) ORDER BY seq`

func (s *stmts) prepare(ctx context.Context, db *sql.DB) (err error) {
	s.insertQuarantine, err = db.PrepareContext(ctx, `INSERT INTO quarantine (seq, subject, intent_id, code, reason, raw) VALUES (?, ?, ?, ?, ?, ?)`)
	if err == nil {
		s.loadEvents, err = db.PrepareContext(ctx, loadEventsSQL)
	}
	if err != nil {
		s.close()
		return errors.Errorf("prepare: %w", err)
	}
	return nil
}

func (s *stmts) close() {
	for _, st := range []*sql.Stmt{s.insertQuarantine, s.loadEvents} {
		if st != nil {
			st.Close()
		}
	}
}

// The row writers' statements: one row, and eventRows or intentRows rows.
const (
	sqlEvent = iota
	sqlEvents
	sqlUpsertIntent
	sqlUpsertIntents
	sqlInsertIntent
	sqlInsertIntents
	nRowSQL
)

var rowSQL = [nRowSQL]string{
	sqlEvent:         insertSQL("events", eventRowCols, 1, ""),
	sqlEvents:        insertSQL("events", eventRowCols, eventRows, ""),
	sqlUpsertIntent:  insertSQL("intents", intentRowCols, 1, upsertIntentTail),
	sqlUpsertIntents: insertSQL("intents", intentRowCols, intentRows, upsertIntentTail),
	sqlInsertIntent:  insertSQL("intents", intentRowCols, 1, insertIntentTail),
	sqlInsertIntents: insertSQL("intents", intentRowCols, intentRows, insertIntentTail),
}

// rowStmts are the row writers' statements, prepared on the writer's
// driver connection and run there directly (sql.Conn.Raw): database/sql
// would copy and convert every argument of every Exec. They are used
// only under applyMu, inside Raw; a driver connection other than
// the one they were prepared on (database/sql replaced a broken one)
// gets its own.
type rowStmts struct {
	dc    any
	stmts [nRowSQL]driver.StmtExecContext
}

// get returns statement which of dc, preparing it when needed.
func (r *rowStmts) get(ctx context.Context, dc any, which int) (driver.StmtExecContext, error) {
	if r.dc != dc {
		// The statements of a connection database/sql closed went with it.
		r.dc, r.stmts = dc, [nRowSQL]driver.StmtExecContext{}
	}
	if st := r.stmts[which]; st != nil {
		return st, nil
	}
	pc, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, errors.Errorf("the sqlite driver's connection %T cannot prepare with a context", dc)
	}
	st, err := pc.PrepareContext(ctx, rowSQL[which])
	if err != nil {
		return nil, errors.Errorf("prepare: %w", err)
	}
	se, ok := st.(driver.StmtExecContext)
	if !ok {
		st.Close()
		return nil, errors.Errorf("the sqlite driver's statement %T cannot exec with a context", st)
	}
	r.stmts[which] = se
	return se, nil
}

// close closes the statements (db is the writer pool they came from).
func (r *rowStmts) close(db *sql.DB) error {
	if r.dc == nil {
		return nil
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		var errs []error
		if dc == r.dc {
			for _, st := range r.stmts {
				if c, ok := st.(driver.Stmt); ok && c != nil {
					errs = append(errs, c.Close())
				}
			}
		}
		r.dc, r.stmts = nil, [nRowSQL]driver.StmtExecContext{}
		return errors.Join(errs...)
	})
}

// rowWriter writes the rows of one statement several at a time, in the
// batch's transaction on conn: rows are buffered and written by the
// statement of n rows when n are there, the rest by the one-row statement
// at flush. With changeAll, a row that changed nothing (RowsAffected
// short) is errNotNew.
type rowWriter struct {
	conn      *sql.Conn
	rs        *rowStmts
	one, many int // rowSQL
	cols, n   int
	changeAll bool
	args      []driver.NamedValue // n rows; k values buffered
	k         int
	oneArgs   []driver.NamedValue
}

func newRowWriter(conn *sql.Conn, rs *rowStmts, one, many, cols, n int, changeAll bool) *rowWriter {
	w := &rowWriter{conn: conn, rs: rs, one: one, many: many, cols: cols, n: n, changeAll: changeAll,
		args: make([]driver.NamedValue, cols*n), oneArgs: make([]driver.NamedValue, cols)}
	for i := range w.args {
		w.args[i].Ordinal = i + 1
	}
	for i := range w.oneArgs {
		w.oneArgs[i].Ordinal = i + 1
	}
	return w
}

// add buffers one row (len(vals) == cols), writing n rows when n are
// buffered. Values are what the driver takes (nil, int64, string,
// []byte; an int is made an int64).
func (w *rowWriter) add(ctx context.Context, vals ...any) error {
	for _, v := range vals {
		switch x := v.(type) {
		case nil, int64, string, []byte:
		case int:
			v = int64(x)
		default:
			return errors.Errorf("row value of type %T", v)
		}
		w.args[w.k].Value = v
		w.k++
	}
	if w.k < len(w.args) {
		return nil
	}
	defer w.reset()
	return w.exec(ctx, w.many, w.args, w.n)
}

// flush writes the rows still buffered.
func (w *rowWriter) flush(ctx context.Context) error {
	defer w.reset()
	for a := w.args[:w.k]; len(a) > 0; a = a[w.cols:] {
		for i := range w.oneArgs {
			w.oneArgs[i].Value = a[i].Value
		}
		if err := w.exec(ctx, w.one, w.oneArgs, 1); err != nil {
			return err
		}
	}
	return nil
}

// reset drops the buffered rows (and the references they hold).
func (w *rowWriter) reset() {
	for i := range w.args[:w.k] {
		w.args[i].Value = nil
	}
	for i := range w.oneArgs {
		w.oneArgs[i].Value = nil
	}
	w.k = 0
}

func (w *rowWriter) exec(ctx context.Context, which int, args []driver.NamedValue, rows int) error {
	return w.conn.Raw(func(dc any) error {
		st, err := w.rs.get(ctx, dc, which)
		if err != nil {
			return err
		}
		res, err := st.ExecContext(ctx, args)
		if err != nil {
			return err
		}
		if w.changeAll {
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n != int64(rows) {
				return errNotNew
			}
		}
		return nil
	})
}

// batchTx is one batch being applied: its transaction and the intents it
// changed, which reach the cache only once the transaction commits.
type batchTx struct {
	ctx                                         context.Context
	events, upsertIntents, newIntents           *rowWriter
	insertQuarantine, loadEvents                *sql.Stmt
	pending                                     map[string]*pendingIntent
	assumedNew                                  map[string]bool // first events not looked up (see applyBatch)
	careful                                     bool
	order                                       []string
	applied, quarantined, skipped, hits, misses uint64
}

// pendingIntent is an intent the batch changed: its fold after the
// batch's last event of it, and the sequences of the batch's events of it.
type pendingIntent struct {
	folded
	seqs []byte // "[s1,s2" of the events this batch applied
	buf  [40]byte
}

type quarantined struct {
	seq                             uint64
	subject, intentID, code, reason string
}

// errNotNew: an intent whose first event the batch took for a new
// intent's already had a row. The batch is rolled back and applied again,
// looking every intent up.
var errNotNew = errors.New("projector: an intent taken for new has a row")

// applyBatch applies msgs (ascending stream sequences) in one transaction
// that also moves the checkpoint. Messages at or below the checkpoint in
// SQL are skipped. On any error nothing of the batch is kept.
//
// An event of version 1 that is neither in the batch nor in the cache
// normally starts a new intent, so it is not looked up in SQL: its row is
// inserted without upsert, and only if a row was there after all (a version 1 repeated on
// a damaged log) is the batch applied again with every lookup made. The
// outcome is the same either way.
func (p *Projector) applyBatch(ctx context.Context, msgs []rawMsg) error {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	if p.closed {
		return ErrClosed
	}
	err := p.applyBatchTx(ctx, msgs, false)
	if errors.Is(err, errNotNew) {
		p.careful.Add(1)
		err = p.applyBatchTx(ctx, msgs, true)
	}
	return err
}

// applyBatchTx is one attempt of applyBatch; careful looks every intent up.
func (p *Projector) applyBatchTx(ctx context.Context, msgs []rawMsg, careful bool) error {
	// The statements run with a context that is never done: modernc's
	// driver starts a watcher goroutine for every statement whose context
	// can end. Each statement
	// is short; ctx is checked between messages, and the transaction is
	// rolled back when ctx ends. Nor can the transaction's context end:
	// database/sql would roll it back on its own, under the row writers,
	// which write on its connection past database/sql (rowWriter).
	sctx := context.WithoutCancel(ctx)
	conn, err := p.w.Conn(ctx)
	if err != nil {
		return &applyError{errors.Errorf("begin: %w", err)}
	}
	defer conn.Close()
	tx, err := conn.BeginTx(sctx, nil)
	if err != nil {
		return &applyError{errors.Errorf("begin: %w", err)}
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	start, err := p.txCheckpoint(ctx, tx)
	if err != nil {
		return err
	}
	b := &batchTx{
		ctx:              sctx,
		events:           newRowWriter(conn, &p.rows, sqlEvent, sqlEvents, len(eventRowCols), eventRows, false),
		upsertIntents:    newRowWriter(conn, &p.rows, sqlUpsertIntent, sqlUpsertIntents, len(intentRowCols), intentRows, false),
		newIntents:       newRowWriter(conn, &p.rows, sqlInsertIntent, sqlInsertIntents, len(intentRowCols), intentRows, true),
		insertQuarantine: tx.StmtContext(ctx, p.st.insertQuarantine),
		loadEvents:       tx.StmtContext(ctx, p.st.loadEvents),
		pending:          make(map[string]*pendingIntent, len(msgs)/2),
		assumedNew:       make(map[string]bool), careful: careful,
	}
	cp, qs, err := p.applyMsgs(ctx, b, msgs, start)
	if err != nil {
		return err
	}
	if cp == start {
		p.skipped.Add(b.skipped)
		return nil
	}
	if err := b.writeBatch(tx, cp); err != nil {
		return err
	}
	if p.beforeCommit != nil {
		p.beforeCommit(cp)
	}
	if err := tx.Commit(); err != nil {
		return &applyError{errors.Errorf("commit checkpoint %d: %w", cp, err)}
	}
	committed = true
	p.committed(b, cp, qs)
	return nil
}

// txCheckpoint reads the checkpoint in tx; when another writer moved it,
// the cache is dropped.
func (p *Projector) txCheckpoint(ctx context.Context, tx *sql.Tx) (uint64, error) {
	var cp uint64
	if err := tx.QueryRowContext(ctx, `SELECT seq FROM checkpoint WHERE id = 1`).Scan(&cp); err != nil {
		return 0, &applyError{errors.Errorf("read checkpoint: %w", err)}
	}
	if cp != p.checkpoint {
		// Someone else wrote this database: what we hold may be stale.
		p.log.Warn("projector: checkpoint moved under us, dropping the cache", "db", p.cfg.DBPath, "ours", p.checkpoint, "sql", cp)
		p.cache.purge()
		p.checkpoint = cp
		p.cp.Store(cp)
		p.cachedN.Store(0)
	}
	return cp, nil
}

// applyMsgs folds the messages past cp into the batch, quarantining what
// cannot be folded; it returns the last sequence applied.
func (p *Projector) applyMsgs(ctx context.Context, b *batchTx, msgs []rawMsg, cp uint64) (uint64, []quarantined, error) {
	var qs []quarantined
	for _, m := range msgs {
		if m.seq <= cp {
			b.skipped++
			continue
		}
		if err := ctx.Err(); err != nil {
			return 0, nil, &applyError{errors.Errorf("apply seq %d: %w", m.seq, err)}
		}
		q, err := p.applyOne(b, m)
		if err != nil {
			return 0, nil, &applyError{errors.Errorf("apply seq %d (%s): %w", m.seq, m.subject, err)}
		}
		if q != nil {
			if _, err := b.insertQuarantine.ExecContext(b.ctx, q.seq, q.subject, q.intentID, q.code, q.reason, m.data); err != nil {
				return 0, nil, &applyError{errors.Errorf("quarantine seq %d: %w", m.seq, err)}
			}
			qs = append(qs, *q)
			b.quarantined++
		} else {
			b.applied++
		}
		cp = m.seq
	}
	return cp, qs, nil
}

// writeBatch writes the batch's events and views and the checkpoint cp
// in tx. errNotNew is returned as it is.
func (b *batchTx) writeBatch(tx *sql.Tx, cp uint64) error {
	if err := b.events.flush(b.ctx); err != nil {
		return &applyError{errors.Errorf("insert events: %w", err)}
	}
	for _, id := range b.order {
		if err := b.writeViews(id, b.pending[id]); errors.Is(err, errNotNew) {
			return err
		} else if err != nil {
			return &applyError{errors.Errorf("write views of %s: %w", id, err)}
		}
	}
	for _, w := range []*rowWriter{b.upsertIntents, b.newIntents} {
		if err := w.flush(b.ctx); errors.Is(err, errNotNew) {
			return err
		} else if err != nil {
			return &applyError{errors.Errorf("write views: %w", err)}
		}
	}
	if _, err := tx.ExecContext(b.ctx, `UPDATE checkpoint SET seq = ? WHERE id = 1`, cp); err != nil {
		return &applyError{errors.Errorf("write checkpoint: %w", err)}
	}
	return nil
}

// committed updates the cache and the counters after the batch up to cp
// committed, and logs what it quarantined.
func (p *Projector) committed(b *batchTx, cp uint64, qs []quarantined) {
	p.checkpoint = cp
	for _, id := range b.order {
		pi := b.pending[id]
		pi.seqs = nil // the cache keeps the fold, not the batch's sequences
		f := &pi.folded
		if f.intent.State.Terminal() {
			p.cache.remove(id)
		} else {
			p.cache.put(id, f)
		}
	}
	p.cp.Store(cp)
	p.cachedN.Store(int64(p.cache.len()))
	p.applied.Add(b.applied)
	p.quarantined.Add(b.quarantined)
	p.skipped.Add(b.skipped)
	p.hits.Add(b.hits)
	p.misses.Add(b.misses)
	p.batches.Add(1)
	for _, q := range qs {
		p.log.Warn("projector: event quarantined", "seq", q.seq, "subject", q.subject, "intent_id", q.intentID, "code", q.code, "reason", q.reason)
	}
	if p.afterCommit != nil {
		p.afterCommit(cp)
	}
	p.notify()
}

// applyOne folds one message into the batch, or says why it is
// quarantined. An error is a database failure.
func (p *Projector) applyOne(b *batchTx, m rawMsg) (*quarantined, error) {
	q := func(intentID, code, reason string) (*quarantined, error) {
		return &quarantined{seq: m.seq, subject: m.subject, intentID: intentID, code: code, reason: reason}, nil
	}
	if !m.decoded {
		m.decode()
	}
	route, subjID, e := m.route, m.subjID, m.e
	if m.subjErr != nil {
		return q("", QuarantineBadSubject, m.subjErr.Error())
	}
	if m.held {
		why := "hold marker: the intent lost events in a log loss an operator accepted; nothing is written for it"
		if h, err := events.DecodeHold(m.data); err == nil {
			why += "; lost: " + h.Named()
		}
		return q(subjID, QuarantineHeld, why)
	}
	if m.decErr != nil {
		return q(subjID, events.DecodeCode(m.decErr), m.decErr.Error())
	}
	if e.IntentID != subjID {
		return q(subjID, QuarantineSubjectMismatch, fmt.Sprintf("envelope intent_id %s on the subject of %s", e.IntentID, subjID))
	}
	if d := events.Recorded(e); d != nil && d.Route != route { // IntentRecorded or IntentStarted
		return q(subjID, QuarantineRouteMismatch, fmt.Sprintf("recorded route %q on a %q subject", d.Route, route))
	}
	prev, pi, err := p.lookup(b, subjID, e.Version)
	if err != nil {
		return nil, err
	}
	if prev != nil && prev.intent.Recorded.Route != route {
		// Off its subject the event escaped the per-subject CAS.
		return q(subjID, QuarantineRouteMismatch, fmt.Sprintf("intent recorded on route %q, event on a %q subject", prev.intent.Recorded.Route, route))
	}
	var next *fsm.Intent
	switch {
	case prev == nil:
		next = &fsm.Intent{State: fsm.None}
	case pi != nil:
		next = prev.intent // uncommitted: Apply leaves it unchanged on error
	default:
		next = prev.intent.Clone()
	}
	if err := next.Apply(e); err != nil {
		return q(subjID, fsm.FoldCode(err), err.Error())
	}
	// The row is written with others (rowWriter): nothing reads an
	// intent's rows back while it is pending in the batch.
	if err := b.events.add(b.ctx, int64(m.seq), e.IntentID, int64(e.Version), string(e.Type), m.data); err != nil {
		return nil, errors.Errorf("insert events: %w", err)
	}
	if pi == nil {
		pi = &pendingIntent{folded: folded{intent: next}}
		pi.seqs = append(pi.buf[:0], '[')
		b.pending[subjID] = pi
		b.order = append(b.order, subjID)
	} else {
		pi.seqs = append(pi.seqs, ',')
	}
	pi.lastSeq = m.seq
	pi.seqs = strconv.AppendUint(pi.seqs, m.seq, 10)
	return nil, nil
}

// lookup returns the intent's state before m: from this batch (pi is
// then its entry), the cache, or re-folded from its events (nil when it
// has no history).
func (p *Projector) lookup(b *batchTx, id string, version uint64) (f *folded, pi *pendingIntent, err error) {
	if pi, ok := b.pending[id]; ok {
		return &pi.folded, pi, nil
	}
	if f, ok := p.cache.get(id); ok {
		b.hits++
		return f, nil, nil
	}
	if version == 1 && !b.careful {
		b.assumedNew[id] = true
		return nil, nil, nil
	}
	b.misses++
	f, err = refold(b.ctx, b.loadEvents, id)
	return f, nil, err
}

// refold rebuilds an intent from its applied events. The table holds only
// events that were applied, so a failure here is corruption.
func refold(ctx context.Context, load *sql.Stmt, id string) (*folded, error) {
	rows, err := load.QueryContext(ctx, id)
	if err != nil {
		return nil, errors.Errorf("load history: %w", err)
	}
	defer rows.Close()
	var f *folded
	for rows.Next() {
		seq, e, err := scanEvent(rows)
		if err != nil {
			return nil, errors.Errorf("stored history of %s: %w", id, err)
		}
		if f == nil {
			f = &folded{intent: &fsm.Intent{State: fsm.None}}
		}
		if err := f.intent.Apply(e); err != nil {
			return nil, errors.Errorf("stored history of %s: %w", id, err)
		}
		f.lastSeq = seq
	}
	if err := rows.Err(); err != nil {
		return nil, errors.Errorf("load history: %w", err)
	}
	return f, nil
}

// writeViews upserts the intent row, with its receipt (or NULLs where it
// has none: a receipt an intent no longer has goes with them).
func (b *batchTx) writeViews(id string, f *pendingIntent) error {
	v := ViewOf(f.intent, f.lastSeq)
	var evidence any
	if v.Evidence != nil {
		j, err := json.Marshal(v.Evidence)
		if err != nil {
			return err
		}
		evidence = string(j)
	}
	var rSrc, rExt, rURL, rSHA, rAt, rChecks, rReq, rKey, rAttempt any
	if r := v.Receipt; r != nil {
		checks := r.Checks
		if checks == nil {
			checks = []events.Check{}
		}
		cj, err := json.Marshal(checks)
		if err != nil {
			return err
		}
		rSrc, rExt, rURL, rSHA, rAt = string(r.Source), r.ExternalID, r.LiveURL, r.PayloadSHA256, fmtTime(r.ReadbackAt)
		rChecks, rReq, rKey, rAttempt = string(cj), r.RequestID, r.IdempotencyKey, r.AttemptID
	}
	w := b.upsertIntents
	if b.assumedNew[id] {
		w = b.newIntents
	}
	return w.add(b.ctx, v.IntentID, v.Tenant, v.Route, v.Account, v.RequestID, v.IdempotencyKey,
		string(v.State), v.Attempts, v.ExternalID, v.LiveURL, string(v.LastEventType), fmtTimeNN(v.LastEventAt),
		int64(v.Version), int64(v.LastSeq), fmtTime(v.NextCheckAt), string(v.ManualReason), v.ManualOwner, evidence, v.Failure,
		fmtTime(v.UnknownSince), fmtTimeNN(v.CreatedAt), fmtTimeNN(v.UpdatedAt), v.PayloadSHA256, fmtTimeNN(v.PlannedAt),
		string(append(f.seqs, ']')),
		rSrc, rExt, rURL, rSHA, rAt, rChecks, rReq, rKey, rAttempt)
}
