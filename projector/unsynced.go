package projector

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/internal/durable"
)

// Catching up a long backlog without syncs.
//
// In WAL mode with synchronous=NORMAL every WAL checkpoint syncs the WAL
// and then the database file; catching up a log of millions of events
// checkpoints after almost every batch, and the applier waits for those
// syncs; synchronous=OFF drops them. SQLite keeps a database in WAL mode
// with synchronous=OFF consistent through a crash of the process (every
// write has reached the operating system); only a crash of the operating
// system or a power loss can leave it torn.
//
// So a catch-up of a backlog of at least Config.UnsyncedBacklog events,
// and at least the checkpoint it starts from, runs unsynced:
//
//  1. a marker file <db>.unsynced, naming this boot of the machine, is
//     written and synced, with its directory;
//  2. the writer turns synchronous OFF and applies the backlog;
//  3. once caught up (or stopping), it turns synchronous back to NORMAL,
//     syncs the database file and its WAL, and removes the marker.
//
// Open finds a marker only when step 3 did not run. If the machine has
// not restarted since (same boot id), the operating system still holds
// every write, in order: the files are synced and the projection resumes
// from its checkpoint. Otherwise (another boot, or a boot id that cannot
// be read or a marker that cannot be parsed) the database may be torn:
// it is removed and the views are rebuilt from the log. The backlog being
// at least the checkpoint bounds that rebuild to about twice the work that
// was unsynced.

// unsyncedBatchFactor: an unsynced catch-up applies batches this many
// times Config.Batch: a batch's commit writes every index page its
// intents touched, and a bigger batch touches many of the same pages.
// Synced, the bigger WAL this leaves is not worth it.
const unsyncedBatchFactor = 4

// batchLimit is the most events the next batch holds.
func (p *Projector) batchLimit() int {
	if p.unsyncedNow.Load() {
		return unsyncedBatchFactor * p.cfg.Batch
	}
	return p.cfg.Batch
}

// markerSuffix names the marker next to the database file.
const markerSuffix = ".unsynced"

// markerPrefix starts a marker's content; the boot id follows.
const markerPrefix = "settle projector unsynced catch-up; boot "

// bootID returns an id of this boot of the machine (tests replace it).
var bootID = func() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", errors.New("empty boot id")
	}
	return id, nil
}

func markerPath(dbPath string) string { return dbPath + markerSuffix }

// syncDB syncs the database file and its WAL.
func syncDB(dbPath string) error {
	for _, f := range []string{dbPath, dbPath + "-wal"} {
		if err := durable.SyncFile(f); err != nil {
			return err
		}
	}
	return nil
}

// recoverUnsynced runs before the database is opened. It reports whether
// a marker was found and, if so, whether the database was removed to be
// rebuilt (and why).
func recoverUnsynced(dbPath string) (found, removed bool, why string, err error) {
	mp := markerPath(dbPath)
	content, err := os.ReadFile(mp)
	if errors.Is(err, os.ErrNotExist) {
		return false, false, "", nil
	}
	if err != nil {
		return true, false, "", errors.Errorf("read %s: %w", mp, err)
	}
	was, ok := bytes.CutPrefix(bytes.TrimSpace(content), []byte(markerPrefix))
	now, berr := bootID()
	switch {
	case !ok || len(was) == 0:
		why = "its marker cannot be read"
	case berr != nil:
		why = fmt.Sprintf("this machine's boot id cannot be read (%v)", berr)
	case string(was) != now:
		why = "the machine restarted since (another boot id)"
	}
	if why == "" {
		// Only the process stopped: the OS holds every write. Make them
		// durable before the marker goes.
		if err := syncDB(dbPath); err != nil {
			return true, false, "", err
		}
	} else {
		for _, f := range []string{dbPath, dbPath + "-wal", dbPath + "-shm"} {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				return true, false, why, errors.Errorf("remove %s: %w", f, err)
			}
		}
		removed = true
	}
	if err := os.Remove(mp); err != nil {
		return true, removed, why, errors.Errorf("remove %s: %w", mp, err)
	}
	return true, removed, why, durable.SyncDir(filepath.Dir(dbPath))
}

// shouldGoUnsynced: a backlog of at least UnsyncedBacklog events and at
// least the checkpoint.
func (p *Projector) shouldGoUnsynced(backlog uint64) bool {
	n := p.cfg.UnsyncedBacklog
	return !p.unsyncedNow.Load() && !p.noBootID.Load() && n > 0 && backlog >= uint64(n) && backlog >= p.cp.Load()
}

// beginUnsynced writes the marker and turns the writer's syncs off.
func (p *Projector) beginUnsynced(ctx context.Context, backlog uint64) error {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.unsynced {
		return nil
	}
	id, err := bootID()
	if err != nil {
		// Without a boot id a marker could not tell a process stop from a
		// machine restart: stay synced.
		p.noBootID.Store(true)
		p.log.Info("projector: catching up with syncs (no boot id)", "db", p.cfg.DBPath, "backlog", backlog, "err", err)
		return nil
	}
	mp := markerPath(p.cfg.DBPath)
	if err := durable.WriteFile(mp, []byte(markerPrefix+id+"\n"), 0o600); err != nil {
		return &applyError{errors.Errorf("unsynced catch-up: %w", err)}
	}
	if _, err := p.w.ExecContext(ctx, `PRAGMA synchronous = OFF`); err != nil {
		_ = os.Remove(mp)
		return &applyError{errors.Errorf("unsynced catch-up: %w", err)}
	}
	p.unsynced = true
	p.unsyncedNow.Store(true)
	p.unsyncedRuns.Add(1)
	p.log.Info("projector: catching up without syncs", "db", p.cfg.DBPath, "backlog", backlog, "from", p.checkpoint)
	return nil
}

// endUnsynced turns syncs back on, syncs the files and removes the
// marker. The caller holds applyMu.
func (p *Projector) endUnsyncedLocked(ctx context.Context) error {
	if !p.unsynced {
		return nil
	}
	if _, err := p.w.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = NORMAL`); err != nil {
		return errors.Errorf("end unsynced catch-up: %w", err)
	}
	p.unsynced = false
	p.unsyncedNow.Store(false)
	if err := syncDB(p.cfg.DBPath); err != nil {
		return errors.Errorf("end unsynced catch-up: %w", err)
	}
	if err := os.Remove(markerPath(p.cfg.DBPath)); err != nil {
		return errors.Errorf("end unsynced catch-up: %w", err)
	}
	if err := durable.SyncDir(filepath.Dir(p.cfg.DBPath)); err != nil {
		return errors.Errorf("end unsynced catch-up: %w", err)
	}
	p.log.Info("projector: caught up; syncing again", "db", p.cfg.DBPath, "checkpoint", p.checkpoint)
	return nil
}

func (p *Projector) endUnsynced(ctx context.Context) error {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	if p.closed {
		return nil
	}
	return p.endUnsyncedLocked(ctx)
}
