package node

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
)

// The data directory's lock cannot be bypassed by deleting its file: the
// directory itself is locked. Recheck makes the file again, naming the
// holder's pid for the next process.
func TestDeletingTheLockFileLetsNoSecondProcessIn(t *testing.T) {
	dir := t.TempDir()
	a, err := LockDataDir(dir, "settle serve", true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Unlock()
	if _, err := LockDataDir(dir, "settle serve", true); !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("a second lock with the file there: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, LockFile)); err != nil {
		t.Fatal(err)
	}
	b, err := LockDataDir(dir, "settle serve", true)
	if !errors.Is(err, ErrDataDirInUse) {
		b.Unlock()
		t.Fatalf("the lock file deleted: a second process took the directory (%v)", err)
	}
	if err := os.Remove(filepath.Join(dir, LockFile)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	restored, err := a.Recheck("settle serve")
	if err != nil || !restored {
		t.Fatalf("recheck after the file was deleted: %v %v", restored, err)
	}
	b2, _ := os.ReadFile(filepath.Join(dir, LockFile))
	if !strings.Contains(string(b2), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("the lock file made again: %q", b2)
	}
	if restored, err := a.Recheck("settle serve"); err != nil || restored {
		t.Fatalf("recheck with the file in place: %v %v", restored, err)
	}
	_, err = LockDataDir(dir, "settle serve", true)
	if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("a second process after the recheck: %v", err)
	}
	a.Unlock()
	c, err := LockDataDir(dir, "settle serve", true)
	if err != nil {
		t.Fatalf("after the holder let go: %v", err)
	}
	c.Unlock()
}
