package node

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/gofrs/flock"
)

// The layout of a data directory (serve --data, audit --data, views
// rebuild --data).
const (
	LockFile      = "settle.lock"
	JetStreamDir  = "jetstream"
	ViewsFile     = "views.db"
	HighWaterFile = "highwater.json"
	dataDirPerm   = 0o700
	dataFilePerm  = 0o600
	lockRetryNote = "stop that process first (kill PID, then wait for it to exit), or give another --data"
)

// ErrDataDirInUse: another process holds the data directory's lock.
var ErrDataDirInUse = errors.New("data directory in use")

// DataDir is a locked data directory. One process owns a data directory
// for its whole life: two embedded nats-servers on one JetStream store, or
// an offline audit next to a live server, corrupt or misread the log.
type DataDir struct {
	path string
	dir  *flock.Flock // the directory itself
	lock *flock.Flock // DIR/settle.lock
}

// LockDataDir takes the exclusive lock of dir for command ("settle
// serve"). With create, dir is created (0700) when missing; an existing
// dir is tightened to 0700, since it holds payloads. The lock is an
// advisory flock held on the directory itself — which no one can delete
// while it holds a store — and on dir/settle.lock (the lock of earlier
// versions, which names the holder's pid for the next process), both
// released by the kernel when the process dies. Deleting settle.lock
// therefore lets no second process in.
func LockDataDir(dir, command string, create bool) (*DataDir, error) {
	if dir == "" {
		return nil, errors.New("--data: is required")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, errors.Errorf("--data %s: %w", dir, err)
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist) && create:
		if err := os.MkdirAll(abs, dataDirPerm); err != nil {
			return nil, errors.Errorf("--data %s: %w", dir, err)
		}
	case err != nil:
		return nil, errors.WithHint(errors.Errorf("--data %s: %w", dir, err), "give the directory settle serve --data uses")
	case !st.IsDir():
		return nil, errors.Errorf("--data %s: not a directory", dir)
	case create && st.Mode().Perm()&0o077 != 0:
		if err := os.Chmod(abs, dataDirPerm); err != nil {
			return nil, errors.Errorf("--data %s: cannot make it private (0700): %w", dir, err)
		}
	}
	path := filepath.Join(abs, LockFile)
	dl := flock.New(abs, flock.SetFlag(os.O_RDONLY))
	ok, err := dl.TryLock()
	if err != nil {
		return nil, errors.Errorf("--data %s: lock the directory: %w", dir, err)
	}
	var fl *flock.Flock
	if ok {
		if fl, ok, err = lockHolderFile(path, command); err != nil || !ok {
			_ = dl.Unlock()
		}
		if err != nil {
			return nil, errors.Errorf("--data %s: lock %s: %w", dir, path, err)
		}
	}
	if !ok {
		return nil, errors.WithHint(errors.Errorf("%w: %s is locked by %s", ErrDataDirInUse, abs, describeHolder(path)), lockRetryNote)
	}
	return &DataDir{path: abs, dir: dl, lock: fl}, nil
}

// lockHolderFile locks the lock file at path and writes this process's
// pid and command in it: a courtesy for the next process's message; the
// flocks are what exclude it. ok is false when another process holds it.
func lockHolderFile(path, command string) (fl *flock.Flock, ok bool, err error) {
	fl = flock.New(path, flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(dataFilePerm))
	if ok, err = fl.TryLock(); ok {
		info := fmt.Sprintf("pid %d\ncommand %s\nsince %s\n", os.Getpid(), command, time.Now().UTC().Format(time.RFC3339))
		_ = os.WriteFile(path, []byte(info), dataFilePerm)
	}
	return fl, ok, err
}

// describeHolder reads the pid and command the lock's holder wrote.
func describeHolder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "another process"
	}
	var pid, cmd, since string
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			if _, err := strconv.Atoi(v); err == nil {
				pid = v
			}
		case "command":
			cmd = v
		case "since":
			since = v
		}
	}
	if pid == "" {
		return "another process"
	}
	s := "pid " + pid
	if cmd != "" {
		s += " (" + cmd[:min(len(cmd), 64)]
		if since != "" {
			s += ", since " + since[:min(len(since), 40)]
		}
		s += ")"
	}
	return s
}

