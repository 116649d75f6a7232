package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/testharness"
)

// clockScenario: two settles on the cluster, the second with its clock
// shifted by offset (fault injection: SETTLE_FAULT_CLOCK_OFFSET). The
// route allows 2s of skew between instances, so each may be off the
// log's clock by 1s.
func clockScenario(t *testing.T, scenario string, offset time.Duration, refused bool) {
	w := newWorld(t, scenario, *seed0)
	w.nats = testharness.StartNATSCluster(t, testharness.NATSClusterOptions{})
	a := w.startSettle("settle-a", t.TempDir(), nil)
	var b *testharness.SettleProc
	if refused {
		// b never becomes ready: start it without waiting for /readyz.
		b = w.startSettleUnready("settle-b", t.TempDir(), "SETTLE_FAULT_CLOCK_OFFSET="+offset.String())
	} else {
		b = w.startSettle("settle-b", t.TempDir(), nil, "SETTLE_FAULT_CLOCK_OFFSET="+offset.String())
	}
	n := sizes(40, 120)
	var fs []string
	for k := 0; k < n; k++ {
		if w.rng.IntN(3) == 0 {
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
	w.burstVia(0, n, 6, via, nil)
	var bRefusals int
	for _, s := range w.submits {
		if s.tries > 1 || (s.via == "settle-b" && !s.acked()) {
			bRefusals++
		}
	}
	if refused {
		code, body := b.Get("/readyz")
		if code != 503 || !strings.Contains(string(body), `"clock":"failed"`) {
			t.Fatalf("settle-b with its clock %s off: /readyz %d %s", offset, code, body)
		}
		res := b.Submit(route, "acct_1", "clock-probe", "a submit to the process whose clock is off")
		if res.Code != 503 || !strings.Contains(res.Detail, "clock") {
			t.Fatalf("a submit to settle-b: %d %s %s", res.Code, res.Problem, res.Detail)
		}
		w.notef("settle-b (clock %s off): /readyz 503 clock failed; its submits 503 %q; callers failed over to settle-a", offset, res.Detail)
	} else {
		w.notef("settle-b (clock %s off, within the allowance) served too", offset)
	}
	lv := w.waitSettled(3 * time.Minute)
	// Which process decided what: actors carry the pid.
	bSteps := 0
	for _, li := range lv.intents {
		for _, e := range li.events {
			if strings.Contains(e.Actor, fmt.Sprintf("-%d-", b.Pid())) {
				bSteps++
			}
		}
	}
	if refused && bSteps > 0 {
		t.Fatalf("settle-b, whose clock is %s off, appended %d reconciler event(s)", offset, bSteps)
	}
	w.notef("events appended by settle-b's reconcilers: %d", bSteps)
	mustHold(t, w.finish(3*time.Minute))
}

func TestClockOffsetWithinSkew(t *testing.T) {
	t.Parallel()
	clockScenario(t, "two settles, clocks 0.8s apart (within the skew)", 800*time.Millisecond, false)
}

func TestClockOffsetBeyondSkew(t *testing.T) {
	t.Parallel()
	clockScenario(t, "two settles, one clock 30s off (beyond the skew)", 30*time.Second, true)
}

// The same fault with the guard turned off (--max-clock-offset 1h): what
// the guard prevents. Its result is a note on the row above, not a row:
// duplicates are expected here (a process 30s ahead sees its own post as
// older than its attempt, so not its own, and the window closes empty).
// Only in the full suite.
func TestClockOffsetBeyondSkewUnguarded(t *testing.T) {
	t.Parallel()
	if !*full {
		t.Skip("only in make faults (-faults.full): a demonstration, not a check")
	}
	w := newWorld(t, "one clock 30s off, guard off", *seed0)
	w.hazard, w.noteFor = true, "two settles, one clock 30s off (beyond the skew)"
	w.nats = testharness.StartNATSCluster(t, testharness.NATSClusterOptions{})
	a := w.startSettle("settle-a", t.TempDir(), nil)
	b := w.startSettle("settle-b", t.TempDir(), []string{"--max-clock-offset", "1h"}, "SETTLE_FAULT_CLOCK_OFFSET=30s")
	n := 40
	var fs []string
	for k := 0; k < n; k++ {
		if k%2 == 0 {
			fs = append(fs, "commit_then_drop")
		} else {
			fs = append(fs, "none")
		}
	}
	w.api.Queue(t, fs...)
	w.burstVia(0, n, 6, func(k, try int) *testharness.SettleProc {
		if (k+try)%2 == 0 {
			return a
		}
		return b
	}, nil)
	w.finish(3 * time.Minute)
}
