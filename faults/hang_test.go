package faults

import (
	"syscall"
	"testing"
	"time"

	"github.com/settle-dev/settle/testharness"
)

// The external API hangs (SIGSTOP) during a burst, then settle gets
// SIGTERM: it drains within its deadline (the writes in flight time out
// and record unknown outcomes), exits 0, and loses nothing. The API comes
// back (SIGCONT) and settles what it had received while stopped; a
// restarted settle reconciles every unknown to exactly one effect.
func TestAPIHangsThenSIGTERM(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "external API hangs (SIGSTOP), SIGTERM settle, API resumes", *seed0)
	data := t.TempDir()
	a := w.startSettle("settle", data, nil)
	via := func(int) *testharness.SettleProc { return a }
	n := sizes(30, 120)
	w.burst(0, n/2, 6, via, nil)
	w.api.Signal(syscall.SIGSTOP)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		// Submits while the API hangs: each blocks in its write until the
		// route's timeout.
		w.burstNoRetry(n/2, n/2, 6, via)
	}()
	time.Sleep(time.Second) // let the hanging writes start
	start := time.Now()
	code := a.Term(90 * time.Second)
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("settle exited %d after SIGTERM with the API hanging (after %s)\n%s", code, took, a.Tail(6000))
	}
	w.notef("SIGTERM with the API stopped: exit 0 after %s (route timeout 3s)", took.Round(100*time.Millisecond))
	<-stopped
	w.api.Signal(syscall.SIGCONT)
	a.Restart(t)
	mustHold(t, w.finish(3*time.Minute))
}
