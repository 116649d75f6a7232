package faults

import (
	"testing"
	"time"

	"github.com/settle-dev/settle/testharness"
)

// Two settle processes share the cluster; one of them is cut from NATS
// for longer than its leases (--lease: 8s in make test, the default 30s in
// make faults) while both take submits (callers fail over to the other). Its leases expire, the other settles its intents;
// when it is back, its stale steps lose their CAS. Nothing is lost,
// nothing is written twice.
func TestTwoSettlesOnePartitioned(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "two settles, one cut from NATS longer than its leases", *seed0)
	w.nats = testharness.StartNATSCluster(t, testharness.NATSClusterOptions{})
	lease := time.Duration(sizes(8, 30)) * time.Second
	leaseArgs := []string{"--lease", lease.String()}
	a := w.startSettle("settle-a", t.TempDir(), leaseArgs)
	bURL, bLinks := clientLinks(t, w.nats)
	b := w.startSettle("settle-b", t.TempDir(), append([]string{"--nats-url", bURL}, leaseArgs...))
	n := sizes(60, 200)
	var fs []string
	for k := 0; k < n; k++ {
		if w.rng.IntN(4) == 0 {
			fs = append(fs, "commit_then_drop")
		} else {
			fs = append(fs, "none")
		}
	}
	w.api.Queue(t, fs...)
	via := func(k, try int) *testharness.SettleProc {
		if (k+try)%2 == 0 {
			return a
		}
		return b
	}
	cutAt := n / 3
	var cutStart time.Time
	w.burstVia(0, n/2, 6, via, func(k int) {
		if k == cutAt {
			for _, l := range bLinks {
				l.Cut()
			}
			cutStart = time.Now()
			w.notef("settle-b cut from every NATS node at submit %d of %d", k, n)
		}
	})
	// The partition outlasts the leases: keep submitting meanwhile.
	w.burstVia(n/2, n/2, 6, via, nil)
	if d := lease + 10*time.Second - time.Since(cutStart); d > 0 {
		time.Sleep(d) // the fault's duration, not synchronisation
	}
	for _, l := range bLinks {
		l.Heal()
	}
	w.notef("settle-b healed after %s", time.Since(cutStart).Round(time.Second))
	b.WaitReady(t, 2*time.Minute)
	// The cut took effect: callers of settle-b had to fail over.
	failedOver := 0
	for _, s := range w.submits {
		if s.tries > 1 {
			failedOver++
		}
	}
	if failedOver == 0 {
		t.Fatal("no submit was retried: settle-b was never cut off")
	}
	mustHold(t, w.finish(3*time.Minute))
}
