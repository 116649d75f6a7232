package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/testharness"
)

// smallBlocks makes the world's (single) nats-server keep the intents
// stream in block files of 32 kB, so that a few hundred intents span many
// of them and one can be lost alone, as one of a large stream's is: the
// stream is made as serve makes it, limited to 127 kB while the server
// loads it (the server sizes a stream's blocks from its limits when it
// loads it), then unlimited again (the loaded stream keeps its blocks).
func smallBlocks(t *testing.T, w *world) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := testharness.ConnectJS(t, w.nats.DirectURLs())
	testharness.OpenStoreWhenReady(ctx, t, js, ledger.DefaultStoreConfig())
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxBytes = 127_000
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	stopNode(t, w.nats, 0)
	w.nats.Nodes[0].Proc.Start()
	w.nats.WaitHealthy(time.Minute)
	js = testharness.ConnectJS(t, w.nats.DirectURLs())
	cfg.MaxBytes = -1
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// streamBlocks lists the block files of the intents stream in a
// nats-server's store, in order.
func streamBlocks(t *testing.T, store string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(store, "jetstream", "*", "streams", stream, "msgs", "*.blk"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(files, func(i, j int) bool {
		var a, b int
		fmt.Sscanf(filepath.Base(files[i]), "%d.blk", &a)
		fmt.Sscanf(filepath.Base(files[j]), "%d.blk", &b)
		return a < b
	})
	return files
}

// A block file of the stream is lost while settle is stopped; serve
// refuses to start and names the loss; the operator accepts it
// (--accept-log-loss), which holds every intent that lost events; then
// every caller resubmits every key it was acknowledged. No intent is
// recorded or written a second time: a held intent is answered as held —
// handed to a human naming the loss (manual_action, log_events_lost) or
// 409 intent-held naming it when what is left cannot be folded — and the
// audit passes, listing every held intent as a finding.
func TestBlockDeletedLossAcceptedKeysResubmitted(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "stream block files deleted, loss accepted, every key resubmitted", *seed0)
	w.nats = testharness.StartNATSCluster(t, testharness.NATSClusterOptions{Nodes: 1})
	smallBlocks(t, w)
	data := t.TempDir()
	a := w.startSettle("settle", data, nil)
	n := sizes(150, 1500)
	var fs []string
	for k := 0; k < n; k++ {
		if k%3 == 0 {
			fs = append(fs, "commit_then_drop") // unknown outcomes, settled by reconcilers
		} else {
			fs = append(fs, "none")
		}
	}
	w.api.Queue(t, fs...)
	w.burst(0, n, 6, func(int) *testharness.SettleProc { return a }, nil)
	w.waitSettled(3 * time.Minute)
	// A clean stop once the views applied everything (they name the lost
	// events when the loss is found).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, body := a.Get("/metrics"); func() bool { lag, ok := metric(body, "settle_projector_lag_events"); return ok && lag == 0 }() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the views did not catch up\n%s", a.Tail(4000))
		}
	}
	if code := a.Term(2 * time.Minute); code != 0 {
		t.Fatalf("settle exited %d\n%s", code, a.Tail(4000))
	}
	before := w.api.State(t)
	effects := before.ByIntent

	stopNode(t, w.nats, 0)
	blocks := streamBlocks(t, w.nats.Nodes[0].Store)
	if len(blocks) < 3 {
		t.Fatalf("the stream is in %d block file(s); the scenario needs 3 or more", len(blocks))
	}
	// The short run loses one block file; the full run a run of them, a
	// fifth of the stream, as one large block of a large stream holds.
	first, count := len(blocks)/2, 1
	if *full {
		first, count = len(blocks)*2/5, max(1, len(blocks)/5)
	}
	var size int64
	for _, victim := range blocks[first : first+count] {
		st, err := os.Stat(victim)
		if err != nil {
			t.Fatal(err)
		}
		size += st.Size()
		if err := os.Remove(victim); err != nil {
			t.Fatal(err)
		}
	}
	w.notef("deleted %d block file(s) from %s (%d bytes in all; blocks %d..%d of %d) while settle and nats-server were stopped",
		count, filepath.Base(blocks[first]), size, first+1, first+count, len(blocks))
	w.nats.Nodes[0].Proc.Start()
	w.nats.WaitHealthy(time.Minute)

	// serve refuses to start and says what was lost.
	a.Start()
	if code := a.Wait(time.Minute); code <= 0 {
		t.Fatalf("serve on a log that lost a block file: exit %d\n%s", code, a.Tail(6000))
	}
	out := a.Tail(8000)
	if !strings.Contains(out, "lost") || !strings.Contains(out, "--accept-log-loss") {
		t.Fatalf("serve refused without naming the loss\n%s", out)
	}
	w.notef("serve refused to start: %s", clipNote(out[strings.LastIndex(out, "settle: serve:"):], 300))

	// settle audit names every intent that lost events.
	auditArgs := []string{"audit", "--nats-url", w.nats.DirectURLs(), "--views", filepath.Join(data, "views.db"),
		"--high-water", filepath.Join(data, "highwater.json")}
	b, err := exec.Command(settleBin(t), append(auditArgs, "--quiet")...).CombinedOutput()
	if err == nil {
		t.Fatalf("settle audit passed a log that lost a block file\n%s", b)
	}
	named := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "events_lost" {
			named[f[1]] = true
		}
	}
	if len(named) == 0 {
		t.Fatalf("settle audit named no intent\n%s", b)
	}

	// The operator accepts the loss.
	a.Proc.Spec.Args = append(a.Proc.Spec.Args, "--accept-log-loss")
	a.Restart(t)
	if out := a.Output(); !strings.Contains(out, "held intents marked on the log") {
		t.Errorf("no hold marked on the log\n%s", a.Tail(6000))
	}

	// Every caller resubmits every key it was acknowledged, six at a time,
	// retrying only what is no answer yet (no connection, 5xx, a write in
	// flight).
	type answer struct {
		id  string
		res testharness.SubmitResult
	}
	answers := make([]answer, n)
	ks := make(chan int)
	var wg sync.WaitGroup
	for c := 0; c < 6; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range ks {
				rid, account, body := w.request(k)
				var res testharness.SubmitResult
				for deadline := time.Now().Add(w.retryFor); ; time.Sleep(250 * time.Millisecond) {
					res = a.Submit(route, account, rid, body)
					if (res.Code > 0 && res.Code < 500 && res.Problem != "request-in-flight") || time.Now().After(deadline) {
						break
					}
				}
				answers[k] = answer{events.ScopedIntentID("default", route, account, rid), res}
			}
		}()
	}
	for k := 0; k < n; k++ {
		ks <- k
	}
	close(ks)
	wg.Wait()

	// Nothing recorded or written again; every held intent answered as
	// held, naming the loss.
	codes := map[string]int{}
	var handedOff, refused, recorded int
	for _, an := range answers {
		c := fmt.Sprint(an.res.Code)
		if an.res.Problem != "" {
			c += " " + an.res.Problem
		}
		codes[c]++
		if an.res.Code == 201 {
			recorded++
			t.Errorf("RECORDED AGAIN: %s answered 201 (%s)", an.id, an.res.State)
		}
		if !named[an.id] {
			if an.res.Code != 200 {
				t.Errorf("intent %s (lost nothing) resubmitted: %d %s %s", an.id, an.res.Code, an.res.Problem, an.res.Detail)
			}
			continue
		}
		switch {
		case an.res.Code == 409 && an.res.Problem == "intent-held" && strings.Contains(an.res.Detail, "lost"):
			refused++
		case an.res.Code == 200 && an.res.State == "manual_action":
			code, body := a.Get("/v1/intents/" + an.id)
			var v struct {
				Reason events.ManualReason `json:"manual_reason"`
			}
			if code != 200 || json.Unmarshal(body, &v) != nil || v.Reason != events.ReasonLogEventsLost {
				t.Errorf("held intent %s handed off for %q (GET %d)", an.id, v.Reason, code)
			}
			handedOff++
		default:
			t.Errorf("held intent %s answered %d %s %s (%s)", an.id, an.res.Code, an.res.Problem, an.res.State, clipNote(an.res.Detail, 200))
		}
	}
	w.damaged = named
	lv := w.waitSettled(3 * time.Minute)
	stAfter := w.api.State(t)
	r := result{scenario: w.scenario, intents: n, states: map[fsm.State]int{}}
	for id, k := range stAfter.ByIntent {
		if k > 1 {
			r.dup++
			t.Errorf("DUPLICATE: intent %s made %d external effects (%d before the loss)", id, k, effects[id])
		}
	}
	if stAfter.Effects != before.Effects {
		t.Errorf("%d effects after the resubmits, %d before", stAfter.Effects, before.Effects)
	}
	for _, li := range lv.intents {
		if li.fold == nil {
			r.states["held, cannot be folded"]++
			continue
		}
		r.states[li.fold.State]++
	}
	w.notef("%d intents held (named by the audit); resubmitting every key: %d handed to a human naming the loss, %d answered 409 intent-held naming it, %d recorded again; answers %v",
		len(named), handedOff, refused, recorded, codes)
	if code := a.Term(2 * time.Minute); code != 0 {
		t.Fatalf("settle exited %d\n%s", code, a.Tail(6000))
	}

	// The audit after the accepted loss passes, and lists every held
	// intent as a finding.
	b, err = exec.Command(settleBin(t), append(auditArgs, "--projection", filepath.Join(data, "views.db"))...).CombinedOutput()
	r.auditOK = err == nil
	r.auditSummary = string(b)
	if !r.auditOK {
		t.Errorf("settle audit after accepting the loss and the resubmits: %v\n%s", err, b)
	}
	held := 0
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "held" {
			fmt.Sscanf(f[1], "%d", &held)
		}
	}
	if held != len(named) {
		t.Errorf("the audit lists %d held intents, %d were named lost\n%s", held, len(named), b)
	}
	w.notef("settle audit after: pass=%v, %d held intent(s) listed as findings", r.auditOK, held)
	for _, sub := range w.submits {
		if sub.acked() {
			r.acked++ // acknowledged before the loss
		}
	}
	r.notes = w.notes
	record(r)
}
