package projector

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fakeBoot makes bootID return id (or err) for the test.
func fakeBoot(t *testing.T, id string, err error) {
	t.Helper()
	old := bootID
	bootID = func() (string, error) { return id, err }
	t.Cleanup(func() { bootID = old })
}

func fileExists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func writerSynchronous(t *testing.T, p *Projector) int {
	t.Helper()
	var n int
	if err := p.w.QueryRowContext(context.Background(), `PRAGMA synchronous`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A catch-up over the threshold runs unsynced (marker on disk, syncs off,
// seen from inside each batch), then syncs again and removes the marker;
// its views equal a synced rebuild's.
func TestUnsyncedCatchUpMatchesASyncedOne(t *testing.T) {
	fakeBoot(t, "boot-A", nil)
	lg := newTestLog(t)
	for _, x := range interleave(77, generate(t, 77, 4)) {
		lg.append(x.Route, x.Event)
	}
	db := filepath.Join(t.TempDir(), "views.db")
	p := openProjector(t, lg.node.JS, db, func(c *Config) { c.UnsyncedBacklog = 1; c.Batch = 16 })
	var batches, unsyncedBatches int
	p.beforeCommit = func(uint64) {
		batches++
		b, err := os.ReadFile(markerPath(db))
		if err == nil && string(b) == markerPrefix+"boot-A\n" && p.unsynced && p.Stats().Unsynced {
			unsyncedBatches++
		}
	}
	catchUp(t, p)
	if batches < 3 || unsyncedBatches != batches {
		t.Fatalf("%d of %d batches were applied with the marker on disk and syncs off", unsyncedBatches, batches)
	}
	st := p.Stats()
	if st.UnsyncedCatchUps != 1 || st.Unsynced || st.Checkpoint != lg.lastSeq() {
		t.Fatalf("stats after the catch-up: %+v", st)
	}
	if fileExists(t, markerPath(db)) {
		t.Fatal("the marker is still there after the catch-up")
	}
	if n := writerSynchronous(t, p); n != 1 {
		t.Fatalf("writer synchronous = %d after the catch-up, want 1 (NORMAL)", n)
	}
	if d, r := dump(t, p), rebuildDump(t, lg.node.JS); d != r {
		t.Fatalf("unsynced projection differs from a synced rebuild: %s", firstDiff(d, r))
	}
}

// Only a backlog of at least UnsyncedBacklog events and at least the
// checkpoint goes unsynced; -1 never does; without a boot id it stays
// synced.
func TestUnsyncedOnlyForALargeBacklog(t *testing.T) {
	fakeBoot(t, "boot-A", nil)
	lg := newTestLog(t)
	g := newGenerator(5)
	appendN := func(k0, n int) {
		for k := k0; k < k0+n; k++ {
			route, rec := g.recorded(k)
			lg.append(route, rec)
		}
	}
	appendN(0, 40)
	db := filepath.Join(t.TempDir(), "views.db")
	run := func(backlog int) Stats {
		t.Helper()
		p := openProjector(t, lg.node.JS, db, func(c *Config) { c.UnsyncedBacklog = backlog; c.Batch = 16 })
		catchUp(t, p)
		st := p.Stats()
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if fileExists(t, markerPath(db)) {
			t.Fatal("marker left behind")
		}
		return st
	}
	if st := run(41); st.UnsyncedCatchUps != 0 || st.Checkpoint != 40 {
		t.Fatalf("40 events under a threshold of 41: %+v", st)
	}
	// Rebuild from zero with a threshold of 40: unsynced.
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if st := run(40); st.UnsyncedCatchUps != 1 {
		t.Fatalf("a rebuild of 40 events with a threshold of 40: %+v", st)
	}
	// 39 more events behind a checkpoint of 40: synced.
	appendN(40, 39)
	if st := run(1); st.UnsyncedCatchUps != 0 || st.Checkpoint != 79 {
		t.Fatalf("39 events behind a checkpoint of 40: %+v", st)
	}
	// 80 more behind a checkpoint of 79: unsynced; but never with -1.
	appendN(79, 80)
	if st := run(-1); st.UnsyncedCatchUps != 0 || st.Checkpoint != 159 {
		t.Fatalf("UnsyncedBacklog -1: %+v", st)
	}
	appendN(159, 200)
	if st := run(1); st.UnsyncedCatchUps != 1 || st.Checkpoint != 359 {
		t.Fatalf("200 events behind a checkpoint of 159: %+v", st)
	}
	// No boot id: a marker could not be judged, so no unsynced run.
	appendN(359, 400)
	fakeBoot(t, "", errors.New("no /proc here"))
	if st := run(1); st.UnsyncedCatchUps != 0 || st.Checkpoint != 759 {
		t.Fatalf("without a boot id: %+v", st)
	}
}

// Open with a marker left behind: the same boot resumes from the
// checkpoint; another boot, a marker it cannot read or a boot id it
// cannot read removes the database, and the views are rebuilt.
func TestOpenAfterAnInterruptedUnsyncedCatchUp(t *testing.T) {
	lg := newTestLog(t)
	for _, x := range interleave(8, generate(t, 8, 2)) {
		lg.append(x.Route, x.Event)
	}
	want := rebuildDump(t, lg.node.JS)
	cases := []struct {
		name       string
		marker     string
		boot       string
		bootErr    error
		keepsViews bool
	}{
		{"same boot", markerPrefix + "boot-A\n", "boot-A", nil, true},
		{"another boot", markerPrefix + "boot-B\n", "boot-A", nil, false},
		{"unreadable marker", "garbage", "boot-A", nil, false},
		{"empty marker", "", "boot-A", nil, false},
		{"no boot id", markerPrefix + "boot-A\n", "", errors.New("no /proc here"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "views.db")
			p := openProjector(t, lg.node.JS, db, nil)
			catchUp(t, p)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(markerPath(db), []byte(c.marker), 0o600); err != nil {
				t.Fatal(err)
			}
			fakeBoot(t, c.boot, c.bootErr)
			p = openProjector(t, lg.node.JS, db, nil)
			if fileExists(t, markerPath(db)) {
				t.Fatal("Open left the marker")
			}
			cp, err := p.Checkpoint(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if c.keepsViews && cp != lg.lastSeq() || !c.keepsViews && cp != 0 {
				t.Fatalf("checkpoint after Open: %d (the log ends at %d); kept: want %v", cp, lg.lastSeq(), c.keepsViews)
			}
			catchUp(t, p)
			if d := dump(t, p); d != want {
				t.Fatalf("views differ from a rebuild: %s", firstDiff(d, want))
			}
		})
	}
}
