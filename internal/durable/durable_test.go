package durable

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "mark.json")
	for _, content := range []string{"first\n", "second, longer\n", ""} {
		if err := WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q (%v), want %q", got, err, content)
		}
		if _, err := os.Stat(p + ".tmp"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("temporary file left: %v", err)
		}
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600", st.Mode(), err)
	}
}

func TestWriteFileIntoAMissingDirectoryChangesNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no", "such", "dir", "f")
	err := WriteFile(p, []byte("x"), 0o600)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("WriteFile into a missing directory: %v", err)
	}
	if errors.Is(err, ErrDirNotSynced) {
		t.Fatalf("a failed write reported as written: %v", err)
	}
}

func TestSyncFileAndDir(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := SyncFile(p); err != nil {
		t.Fatalf("a missing file: %v", err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := SyncFile(p); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing directory: %v", err)
	}
}
