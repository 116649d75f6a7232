package durable

import (
	"os"
	"path/filepath"

	"github.com/cockroachdb/errors"
)

// ErrDirNotSynced: the file was written, synced and renamed into place,
// but its directory could not be synced, so a crash of the machine may
// still lose the rename.
var ErrDirNotSynced = errors.New("durable: directory not synced")

// WriteFile replaces path with data atomically and durably: a temporary
// file next to it is written and synced, renamed over path, and the
// directory is synced. On an error before the rename nothing of path
// changed and the temporary file is removed.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return errors.Errorf("write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return errors.Errorf("write %s: %w", path, err)
	}
	if err := SyncDir(filepath.Dir(path)); err != nil {
		return errors.Errorf("write %s: %w: %w", path, ErrDirNotSynced, err)
	}
	return nil
}

// SyncFile syncs a file already written (by this process or another one:
// a sync covers every write the operating system holds for it). A file
// that does not exist is not an error.
func SyncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return syncAndClose(path, f, err)
}

// SyncDir syncs a directory, so that files created, renamed or removed in
// it stay so.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	return syncAndClose(dir, d, err)
}

// syncAndClose syncs and closes f, opened from path (openErr: why it could
// not be), naming path in the error.
func syncAndClose(path string, f *os.File, openErr error) error {
	if openErr != nil {
		return errors.Errorf("sync %s: %w", path, openErr)
	}
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Errorf("sync %s: %w", path, err)
	}
	return nil
}
