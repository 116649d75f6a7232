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

// A --min-free-mb larger than the data directory's whole file system is
// refused at start (after a full disk settle would wait forever); one
// larger than what is free now is a warning.
func TestMinFreeLargerThanTheVolumeIsRefused(t *testing.T) {
	dir := t.TempDir()
	_, size, err := diskSpace(dir)
	if err != nil {
		t.Fatalf("statfs of a temporary directory: %v", err) // Linux, as CI: never skipped
	}
	var logs strings.Builder
	logger := NewLogger(&logs, LogText, nil)
	tooMuch := int(size>>20) + 1
	err = checkMinFree(dir, tooMuch, logger)
	if err == nil || !strings.Contains(err.Error(), "--min-free-mb: "+strconv.Itoa(tooMuch)+" MiB is more than the whole file system") {
		t.Fatalf("min free %d MiB on a %d MiB volume: %v", tooMuch, size>>20, err)
	}
	free, _, _ := diskSpace(dir)
	if int(free>>20)+1 < tooMuch {
		if err := checkMinFree(dir, int(free>>20)+1, logger); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "less free space than --min-free-mb") {
			t.Fatalf("no warning:\n%s", logs.String())
		}
	}
	if err := checkMinFree(dir, 1, logger); err != nil {
		t.Fatal(err)
	}
}
