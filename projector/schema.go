package projector

import (
	"context"
	"database/sql"
	"time"

	"github.com/cockroachdb/errors"

	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go)
)

// SchemaVersion names the layout of the views. A database written by
// another version is refused: rebuild it from the log.
const SchemaVersion = "settle.projector/v4"

// Times are stored as fixed-width UTC text, so that they sort and compare
// as strings and stay readable; a zero time is NULL.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

var schema = []string{
	`CREATE TABLE IF NOT EXISTS meta (
		key   TEXT PRIMARY KEY,
		value TEXT NOT NULL
	) STRICT`,
	// One row: the stream sequence of the last event applied (or
	// quarantined). Written in the same transaction as the rows it covers.
	`CREATE TABLE IF NOT EXISTS checkpoint (
		id  INTEGER PRIMARY KEY CHECK (id = 1),
		seq INTEGER NOT NULL
	) STRICT`,
	`INSERT OR IGNORE INTO checkpoint (id, seq) VALUES (1, 0)`,
	// The current fold of each intent.
	`CREATE TABLE IF NOT EXISTS intents (
		intent_id       TEXT PRIMARY KEY,
		tenant          TEXT NOT NULL,
		route           TEXT NOT NULL,
		account         TEXT NOT NULL,
		request_id      TEXT NOT NULL,
		idempotency_key TEXT NOT NULL,
		state           TEXT NOT NULL,
		attempts        INTEGER NOT NULL,
		external_id     TEXT NOT NULL,
		live_url        TEXT NOT NULL,
		last_event_type TEXT NOT NULL,
		last_event_at   TEXT NOT NULL,
		version         INTEGER NOT NULL,
		last_seq        INTEGER NOT NULL,
		next_check_at   TEXT,
		manual_reason   TEXT NOT NULL,
		manual_owner    TEXT NOT NULL,
		evidence        TEXT,
		failure         TEXT NOT NULL,
		unknown_since   TEXT,
		created_at      TEXT NOT NULL,
		updated_at      TEXT NOT NULL,
		payload_sha256  TEXT NOT NULL,
		planned_at      TEXT NOT NULL,
		event_seqs      TEXT NOT NULL, -- JSON array of the stream sequences of its applied events, in version order
		-- The proven result of a confirmed intent: receipt_source is NULL
		-- when it has none (and then so is every receipt_ column).
		receipt_source          TEXT,
		receipt_external_id     TEXT,
		receipt_live_url        TEXT,
		receipt_payload_sha256  TEXT,
		receipt_readback_at     TEXT,
		receipt_checks          TEXT, -- JSON array
		receipt_request_id      TEXT,
		receipt_idempotency_key TEXT,
		receipt_attempt_id      TEXT
	) STRICT`,
	`CREATE INDEX IF NOT EXISTS intents_by_request ON intents (tenant, route, account, request_id)`,
	`CREATE INDEX IF NOT EXISTS intents_by_external ON intents (external_id) WHERE external_id != ''`,
	`CREATE INDEX IF NOT EXISTS intents_by_created ON intents (created_at, intent_id)`,
	`CREATE INDEX IF NOT EXISTS intents_by_state ON intents (state, created_at, intent_id)`,
	`CREATE INDEX IF NOT EXISTS intents_by_unknown ON intents (unknown_since) WHERE unknown_since IS NOT NULL`,
	// The receipts of confirmed intents (ByExternalID reads
	// intents_by_external, not this view).
	`CREATE VIEW IF NOT EXISTS receipts AS SELECT intent_id, receipt_external_id AS external_id,
		receipt_live_url AS live_url, receipt_payload_sha256 AS payload_sha256, receipt_source AS source,
		receipt_readback_at AS readback_at, receipt_checks AS checks, receipt_request_id AS request_id,
		receipt_idempotency_key AS idempotency_key, receipt_attempt_id AS attempt_id
		FROM intents WHERE receipt_source IS NOT NULL`,
	// Every applied event, once per stream sequence: the timeline of each
	// intent and the history a cache miss re-folds.
	//
	// Rows are appended in stream order (seq is the rowid), so an insert
	// touches only the rightmost pages. An intent's events are found
	// through its row's event_seqs; the fold refuses a version gap or a
	// repeat, so (intent_id, version) is unique without an index.
	`CREATE TABLE IF NOT EXISTS events (
		seq       INTEGER PRIMARY KEY,
		intent_id TEXT NOT NULL,
		version   INTEGER NOT NULL,
		type      TEXT NOT NULL,
		raw       BLOB NOT NULL -- the message's bytes, as on the stream
	) STRICT`,
	// Events that could not be applied.
	`CREATE TABLE IF NOT EXISTS quarantine (
		seq       INTEGER PRIMARY KEY,
		subject   TEXT NOT NULL,
		intent_id TEXT NOT NULL,
		code      TEXT NOT NULL,
		reason    TEXT NOT NULL,
		raw       BLOB NOT NULL
	) STRICT`,
}

