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
	w := newWorld(t, scenario, *seed0)
	data := t.TempDir()
	a := w.startSettle("settle", data, nil)
	n := sizes(40, 150)
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
	what := damage(t, blocks[len(blocks)-1])
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
	a.Proc.Spec().Args = append(a.Proc.Spec().Args, "--accept-log-loss")
	a.Restart(t)
	w.damaged = lostIntents
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
	damageScenario(t, "64 bytes zeroed mid block file after a stop", func(t *testing.T, block string) string {
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
	})
}
