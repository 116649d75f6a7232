package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/testharness"
)

// sizes returns the short or the full size.
func sizes(short, long int) int {
	if *full {
		return long
	}
	return short
}

// kill -9 of `settle serve` (embedded server, fsync always) at a random
// moment of a write burst, then a restart on the same data: nothing
// acknowledged is lost, nothing is written twice, everything settles.
func TestKill9SettleDuringBurst(t *testing.T) {
	t.Parallel()
	for s := 0; s < sizes(1, 5); s++ {
		seed := *seed0 + int64(s)
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			w := newWorld(t, "kill -9 settle serve mid-burst, restart", seed)
			data := t.TempDir()
			a := w.startSettle("settle", data, nil)
			n := sizes(60, 200)
			// Some responses are lost, so reconciliation runs too.
			var fs []string
			for k := 0; k < n; k++ {
				if w.rng.IntN(6) == 0 {
					fs = append(fs, "commit_then_drop")
				} else {
					fs = append(fs, "none")
				}
			}
			w.api.Queue(t, fs...)
			killAt := n/4 + w.rng.IntN(n/2)
			via := func(int) *testharness.SettleProc { return a }
			pidBefore := a.Pid()
			w.burst(0, n, 8, via, func(k int) {
				if k == killAt {
					// Let the requests in flight reach the write path.
					time.Sleep(time.Duration(w.rng.IntN(40)) * time.Millisecond)
					a.Kill9()
					w.notef("seed %d: killed at submit %d of %d; callers retry until answered", seed, k, n)
					a.Restart(t)
				}
			})
			if a.Pid() == pidBefore {
				t.Fatalf("settle (pid %d) was never killed and restarted", pidBefore)
			}
			// More work after the restart, on the same log: every submit of
			// it is answered 2xx by the restarted process.
			w.burst(n, n/4, 4, via, nil)
			for _, s := range w.submits {
				if strings.HasSuffix(s.rid, fmt.Sprintf(":%d", n)) && !s.acked() {
					t.Fatalf("the first submit after the restart (%s) was not acknowledged: %d", s.rid, s.res.Code)
				}
			}
			mustHold(t, w.finish(3*time.Minute))
		})
	}
}