// dumpTables lists the views Dump renders, each ordered by its key.
var dumpTables = []struct{ name, order string }{
	{"checkpoint", "id"},
	{"intents", "intent_id"},
	{"receipts", "intent_id"},
	{"events", "seq"},
	{"quarantine", "seq"},
}

// openDBs opens the single writer connection and a pool of read-only
// readers on the same file, in WAL mode with synchronous=NORMAL: a commit
// is atomic and survives a crash of the process, but the WAL is synced
// only at checkpoints, so a power loss may take the last commits back,
// checkpoint and rows together, to be applied again (package doc). The
// writer keeps a 64 MiB page cache, so catching up does not re-read the
// index pages it just wrote, and checkpoints the WAL past 4096 pages
// (16 MiB) rather than SQLite's 1000: index pages rewritten by several
// batches are copied to the file once.
func openDBs(ctx context.Context, path string) (w, r *sql.DB, err error) {
	common := "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
	w, err = sql.Open("sqlite", path+"?"+common+"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-65536)&_pragma=wal_autocheckpoint(4096)&_pragma=temp_store(2)&_txlock=immediate")
	if err != nil {
		return nil, nil, errors.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, nil, errors.Errorf("open %s: %w", path, err)
	}
	r, err = sql.Open("sqlite", path+"?"+common+"&_pragma=synchronous(FULL)&_query_only=1")
	if err != nil {
		w.Close()
		return nil, nil, errors.Errorf("open %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, nil, errors.Errorf("open %s: %w", path, err)
	}
	return w, r, nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return err
	}
	if mode != "wal" {
		return errors.Errorf("journal_mode is %q, want wal", mode)
	}
	var sync int
	if err := db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
		return err
	}
	if sync != 1 {
		return errors.Errorf("synchronous is %d, want 1 (NORMAL)", sync)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var have string
	err = tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'schema'`).Scan(&have)
	switch {
	case err == nil:
		if have != SchemaVersion {
			return errors.Errorf("%w: database has %q, this version writes %q: rebuild it from the log", ErrSchema, have, SchemaVersion)
		}
	case errors.Is(err, sql.ErrNoRows):
		return errors.Errorf("%w: meta table without a schema row", ErrSchema)
	default:
		// No meta table yet: a new database.
	}
	for _, s := range schema {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return errors.Errorf("schema: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)`, SchemaVersion); err != nil {
		return err
	}
	return tx.Commit()
}

// metaValue reads a meta key ("" when absent).
func metaValue(ctx context.Context, q querier, key string) (string, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func fmtTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(timeLayout)
}

func fmtTimeNN(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

func parseTime(s sql.NullString) (time.Time, error) {
	if !s.Valid || s.String == "" {
		return time.Time{}, nil
	}
	return time.Parse(timeLayout, s.String)
}
