package faults

import (
	"fmt"
	"testing"
	"time"

	"github.com/settle-dev/settle/testharness"
)

// clusterWorld starts three nats-server processes and one settle serve
// on them (--nats-url through the proxies, R3 stream).
func clusterWorld(t *testing.T, scenario string, seed int64) (*world, *testharness.SettleProc) {
	w := newWorld(t, scenario, seed)
	w.nats = testharness.StartNATSCluster(t, testharness.NATSClusterOptions{})
	a := w.startSettle("settle", t.TempDir(), nil)
	return w, a
}

// leader is the stream leader's index (waiting for one to be elected).
func (w *world) leader() int {
	w.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if l := streamLeader(w.nats, stream); l >= 0 {
			return l
		}
		if time.Now().After(deadline) {
			w.t.Fatal("no stream leader")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// heal waits until every node is back, meshed and current.
func (w *world) healAll() {
	w.t.Helper()
	w.nats.WaitMeshed(2 * time.Minute)
	w.nats.WaitHealthy(2 * time.Minute)
}

func clusterBurst(t *testing.T, scenario string, fault, repair func(w *world)) {
	for s := 0; s < sizes(1, 3); s++ {
		seed := *seed0 + int64(s)
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			w, a := clusterWorld(t, scenario, seed)
			n := sizes(60, 200)
			var fs []string
			for k := 0; k < n; k++ {
				if w.rng.IntN(6) == 0 {
					fs = append(fs, "commit_then_drop")
				} else {
					fs = append(fs, "none")
				}
			}
			w.api.Queue(t, fs...)
			via := func(int) *testharness.SettleProc { return a }
			faultAt, repairAt := n/4+w.rng.IntN(n/4), n/2+w.rng.IntN(n/4)
			w.burst(0, n, 8, via, func(k int) {
				switch k {
				case faultAt:
					fault(w)
				case repairAt:
					repair(w)
				}
			})
			w.healAll()
			mustHold(t, w.finish(3*time.Minute))
		})
	}
}

// The stream leader is killed (-9) during a burst and restarted later
// with its data.
func TestClusterLeaderKilled(t *testing.T) {
	t.Parallel()
	var victim int
	clusterBurst(t, "stream leader kill -9 mid-burst, restarted", func(w *world) {
		victim = w.leader()
		w.nats.Nodes[victim].Proc.Kill9()
		w.notef("seed %d: killed leader %s", w.seed, w.nats.Nodes[victim].Name)
	}, func(w *world) {
		w.nats.Nodes[victim].Proc.Start()
	})
}

// The stream leader is partitioned from the other nodes and from its
// clients (a minority of one) during a burst, then healed.
func TestClusterMinorityPartitioned(t *testing.T) {
	t.Parallel()
	var victim int
	clusterBurst(t, "leader partitioned (minority of one) mid-burst, healed", func(w *world) {
		victim = w.leader()
		isolate(w.nats, victim, true)
		waitIsolated(t, w.nats, victim, 30*time.Second)
		w.notef("seed %d: partitioned leader %s", w.seed, w.nats.Nodes[victim].Name)
	}, func(w *world) {
		isolate(w.nats, victim, false)
	})
}

// A follower is stopped and restarted with its data during a burst.
func TestClusterNodeRestarted(t *testing.T) {
	t.Parallel()
	var victim int
	clusterBurst(t, "node restarted with its data mid-burst", func(w *world) {
		victim = (w.leader() + 1 + w.rng.IntN(2)) % 3
		stopNode(t, w.nats, victim)
		w.notef("seed %d: stopped %s (SIGTERM)", w.seed, w.nats.Nodes[victim].Name)
	}, func(w *world) {
		w.nats.Nodes[victim].Proc.Start()
	})
}

// A node loses its disk: killed, its store deleted, started empty. It
// catches up from the others, and holds the whole stream again.
func TestClusterNodeEmptyDisk(t *testing.T) {
	t.Parallel()
	var victim int
	clusterBurst(t, "node killed, restarted with an empty disk", func(w *world) {
		victim = w.rng.IntN(3)
		w.nats.Nodes[victim].Proc.Kill9()
		wipeNode(t, w.nats, victim)
		w.notef("seed %d: wiped %s (leader was %v)", w.seed, w.nats.Nodes[victim].Name, victim == streamLeader(w.nats, stream))
	}, func(w *world) {
		w.nats.Nodes[victim].Proc.Start()
	})
}
