package projector

import (
	"context"
	"database/sql"
	"net/url"
	"os"

	"github.com/cockroachdb/errors"
)

// KnownEvent is one event a views database applied: where it was on the
// stream and what it was.
type KnownEvent struct {
	Seq      uint64
	IntentID string
	Version  uint64
	Type     string
	// Route is the intent's route ("" when the views hold no row of it).
	Route string
}

// Known reads, and never writes, what a views database recorded of the
// log: its checkpoint and every event it applied. It is how settle names
// the events a damaged log lost (the views live outside the stream). It
// opens the file without checking it against any stream, so it works on
// views whose stream is shorter than their checkpoint — exactly the case
// Open refuses.
type Known struct {
	db   *sql.DB
	path string
}

// OpenKnown opens the views database at path read-only. A missing file is
// an error matching os.ErrNotExist.
func OpenKnown(ctx context.Context, path string) (*Known, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, errors.Errorf("open views %s: %w", path, err)
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: "mode=ro&_pragma=busy_timeout(10000)&_query_only=1"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, errors.Errorf("open views %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('checkpoint', 'events')`).Scan(&n); err != nil {
		db.Close()
		return nil, errors.Errorf("open views %s: %w", path, err)
	}
	if n < 2 {
		db.Close() // an empty file (created before the projector ever ran)
		return nil, errors.Errorf("open views %s: no views yet: %w", path, os.ErrNotExist)
	}
	k := &Known{db: db, path: path}
	if _, err := k.Checkpoint(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return k, nil
}

// Checkpoint is the last stream sequence the views applied.
func (k *Known) Checkpoint(ctx context.Context) (uint64, error) {
	var cp uint64
	if err := k.db.QueryRowContext(ctx, `SELECT seq FROM checkpoint WHERE id = 1`).Scan(&cp); err != nil {
		return 0, errors.Errorf("views %s: checkpoint: %w", k.path, err)
	}
	return cp, nil
}

// EventsBetween calls fn with every applied event whose stream sequence is
// in [from, to], in sequence order.
func (k *Known) EventsBetween(ctx context.Context, from, to uint64, fn func(KnownEvent) error) error {
	rows, err := k.db.QueryContext(ctx, `SELECT e.seq, e.intent_id, e.version, e.type, coalesce(i.route, '')
		FROM events e LEFT JOIN intents i ON i.intent_id = e.intent_id WHERE e.seq >= ? AND e.seq <= ? ORDER BY e.seq`,
		int64(from), int64(min(to, 1<<62)))
	if err != nil {
		return errors.Errorf("views %s: events %d..%d: %w", k.path, from, to, err)
	}
	defer rows.Close()
	for rows.Next() {
		var e KnownEvent
		if err := rows.Scan(&e.Seq, &e.IntentID, &e.Version, &e.Type, &e.Route); err != nil {
			return errors.Errorf("views %s: %w", k.path, err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Close closes the database.
func (k *Known) Close() error { return k.db.Close() }
