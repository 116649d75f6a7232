package faults

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/testharness"
)

// blockFiles lists the message block files of the intents stream in an
// embedded store (DIR/jetstream/jetstream/$G/streams/SETTLE_INTENTS/msgs).
func blockFiles(t *testing.T, data string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(data, "jetstream", "jetstream", "*", "streams", stream, "msgs", "*.blk"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no block file under %s: %v", data, err)
	}
	sort.Strings(files)
	return files
}

// damageScenario writes a burst through settle (embedded server), stops
// it, damages the store with damage, and checks that settle refuses to
// start naming what was lost, that `settle audit` fails naming it too,
// and that with --accept-log-loss settle starts, sweeps what is left and
// settles it.
func damageScenario(t *testing.T, scenario string, damage func(t *testing.T, block string) string) {
	damageBlock(t, scenario, damageOpts{n: sizes(40, 150)}, damage)
}

// damageOpts shape a damage scenario: n intents, each payload padded by
// pad bytes (to fill more than one block file), and the block to damage
// (the last by default).
type damageOpts struct {
	n, pad   int
	nonLast  bool
	settleFn func(w *world, a *testharness.SettleProc)
}

func damageBlock(t *testing.T, scenario string, o damageOpts, damage func(t *testing.T, block string) string) {
	w := newWorld(t, scenario, *seed0)
	w.pad = o.pad
	data := t.TempDir()
	a := w.startSettle("settle", data, nil)
	n := o.n
	var fs []string
	for k := 0; k < n; k++ {
		if k%3 == 0 {
			fs = append(fs, "commit_then_drop") // unknown outcomes, still settling when damaged
		} else {
			fs = append(fs, "none")
		}
	}
	w.api.Queue(t, fs...)
	w.burst(0, n, 6, func(int) *testharness.SettleProc { return a }, nil)
	if code := a.Term(2 * time.Minute); code != 0 {
		t.Fatalf("settle exited %d\n%s", code, a.Tail(4000))
	}
	blocks := blockFiles(t, data)
	block := blocks[len(blocks)-1]
	if o.nonLast {
		if len(blocks) < 2 {
			t.Fatalf("one block file only (%v): write more", blocks)
		}
		block = blocks[0]
	}
	what := damage(t, block)
	w.notef("store damaged after a clean stop: %s", what)

	// settle refuses to start, or starts refusing every write, and says
	// what was lost either way.
	a.Start()
	code := a.Wait(10 * time.Second)
	out := a.Tail(8000)
	switch {
	case code > 0:
		if !strings.Contains(out, "lost") || !strings.Contains(out, "--accept-log-loss") {
			t.Fatalf("serve exited %d without naming the loss\n%s", code, out)
		}
		w.notef("serve refused to start (exit %d): %s", code, clipNote(out[strings.LastIndex(out, "settle: serve:"):], 400))
	case code == -1:
		// Started: the loss is found by reading the whole log; then every
		// append is refused and /readyz says the log failed.
		deadline := time.Now().Add(time.Minute)
		for {
			c, body := a.Get("/readyz")
			if c == 503 && strings.Contains(string(body), `"log":"failed"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("settle serves a damaged log as if whole: /readyz %d %s\n%s", c, body, a.Tail(6000))
			}
			time.Sleep(100 * time.Millisecond)
		}
		res := a.Submit(route, "acct_1", "after-damage", "a write on a damaged log")
		if res.Code != 503 || !strings.Contains(res.Detail, "lost events") {
			t.Fatalf("a submit on a damaged log: %d %s %s", res.Code, res.Problem, res.Detail)
		}
		out = a.Output()
		i := strings.Index(out, "THE LOG LOST EVENTS")
		if i < 0 {
			t.Fatalf("no loud error in settle's log\n%s", a.Tail(6000))
		}
		w.notef("serve started, read the whole log, then refused every write (503, /readyz log failed): %s", clipNote(out[i:], 400))
		if code := a.Term(time.Minute); code != 0 {
			t.Fatalf("settle exited %d", code)
		}
	default:
		t.Fatalf("settle exited 0 on a damaged log\n%s", out)
	}
	if i := strings.Index(out, "nats-server:"); i >= 0 {
		w.notef("the embedded server's own log, in settle's: %s", clipNote(out[i:], 160))
	}

	// settle audit fails and names the lost events.
	cmd := exec.Command(settleBin(t), "audit", "--data", data, "--quiet")
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "events_lost") {
		t.Fatalf("settle audit on the damaged log: %v\n%s", err, b)
	}
	lostIntents := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "events_lost" {
			lostIntents[f[1]] = true
		}
	}
	w.notef("settle audit: exit non-zero, %d intent(s) named with lost events", len(lostIntents))

	// Accepting the loss: it starts, sweeps, settles what is left.
	a.Proc.Spec.Args = append(a.Proc.Spec.Args, "--accept-log-loss")
	a.Restart(t)
	w.damaged = lostIntents
	if o.settleFn != nil {
		o.settleFn(w, a)
	}
	r := w.finishDamaged(3*time.Minute, lostIntents)
	if r.lost != 0 {
		t.Fatalf("%d acknowledged intent(s) lost without being named", r.lost)
	}
}

func clipNote(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// The tail of the last block file is cut off after a clean stop.
func TestDamagedStoreTruncatedTail(t *testing.T) {
	t.Parallel()
	damageScenario(t, "block file tail truncated after a stop", func(t *testing.T, block string) string {
		st, err := os.Stat(block)
		if err != nil {
			t.Fatal(err)
		}
		cut := st.Size() / 3
		if err := os.Truncate(block, st.Size()-cut); err != nil {
			t.Fatal(err)
		}
		return "cut the last " + itoa(int(cut)) + " of " + itoa(int(st.Size())) + " bytes of " + filepath.Base(block)
	})
}

// 64 bytes in the middle of the last block file are zeroed after a stop.
func TestDamagedStoreZeroedBytes(t *testing.T) {
	t.Parallel()
	damageScenario(t, "64 bytes zeroed mid block file after a stop", zero64)
}

// zero64 zeroes 64 bytes in the middle of block.
func zero64(t *testing.T, block string) string {
	f, err := os.OpenFile(block, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	at := st.Size() / 2
	if _, err := f.WriteAt(make([]byte, 64), at); err != nil {
		t.Fatal(err)
	}
	return "zeroed 64 bytes at offset " + itoa(int(at)) + " of " + itoa(int(st.Size())) + " in " + filepath.Base(block)
}

// 64 bytes are zeroed in the middle of the first of several block files
// after a stop; the loss is accepted. The projector, rebuilding the views
// from the damaged store, must reach the stream's end (its consumer once
// blocked about 1,800 events behind for minutes while /readyz said ready):
// a projector that makes no progress while the stream holds more is
// restarted, and /readyz says so meanwhile.
func TestDamagedStoreZeroedNonLastBlock(t *testing.T) {
	t.Parallel()
	o := damageOpts{n: sizes(110, 900), pad: sizes(96<<10, 24<<10), nonLast: true, settleFn: projectorCatchesUp}
	damageBlock(t, "64 bytes zeroed mid a non-last block file after a stop", o, func(t *testing.T, block string) string {
		return zero64(t, block)
	})
}

// projectorCatchesUp waits until the views reach the stream's end (the
// projector's lag 0) and notes whether /readyz reported the projector on
// the way.
func projectorCatchesUp(w *world, a *testharness.SettleProc) {
	w.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	reported, maxLag := false, 0.0
	for {
		code, body := a.Get("/metrics")
		lag, ok := metric(body, "settle_projector_lag_events")
		if code == 200 && ok {
			maxLag = max(maxLag, lag)
			if lag == 0 {
				break
			}
		}
		if c, b := a.Get("/readyz"); c == 503 && strings.Contains(string(b), `"projector"`) {
			reported = true
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the views are still %.0f events behind the stream 3 minutes after the accepted loss (/readyz reported the projector: %v)\n%s", lag, reported, a.Tail(6000))
		}
		time.Sleep(250 * time.Millisecond)
	}
	restarts := strings.Count(a.Output(), "the projector makes no progress")
	w.notef("after the accepted loss the views caught up with the stream (lag up to %.0f events; projector restarted after a stall %d time(s); /readyz reported the projector meanwhile: %v)", maxLag, restarts, reported)
}
