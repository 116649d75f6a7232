package projector

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// A new database gets pageSize pages; one made before with SQLite's
// 4 KiB pages keeps them, opens and takes writes.
func TestPageSizeOfNewAndExistingDatabases(t *testing.T) {
	ctx := context.Background()
	pageOf := func(db *sql.DB) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	fresh := filepath.Join(t.TempDir(), "new.db")
	w, r, err := openDBs(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if got := pageOf(w); got != pageSize {
		t.Errorf("new database: page_size %d, want %d", got, pageSize)
	}
	w.Close()
	r.Close()

	old := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", old+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE x (a INTEGER)`); err != nil {
		t.Fatal(err)
	}
	if got := pageOf(db); got != 4096 {
		t.Fatalf("the old database was made with page_size %d, want 4096", got)
	}
	db.Close()
	w, r, err = openDBs(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if got := pageOf(w); got != 4096 {
		t.Errorf("existing database: page_size %d, want its own 4096", got)
	}
	if _, err := w.ExecContext(ctx, `INSERT INTO checkpoint (id, seq) VALUES (1, 7) ON CONFLICT (id) DO UPDATE SET seq = 7`); err != nil {
		t.Fatal(err)
	}
}
