package faults

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/testharness"
)

// The data disk fills up while settle serves (a small tmpfs under the
// embedded server's store and the views, filled by the kernel's own
// ENOSPC): submits are refused with 503 and a problem that says the
// disk is full and that nothing was recorded, /readyz says not ready and
// why; when space returns settle resumes by itself (no restart), and
// nothing acknowledged is lost.
func TestDiskFullWhileServing(t *testing.T) {
	t.Parallel()
	disk := mountSmallDisk(t, 96<<20)
	w := newWorld(t, "data disk full while serving, space returns", *seed0)
	data := filepath.Join(disk.Dir, "data")
	a := w.startSettle("settle", data, []string{"--min-free-mb", "8"})
	via := func(int) *testharness.SettleProc { return a }
	n := sizes(20, 60)
	w.burst(0, n, 4, via, nil)

	disk.FillLeaving(128 << 10)
	w.notef("disk filled: %d bytes left", disk.Free())
	var refused testharness.SubmitResult
	k := n
	start := time.Now()
	for ; ; k++ {
		rid := fmt.Sprintf("%s-s%d:%d", w.scenario, w.seed, k)
		res := a.Submit(route, "acct_1", rid, fmt.Sprintf("%s post %d", w.scenario, k))
		w.mu.Lock()
		w.submits = append(w.submits, submit{rid: rid, intentID: events.ScopedIntentID("default", route, "acct_1", rid), via: a.Name(), res: res, tries: 1})
		w.mu.Unlock()
		if res.Code == 503 && strings.Contains(res.Detail, "disk is full") {
			refused = res
			break
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("no submit refused for a full disk after %d submits; last %d %s %s\n%s", k-n, res.Code, res.Problem, res.Detail, a.Tail(5000))
		}
	}
	w.notef("first refusal after %d submits on the full disk, %s after filling: %d %s %q",
		k-n+1, time.Since(start).Round(100*time.Millisecond), refused.Code, refused.Problem, refused.Detail)
	if refused.Problem != "unavailable" || !strings.Contains(refused.Detail, "nothing was recorded or written") {
		t.Fatalf("the refusal does not say what happened: %+v", refused)
	}
	// Every submit now is refused before anything is published.
	t0 := time.Now()
	for j := 0; j < 5; j++ {
		k++
		rid := fmt.Sprintf("%s-s%d:%d", w.scenario, w.seed, k)
		res := a.Submit(route, "acct_1", rid, fmt.Sprintf("%s post %d", w.scenario, k))
		w.mu.Lock()
		w.submits = append(w.submits, submit{rid: rid, intentID: events.ScopedIntentID("default", route, "acct_1", rid), via: a.Name(), res: res, tries: 1})
		w.mu.Unlock()
		if res.Code != 503 || !strings.Contains(res.Detail, "disk is full") {
			t.Fatalf("submit on a full disk: %d %s %s", res.Code, res.Problem, res.Detail)
		}
	}
	w.notef("5 further submits refused in %s in all", time.Since(t0).Round(time.Millisecond))
	code, body := a.Get("/readyz")
	if code != 503 || !strings.Contains(string(body), `"disk":"failed"`) {
		t.Fatalf("/readyz on a full disk: %d %s", code, body)
	}
	w.notef("/readyz: %d %s", code, strings.TrimSpace(string(body)))

	disk.Empty()
	freed := time.Now()
	a.WaitReady(t, 2*time.Minute)
	w.notef("space returned: ready again after %s, same process (pid %d)", time.Since(freed).Round(100*time.Millisecond), a.Pid())
	w.burst(k+1, n, 4, via, nil)
	mustHold(t, w.finish(3*time.Minute))
}
