package faults

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/testharness"
)

// The data directory's lock file is deleted while settle serve writes,
// and a second settle serve is started on the same --data: it is refused
// (the directory itself is locked) and exits naming the data directory in
// use; the first one makes its lock file again and goes on. No second
// writer ever touches the store: every acknowledged intent is on the log,
// none has two effects, and settle audit (which names a second writer's
// traces on an embedded store) passes.
func TestLockFileDeletedSecondServeRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "lock file deleted, a second serve on the same data", *seed0)
	data := t.TempDir()
	a := w.startSettle("settle-a", data, nil)
	via := func(int) *testharness.SettleProc { return a }
	n := sizes(40, 200)
	var fs []string
	for k := 0; k < n; k++ {
		if k%4 == 0 {
			fs = append(fs, "commit_then_drop")
		} else {
			fs = append(fs, "none")
		}
	}
	w.api.Queue(t, fs...)
	tries := sizes(1, 3)
	w.burst(0, n/2, 6, via, func(k int) {
		if k != n/4 {
			return
		}
		for try := 0; try < tries; try++ {
			if err := os.Remove(filepath.Join(data, "settle.lock")); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			b := testharness.StartSettle(t, testharness.SettleSpec{Name: "settle-b", Bin: settleBin(t), Data: data, Routes: routesFile(t), NoWait: true,
				Env: []string{"SOCIAL_BASE_URL=" + w.api.URL, "SOCIAL_TOKEN=" + w.api.Token}})
			code := b.Wait(time.Minute)
			out := b.Output()
			if code <= 0 || !strings.Contains(out, "data directory in use") {
				if code == -1 {
					b.Kill9()
				}
				t.Fatalf("a second serve on a data directory whose lock file was deleted: exit %d\n%s", code, out)
			}
			if try == 0 {
				w.notef("settle.lock deleted while settle-a served; settle-b on the same --data exited %d: %s", code, clipNote(out[strings.Index(out, "settle: serve:"):], 300))
			}
		}
	})
	w.burst(n/2, n-n/2, 6, via, nil)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(a.Output(), "lock file was removed or replaced: made it again") {
		if time.Now().After(deadline) {
			t.Fatalf("settle-a did not make its lock file again\n%s", a.Tail(4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if b, err := os.ReadFile(filepath.Join(data, "settle.lock")); err != nil || !strings.Contains(string(b), "pid "+itoa(a.Pid())) {
		t.Fatalf("the lock file after the recheck: %q (%v)", b, err)
	}
	w.notef("settle-a made settle.lock again (its pid in it) within a second; %d second serve(s) refused", tries)
	mustHold(t, w.finish(3*time.Minute))
}
