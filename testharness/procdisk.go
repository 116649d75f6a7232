package testharness

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallDisk is a small file system of its own (a tmpfs) that a fault test
// fills and empties: a data directory on it runs out of space for real
// (ENOSPC from the kernel), without touching the machine's disks.
type SmallDisk struct {
	t    testing.TB
	Dir  string
	fill string
}

// MountSmallDisk mounts a tmpfs of size bytes on a new temporary
// directory. It needs root (CAP_SYS_ADMIN), which CI has (.ci/run runs as
// root); without it the test is skipped, except under CI=true where it
// fails: a fault that cannot be set up must not pass silently.
func MountSmallDisk(t testing.TB, size int64) *SmallDisk {
	t.Helper()
	dir := t.TempDir()
	err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size))
	if err != nil {
		msg := fmt.Sprintf("cannot mount a %d-byte tmpfs for the full-disk fault (needs root): %v", size, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return &SmallDisk{t: t, Dir: dir, fill: filepath.Join(dir, "filler")}
}

// Free is the space left on the file system for an unprivileged writer.
func (d *SmallDisk) Free() int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.Dir, &st); err != nil {
		d.t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// FillLeaving allocates a filler file so that about leave bytes stay free.
func (d *SmallDisk) FillLeaving(leave int64) {
	d.t.Helper()
	n := d.Free() - leave
	if n <= 0 {
		return
	}
	f, err := os.OpenFile(d.fill, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	// The file system's own bookkeeping takes a little of what statfs
	// reports: ask for less until the kernel grants it.
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, 0, st.Size()+n)
		if err == nil {
			return
		}
		if err != syscall.ENOSPC || n <= 64<<10 {
			d.t.Fatalf("fill the small disk: %v", err)
		}
		n -= 64 << 10
	}
}

// Empty removes the filler: the space returns.
func (d *SmallDisk) Empty() {
	d.t.Helper()
	if err := os.Remove(d.fill); err != nil && !os.IsNotExist(err) {
		d.t.Fatal(err)
	}
}
