package consumers

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

var (
	simSeed    = flag.Uint64("sim.seed", 1, "seed of the randomized reconciliation simulation")
	simIntents = flag.Int("sim.intents", 120, "intents in the randomized reconciliation simulation")
	simBound   = flag.Duration("sim.bound", 4*time.Minute, "liveness bound of a multi-worker run (not a speed assertion)")
)

type simCase struct {
	name      string
	fault     func(r *rand.Rand) *testharness.Fault
	duplicate bool
}

var simCases = []simCase{
	{"ok", func(*rand.Rand) *testharness.Fault { return nil }, false},
	{"commit-then-drop", func(*rand.Rand) *testharness.Fault { f := testharness.CommitThenDrop(); return &f }, false},
	{"reset-before-commit", func(*rand.Rand) *testharness.Fault { f := testharness.ResetBeforeCommit(); return &f }, false},
	{"502-nothing-created", func(*rand.Rand) *testharness.Fault { f := testharness.Status(502); return &f }, false},
	{"late-visibility", func(r *rand.Rand) *testharness.Fault {
		f := testharness.VisibilityDelay(time.Duration(1+r.IntN(20)) * time.Minute).Dropped()
		return &f
	}, false},
	{"duplicate", func(*rand.Rand) *testharness.Fault { f := testharness.Duplicate().Dropped(); return &f }, true},
}

// TestSimulationSeeded drives hundreds of intents through random server
// outcomes, dropped responses and visibility delays with 4 workers, then
// checks the invariants. Any seed: go test ./consumers -run Simulation
// -args -sim.seed=N -sim.intents=M (make soak runs a long one).
func TestSimulationSeeded(t *testing.T) {
	seed := *simSeed
	t.Logf("simulation seed %d, %d intents (rerun: go test ./consumers -run Simulation -args -sim.seed=%d)", seed, *simIntents, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	w := newWorld(t, func(p *events.Policy) {
		p.SearchAfter = events.Duration(30 * time.Minute)
	})
	type planned struct {
		id   string
		kind simCase
	}
	var plan []planned
	for k := 0; k < *simIntents; k++ {
		c := simCases[rng.IntN(len(simCases))]
		if f := c.fault(rng); f != nil {
			w.api.Next(*f)
		}
		res := w.execute(fmt.Sprintf("sim:%d", k), fmt.Sprintf("simulated post %d seed %d", k, seed))
		plan = append(plan, planned{res.IntentID, c})
		w.clock.Advance(time.Duration(rng.IntN(30)) * time.Second)
	}
	if n := w.api.PendingFaults(); n != 0 {
		t.Fatalf("seed %d: %d faults left unconsumed", seed, n)
	}
	ids := make([]string, len(plan))
	for k, p := range plan {
		ids[k] = p.id
	}
	w.runWorkers(4, 20*time.Second, w.allIn(ids, fsm.Confirmed, fsm.ManualAction))
	byState := map[fsm.State]int{}
	for _, p := range plan {
		i := w.intent(p.id)
		h := w.history(p.id)
		byState[i.State]++
		effects := w.api.EffectsForKey(i.Recorded.IdempotencyKey)
		switch {
		case p.kind.duplicate:
			if i.State != fsm.ManualAction || i.ManualReason != events.ReasonDuplicateExactMatches || count(h, events.WriteStarted) != 1 {
				t.Errorf("seed %d %s (%s): state %s reason %s, %d writes", seed, p.id, p.kind.name, i.State, i.ManualReason, count(h, events.WriteStarted))
			}
		case effects != 1:
			t.Errorf("seed %d %s (%s): %d effects, want exactly 1", seed, p.id, p.kind.name, effects)
		case i.State != fsm.Confirmed:
			t.Errorf("seed %d %s (%s): ended %s (%s)", seed, p.id, p.kind.name, i.State, i.ManualReason)
		}
		if i.State == fsm.ManualAction && i.ManualReason == "" {
			t.Errorf("seed %d %s: manual action without a reason", seed, p.id)
		}
		if i.State == fsm.Confirmed {
			checksOK(t, i.Receipt, readbackChecks...)
			if len(i.ConfirmedExternalIDs) != 1 {
				t.Errorf("seed %d %s: confirmed external ids %v", seed, p.id, i.ConfirmedExternalIDs)
			}
		}
		if count(h, events.WriteStarted) > 2 {
			t.Errorf("seed %d %s: %d attempts", seed, p.id, count(h, events.WriteStarted))
		}
	}
	t.Logf("seed %d: final states %v; %d effects, %d writes", seed, byState, w.api.Effects(), w.api.Writes())
}