// Store is the JetStream store directory inside the data directory.
func (d *DataDir) Store() string { return filepath.Join(d.path, JetStreamDir) }

// Views is the projector's SQLite file inside the data directory.
func (d *DataDir) Views() string { return filepath.Join(d.path, ViewsFile) }

// HighWater is the high-water mark's file inside the data directory.
func (d *DataDir) HighWater() string { return filepath.Join(d.path, HighWaterFile) }

// Path is the data directory.
func (d *DataDir) Path() string { return d.path }

// Recheck makes sure DIR/settle.lock is still the file this process
// locked: one removed or replaced (an operator's rm, a cleanup job) is
// made and locked again, with this process's pid, so that the next
// process is told who holds the directory (and an earlier settle version,
// which locks only the file, stays out too). The lock on the directory
// itself never lapsed. It reports whether the file had to be made again.
func (d *DataDir) Recheck(command string) (bool, error) {
	if d == nil || d.lock == nil {
		return false, nil
	}
	held, err := d.lock.Stat()
	if err != nil {
		return false, err
	}
	now, err := os.Stat(d.lock.Path())
	if err == nil && os.SameFile(held, now) {
		return false, nil
	}
	_ = d.lock.Unlock()
	fl, ok, err := lockHolderFile(d.lock.Path(), command)
	if err != nil {
		return true, errors.Errorf("lock %s again: %w", d.lock.Path(), err)
	}
	if !ok {
		return true, errors.Errorf("lock %s again: %w: %s", d.lock.Path(), ErrDataDirInUse, describeHolder(d.lock.Path()))
	}
	d.lock = fl
	return true, nil
}

// Unlock releases the locks (the kernel does it too when the process ends).
func (d *DataDir) Unlock() {
	if d == nil {
		return
	}
	if d.lock != nil {
		_ = d.lock.Unlock()
	}
	if d.dir != nil {
		_ = d.dir.Unlock()
	}
}

// PrivateViews makes the views file (and SQLite's side files) readable by
// the owner only: the views hold payloads. A missing file is created
// empty with 0600 so that SQLite keeps that mode.
func PrivateViews(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, dataFilePerm)
	if err != nil {
		return errors.Errorf("views %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, dataFilePerm); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return errors.Errorf("views %s: %w", p, err)
		}
	}
	return nil
}

// AuditStoreDir maps audit's --data to the directory to lock and the
// JetStream store: the data directory given to serve (DIR/jetstream is
// its store). The store directory itself is accepted too (DIR/jetstream,
// as older instructions said, whose data directory is then locked; or
// any nats-server store_dir, which no other server may be using).
func AuditStoreDir(dir string) (lockDir, store string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", errors.Errorf("--data %s: %w", dir, err)
	}
	if IsDir(filepath.Join(abs, JetStreamDir, "jetstream")) || isFile(filepath.Join(abs, LockFile)) || isFile(filepath.Join(abs, ViewsFile)) {
		return abs, filepath.Join(abs, JetStreamDir), nil
	}
	if IsDir(filepath.Join(abs, "jetstream")) {
		if isFile(filepath.Join(filepath.Dir(abs), LockFile)) || isFile(filepath.Join(filepath.Dir(abs), ViewsFile)) {
			// DIR is serve's store: lock its data directory.
			return filepath.Dir(abs), abs, nil
		}
		// A nats-server store_dir of its own: locked where it is.
		return abs, abs, nil
	}
	return "", "", errors.WithHint(errors.Errorf("--data %s: not a settle data directory (no %s/ store, no %s)", dir, JetStreamDir, ViewsFile),
		"give the directory settle serve --data used, or --nats-url for a running server")
}

// IsDir reports whether p is a directory.
func IsDir(p string) bool  { st, err := os.Stat(p); return err == nil && st.IsDir() }
func isFile(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }
