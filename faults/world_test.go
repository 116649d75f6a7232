package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

const (
	route  = "social_post"
	stream = "SETTLE_INTENTS"
)

// routesFile is the fault tests' route file (short windows).
func routesFile(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs("testdata/social.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// settleBin builds the settle binary (once per test process).
func settleBin(t testing.TB) string {
	t.Helper()
	return testharness.BuildBinary(t, testharness.SettlePackage)
}

// world is one scenario's processes and what the test did to them.
type world struct {
	t        *testing.T
	scenario string
	seed     int64
	rng      *rand.Rand
	api      *fakeSocialProc
	nats     *testharness.NATSCluster // nil: settle's embedded server
	settles  []*testharness.SettleProc

	// retryFor is how long a caller retries a submit without an answer.
	retryFor time.Duration
	// pad is added to every submit's body (bytes), to fill block files.
	pad int
	// damaged are intents settle named as damaged by a log loss: their
	// histories may not fold.
	damaged map[string]bool
	// hazard: the run shows what settle does NOT survive (a guard turned
	// off): duplicates are counted, not failures, and the run is a note
	// on the row named noteFor instead of a row of its own.
	hazard  bool
	noteFor string

	mu      sync.Mutex
	submits []submit
	notes   []string
}

// submit is one submit the test made and what it was answered.
type submit struct {
	rid, intentID string
	via           string
	res           testharness.SubmitResult
	tries         int
}

func (s submit) acked() bool { return s.res.Code >= 200 && s.res.Code < 300 }

// newWorld starts the fake API; scenarios add NATS and settle processes.
func newWorld(t *testing.T, scenario string, seed int64) *world {
	t.Helper()
	testharness.SkipShort(t, "the settle and nats-server binaries")
	return &world{t: t, scenario: scenario, seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 12)),
		api: startFakeSocialProc(t), retryFor: 2 * time.Minute}
}

func (w *world) notef(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notes = append(w.notes, fmt.Sprintf(format, args...))
	w.t.Logf(format, args...)
}

// startSettleUnready starts a settle serve that is not expected to
// become ready (it waits until the process listens).
func (w *world) startSettleUnready(name, data string, env ...string) *testharness.SettleProc {
	w.t.Helper()
	spec := testharness.SettleSpec{Name: name, Bin: settleBin(w.t), Data: data, Routes: routesFile(w.t), NoWait: true,
		Env: append([]string{"SOCIAL_BASE_URL=" + w.api.URL, "SOCIAL_TOKEN=" + w.api.Token}, env...)}
	if w.nats != nil {
		spec.NATSURL = w.nats.ClientURLs()
	}
	s := testharness.StartSettle(w.t, spec)
	deadline := time.Now().Add(time.Minute)
	for {
		if code, _ := s.Get("/healthz"); code == 200 {
			break
		}
		if !s.Running() || time.Now().After(deadline) {
			w.t.Fatalf("%s did not come up\n%s", name, s.Tail(4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.settles = append(w.settles, s)
	return s
}

// startSettle starts a settle serve against the world's NATS (or its own
// embedded server) with the fault tests' routes.
func (w *world) startSettle(name, data string, args []string, env ...string) *testharness.SettleProc {
	w.t.Helper()
	spec := testharness.SettleSpec{Name: name, Bin: settleBin(w.t), Data: data, Routes: routesFile(w.t), Args: args,
		Env: append([]string{"SOCIAL_BASE_URL=" + w.api.URL, "SOCIAL_TOKEN=" + w.api.Token}, env...)}
	if w.nats != nil {
		spec.NATSURL = w.nats.ClientURLs()
		spec.Replicas = min(3, len(w.nats.Nodes))
	}
	for k := 0; k+1 < len(args); k++ {
		if args[k] == "--nats-url" { // a client of its own links (ClientLinks)
			spec.NATSURL = args[k+1]
			spec.Args = append(append([]string(nil), args[:k]...), args[k+2:]...)
			break
		}
	}
	s := testharness.StartSettle(w.t, spec)
	w.settles = append(w.settles, s)
	return s
}

// readerURL is where the test reads the log: the cluster's own client
// ports, or the embedded server of the first settle (--nats-listen).
func (w *world) readerURL() string {
	if w.nats != nil {
		return w.nats.DirectURLs()
	}
	return "nats://" + w.settles[0].Spec.NATSListen
}

// burst submits n intents, conc at a time, numbered from first; via picks
// the settle process of submit k; at(k) runs once submit k has been
// handed out (a fault injected mid-burst). It returns when every submit
// has its answer (or its error).
func (w *world) burst(first, n, conc int, via func(k int) *testharness.SettleProc, at func(k int)) {
	w.burstVia(first, n, conc, func(k, _ int) *testharness.SettleProc { return via(k) }, at)
}

// burstVia is burst with a choice of process per try (a caller that
// fails over to another instance).
func (w *world) burstVia(first, n, conc int, via func(k, try int) *testharness.SettleProc, at func(k int)) {
	w.t.Helper()
	ks := make(chan int)
	var wg sync.WaitGroup
	for c := 0; c < conc; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range ks {
				rid, account, body := w.request(k)
				// A caller retries the same request id until it has an
				// answer: no connection, 5xx and 409 (in flight) are not
				// answers yet.
				var res testharness.SubmitResult
				var s *testharness.SettleProc
				tries := 0
				for deadline := time.Now().Add(w.retryFor); ; {
					s = via(k, tries)
					t0 := time.Now()
					res = s.Submit(route, account, rid, body)
					if d := time.Since(t0); d > 20*time.Second {
						w.notef("slow submit %s: %s (code %d %s %v)", rid, d.Round(time.Second), res.Code, res.Problem, res.Err)
					}
					tries++
					if (res.Code > 0 && res.Code < 500 && res.Code != 409) || time.Now().After(deadline) {
						break
					}
					time.Sleep(250 * time.Millisecond)
				}
				sub := submit{rid: rid, intentID: events.ScopedIntentID("default", route, account, rid), via: s.Name(), res: res, tries: tries}
				if res.IntentID != "" && res.IntentID != sub.intentID {
					w.t.Errorf("submit %s answered intent %s, expected %s", rid, res.IntentID, sub.intentID)
				}
				w.mu.Lock()
				w.submits = append(w.submits, sub)
				w.mu.Unlock()
			}
		}()
	}
	for k := first; k < first+n; k++ {
		ks <- k
		if at != nil {
			at(k)
		}
	}
	close(ks)
	wg.Wait()
}

// request is submit k's request id, account and body.
func (w *world) request(k int) (rid, account, body string) {
	return fmt.Sprintf("%s-s%d:%d", w.scenario, w.seed, k), fmt.Sprintf("acct_%d", k%4),
		fmt.Sprintf("%s seed %d post %d", w.scenario, w.seed, k) + strings.Repeat(" x", w.pad/2)
}

// burstNoRetry submits once each, without retrying: what a caller
// whose service is going down sees.
func (w *world) burstNoRetry(first, n, conc int, via func(k int) *testharness.SettleProc) {
	saved := w.retryFor
	w.retryFor = 0
	defer func() { w.retryFor = saved }()
	w.burst(first, n, conc, via, nil)
}

// logIntent is one intent as the log holds it.
type logIntent struct {
	id, route string
	events    []events.Event
	fold      *fsm.Intent
	err       error
}

// logView is the whole stream as read by the test.
type logView struct {
	firstSeq, lastSeq, msgs uint64
	intents                 map[string]*logIntent
}

// readLog reads every message of the stream with an ordered consumer and
// folds every intent.
func (w *world) readLog(url string) (*logView, error) {
	nc, err := nats.Connect(url, nats.Name("faults-reader"), nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, errors.Errorf("stream: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, errors.Errorf("stream info: %w", err)
	}
	lv := &logView{firstSeq: info.State.FirstSeq, lastSeq: info.State.LastSeq, msgs: info.State.Msgs, intents: map[string]*logIntent{}}
	if info.State.Msgs == 0 {
		return lv, nil
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, errors.Errorf("ordered consumer: %w", err)
	}
	var n uint64
	for done := false; n < info.State.Msgs && !done; {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, errors.Errorf("fetch: %w", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			n++
			// A damaged store may count a message it cannot deliver.
			if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
				done = true
			}
			r, id, err := events.ParseSubject(m.Subject())
			if err != nil {
				return nil, errors.Errorf("subject %q: %w", m.Subject(), err)
			}
			if m.Headers().Get(events.HoldHeader) != "" {
				continue // a held intent's hold marker, not an event
			}
			li := lv.intents[id]
			if li == nil {
				li = &logIntent{id: id, route: r}
				lv.intents[id] = li
			}
			e, err := events.Decode(m.Data())
			if err != nil {
				li.err = err
				continue
			}
			li.events = append(li.events, e)
		}
		if err := batch.Error(); err != nil {
			return nil, errors.Errorf("fetch: %w", err)
		}
		if got == 0 {
			break
		}
	}
	for _, li := range lv.intents {
		if li.err == nil {
			li.fold, li.err = fsm.Fold(li.events)
		}
	}
	return lv, nil
}

// settled reports whether no reconciler will act on the intent again:
// terminal, or waiting for a human with a reason.
func settled(i *fsm.Intent, now time.Time) bool {
	return fsm.DefaultDecider("faults").Next(i, i.Caps(), now).Kind == fsm.StepDone
}

// waitSettled waits until every intent on the log is settled. An intent
// that lost events (named by settle at start and by the audit: w.damaged)
// is held: it is handed off on the log as soon as its state allows — it
// is waited for like the others, for a minute (its attempt deadline and
// the skew are seconds) — unless the server still counts its corrupt
// record, when it cannot be appended to at all (docs/deploy.md, What
// settle does not survive).
func (w *world) waitSettled(timeout time.Duration) *logView {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	var onlyHeldSince time.Time
	for {
		lv, err := w.readLog(w.readerURL())
		if err == nil {
			var open, held []string
			for id, li := range lv.intents {
				if li.err != nil && w.damaged[id] {
					continue // its history is broken, and settle said so
				}
				if li.err != nil {
					w.t.Fatalf("intent %s does not fold: %v", id, li.err)
				}
				if settled(li.fold, time.Now()) {
					continue
				}
				if w.damaged[id] {
					held = append(held, id)
				} else {
					open = append(open, fmt.Sprintf("%s(%s v%d)", id, li.fold.State, li.fold.Version))
				}
			}
			switch {
			case len(open) == 0 && len(held) == 0:
				return lv
			case len(open) == 0 && onlyHeldSince.IsZero():
				onlyHeldSince = time.Now()
			case len(open) == 0 && time.Since(onlyHeldSince) > time.Minute:
				w.notef("%d held intent(s) not handed off on the log (their corrupt record is still counted by the server)", len(held))
				return lv
			case len(open) > 0:
				onlyHeldSince = time.Time{}
			}
			if time.Now().After(deadline) {
				sort.Strings(open)
				w.t.Fatalf("%d intent(s) not settled after %s: %s\n%s", len(open), timeout, strings.Join(open[:min(len(open), 20)], ", "), w.tails())
			}
		} else if time.Now().After(deadline) {
			w.t.Fatalf("reading the log: %v\n%s", err, w.tails())
		}
		time.Sleep(time.Second)
	}
}

// tails is the end of every settle's log, for a failure's message. With
// $FAULTS_LOGS set to a directory, the whole logs are copied there too
// (the test's own directories are removed when it ends).
func (w *world) tails() string {
	var b strings.Builder
	keep := os.Getenv("FAULTS_LOGS")
	for _, s := range w.settles {
		fmt.Fprintf(&b, "--- %s (log %s)\n%s\n", s.Name(), s.LogFile(), s.Tail(4000))
		if keep != "" {
			dst := filepath.Join(keep, strings.ReplaceAll(w.t.Name(), "/", "_")+"-"+s.Name()+".log")
			if err := os.WriteFile(dst, []byte(s.Output()), 0o644); err == nil {
				fmt.Fprintf(&b, "(whole log: %s)\n", dst)
			}
		}
	}
	return b.String()
}

// result is one scenario run's row.
type result struct {
	scenario     string
	intents      int // distinct request ids submitted
	acked        int // answered 2xx
	lost         int // acknowledged and not on the log (as acknowledged)
	dup          int // intents with more than one effect
	orphan       int // effects of no intent on the log
	states       map[fsm.State]int
	auditOK      bool
	auditSummary string
	auditNamed   int // intents a failing audit named lost (damaged stores)
	notes        []string
}

// finish waits until everything settled, stops every settle process
// (SIGTERM, exit 0), audits the log against each process's views, and
// asserts the promise. It records the run's row.
func (w *world) finish(settleTimeout time.Duration) result {
	w.t.Helper()
	lv := w.waitSettled(settleTimeout)
	st := w.api.State(w.t)
	for _, s := range w.settles {
		if !s.Running() {
			continue
		}
		if code := s.Term(2 * time.Minute); code != 0 {
			w.t.Fatalf("%s exited %d after SIGTERM\n%s", s.Name(), code, s.Tail(6000))
		}
	}
	r := result{scenario: w.scenario, states: map[fsm.State]int{}, notes: w.notes}
	rids := map[string]bool{}
	for _, s := range w.submits {
		rids[s.rid] = true
		if !s.acked() {
			continue
		}
		r.acked++
		li := lv.intents[s.intentID]
		if li == nil || uint64(len(li.events)) < s.res.Version {
			r.lost++
			have := 0
			if li != nil {
				have = len(li.events)
			}
			w.t.Errorf("LOST: submit %s was answered %d (intent %s, %s, version %d) but the log holds %d of its events",
				s.rid, s.res.Code, s.intentID, s.res.State, s.res.Version, have)
		}
	}
	r.intents = len(rids)
	for id, n := range st.ByIntent {
		if n > 1 {
			r.dup++
			if !w.hazard {
				w.t.Errorf("DUPLICATE: intent %s made %d external effects", id, n)
			}
		}
		li := lv.intents[id]
		if li == nil || li.fold == nil || len(li.fold.Attempts) == 0 {
			r.orphan++
			w.t.Errorf("ORPHAN: %d effect(s) of intent %q, which has no WriteStarted on the log", n, id)
		}
	}
	reasons := map[events.ManualReason]int{}
	for _, li := range lv.intents {
		r.states[li.fold.State]++
		if li.fold.State == fsm.ManualAction {
			reasons[li.fold.ManualReason]++
		}
	}
	if len(reasons) > 0 {
		w.notef("manual_action reasons: %v", reasons)
	}
	var unanswered, retried int
	codes := map[string]int{}
	for _, s := range w.submits {
		if !s.acked() {
			unanswered++
			c := fmt.Sprint(s.res.Code)
			if s.res.Code == 0 {
				c = "no answer"
			} else if s.res.Problem != "" {
				c += " " + s.res.Problem
			}
			codes[c]++
		}
		if s.tries > 1 {
			retried++
		}
	}
	if unanswered+retried > 0 {
		w.notef("%d submit(s) retried by the caller; %d never answered 2xx %v", retried, unanswered, codes)
	}
	r.auditOK, r.auditSummary = w.audit()
	if !r.auditOK {
		w.t.Errorf("settle audit failed:\n%s", r.auditSummary)
	}
	w.t.Logf("%s: %d intents, %d acknowledged, %d lost, %d with effects > 1; states: %s; audit ok=%v",
		r.scenario, r.intents, r.acked, r.lost, r.dup, r.statesString(), r.auditOK)
	if w.hazard {
		addNote(w.noteFor, fmt.Sprintf("with the guard turned off (%s): %d intents, %d with effects > 1; states: %s",
			w.scenario, r.intents, r.dup, r.statesString()))
		return r
	}
	record(r)
	return r
}

// finishDamaged is finish for a log that lost events settle named: an
// acknowledged intent missing from the log is lost only if it is not
// among the named ones; the rest must hold as in finish.
func (w *world) finishDamaged(settleTimeout time.Duration, named map[string]bool) result {
	w.t.Helper()
	lv := w.waitSettled(settleTimeout)
	st := w.api.State(w.t)
	for _, s := range w.settles {
		if s.Running() {
			if code := s.Term(2 * time.Minute); code != 0 {
				w.t.Fatalf("%s exited %d after SIGTERM\n%s", s.Name(), code, s.Tail(6000))
			}
		}
	}
	r := result{scenario: w.scenario, states: map[fsm.State]int{}}
	// The audit after the accepted loss passes — or, when the embedded
	// server cut its damaged block on a later open (a corrupt record it
	// still counted; docs/deploy.md), fails naming only losses: every
	// violation a loss kind, every intent it names lost.
	r.auditOK, r.auditSummary = w.audit()
	laterLost := map[string]bool{}
	if !r.auditOK {
		other := lossOnly(r.auditSummary, laterLost)
		if len(other) > 0 || len(laterLost) == 0 {
			w.t.Errorf("settle audit after accepting the loss failed on more than a named loss (%d other line(s)):\n%s", len(other), r.auditSummary)
		} else {
			r.auditNamed = len(laterLost)
			w.notef("the embedded server cut its damaged block when the store was opened again after the accepted loss; settle audit fails naming the %d intent(s) that lost events then (events_lost, stream_behind), none silently", len(laterLost))
		}
	}
	rids := map[string]bool{}
	reported := 0
	for _, s := range w.submits {
		rids[s.rid] = true
		if !s.acked() {
			continue
		}
		r.acked++
		li := lv.intents[s.intentID]
		if li == nil || uint64(len(li.events)) < s.res.Version {
			if named[s.intentID] || laterLost[s.intentID] {
				reported++
				continue
			}
			r.lost++
			w.t.Errorf("LOST SILENTLY: submit %s (intent %s, version %d) is not on the log as acknowledged and settle did not name it", s.rid, s.intentID, s.res.Version)
		}
	}
	r.intents = len(rids)
	for id, n := range st.ByIntent {
		if n > 1 {
			r.dup++
			w.t.Errorf("DUPLICATE: intent %s made %d external effects", id, n)
		}
	}
	for _, li := range lv.intents {
		if li.fold == nil {
			r.states["damaged (named)"]++
			continue
		}
		r.states[li.fold.State]++
	}
	w.notef("acknowledged intents the damage took (named by serve and audit, not on the log as acknowledged): %d; intents named: %d; silently lost: %d", reported, len(named)+len(laterLost), r.lost)
	r.notes = w.notes
	w.t.Logf("%s: %d intents, %d acknowledged, %d lost silently, %d with effects > 1; states: %s; audit ok=%v",
		r.scenario, r.intents, r.acked, r.lost, r.dup, r.statesString(), r.auditOK)
	record(r)
	return r
}

// lossKinds are the audit's violations of a log that lost events (and of
// views that applied them).
var lossKinds = map[string]bool{"events_lost": true, "stream_behind": true, "stream_gap": true, "version_gap": true, "projection_mismatch": true}

// lossOnly reads `settle audit --quiet` output: the intents its
// events_lost lines name go into lost; the violation lines of any other
// kind are returned.
func lossOnly(out string, lost map[string]bool) []string {
	var other []string
	var lines [][]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[2], "v") || (!strings.HasPrefix(f[1], "in_") && f[1] != "-") {
			continue // not a violation line
		}
		if f[0] == "events_lost" {
			lost[f[1]] = true
		}
		lines = append(lines, f)
	}
	for _, f := range lines {
		// A loss kind about an intent must be about one named lost.
		if !lossKinds[f[0]] || (f[1] != "-" && !lost[f[1]]) {
			other = append(other, strings.Join(f, " "))
		}
	}
	return other
}

// audit runs `settle audit` on the stopped processes' log, comparing it
// with every process's views.
func (w *world) audit() (bool, string) {
	w.t.Helper()
	var out strings.Builder
	ok := true
	for _, s := range w.settles {
		views := filepath.Join(s.Spec.Data, "views.db")
		args := []string{"audit", "--quiet", "--projection", views}
		if w.nats != nil {
			args = append(args, "--nats-url", w.nats.DirectURLs())
		} else {
			args = append(args, "--data", s.Spec.Data)
		}
		cmd := exec.Command(settleBin(w.t), args...)
		b, err := cmd.CombinedOutput()
		fmt.Fprintf(&out, "settle %s: %s", strings.Join(args, " "), b)
		if err != nil {
			ok = false
			fmt.Fprintf(&out, "(%v)\n", err)
		}
		if w.nats == nil {
			break // one embedded log: its data dir is the first process's
		}
	}
	return ok, out.String()
}

func itoa(n int) string { return fmt.Sprint(n) }

// mustHold fails t unless r shows what settle promises after a fault:
// nothing acknowledged lost, no intent with two effects, the audit passed
// (finish reports each breach as it finds it; this states the contract
// where the scenario ends).
func mustHold(t *testing.T, r result) {
	t.Helper()
	if r.lost != 0 || r.dup != 0 || !r.auditOK || r.acked == 0 {
		t.Fatalf("%s: %d acknowledged, %d lost, %d with effects > 1, audit ok=%v", r.scenario, r.acked, r.lost, r.dup, r.auditOK)
	}
}

func (r result) statesString() string {
	keys := make([]string, 0, len(r.states))
	for s := range r.states {
		keys = append(keys, string(s))
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.states[fsm.State(k)]))
	}
	return strings.Join(parts, ", ")
}

// --- the report ---

var (
	reportMu sync.Mutex
	rows     []*row
)

// row aggregates the runs of one scenario.
type row struct {
	scenario                            string
	runs, intents, acked, lost, dup, or int
	states                              map[fsm.State]int
	auditPass, auditFail, auditNamed    int
	notes                               []string
}

var extraNotes = map[string][]string{}

// addNote adds a note to a scenario's row.
func addNote(scenario, note string) {
	reportMu.Lock()
	defer reportMu.Unlock()
	extraNotes[scenario] = append(extraNotes[scenario], note)
}

func record(r result) {
	reportMu.Lock()
	defer reportMu.Unlock()
	var rw *row
	for _, x := range rows {
		if x.scenario == r.scenario {
			rw = x
		}
	}
	if rw == nil {
		rw = &row{scenario: r.scenario, states: map[fsm.State]int{}}
		rows = append(rows, rw)
	}
	rw.runs++
	rw.intents += r.intents
	rw.acked += r.acked
	rw.lost += r.lost
	rw.dup += r.dup
	rw.or += r.orphan
	for s, n := range r.states {
		rw.states[s] += n
	}
	switch {
	case r.auditOK:
		rw.auditPass++
	case r.auditNamed > 0:
		rw.auditNamed++ // failed naming only the loss (finishDamaged)
	default:
		rw.auditFail++
	}
	rw.notes = append(rw.notes, r.notes...)
}

func writeReport(path string) error {
	reportMu.Lock()
	defer reportMu.Unlock()
	var b strings.Builder
	mode := "short (make test)"
	if *full {
		mode = "full (make faults)"
	}
	fmt.Fprintf(&b, "# Fault scenarios\n\nProduced by `make faults` (%s) on %s, %s; settle and nats-server run as separate OS processes (see faults/ and testharness/proc*.go).\n\n",
		mode, time.Now().UTC().Format("2006-01-02"), machine())
	fmt.Fprintln(&b, "| scenario | runs | intents | acknowledged | lost | effects > 1 | final states | audit |")
	fmt.Fprintln(&b, "|---|---:|---:|---:|---:|---:|---|---|")
	for _, rw := range rows {
		runs := rw.auditPass + rw.auditFail + rw.auditNamed
		audit := fmt.Sprintf("pass %d/%d", rw.auditPass, runs)
		if rw.auditNamed > 0 {
			audit += fmt.Sprintf(", names a later loss %d/%d", rw.auditNamed, runs)
		}
		keys := make([]string, 0, len(rw.states))
		for s := range rw.states {
			keys = append(keys, string(s))
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, rw.states[fsm.State(k)]))
		}
		states := strings.Join(parts, ", ")
		if states == "" {
			states = "—"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %s | %s |\n", rw.scenario, rw.runs, rw.intents, rw.acked, rw.lost, rw.dup, states, audit)
	}
	if len(memRows) > 0 {
		mib := func(b float64) string { return fmt.Sprintf("%.0f MiB", b/(1<<20)) }
		fmt.Fprintln(&b, "\n## Memory of settle serve over a long run")
		fmt.Fprintln(&b, "\nHeap in use and RSS from its /metrics: floors once warm (20–30 % of the intents) and over the last tenth, and after every intent finished (the least of ten samples a second apart while idle: not a floor of GC cycles, as the others are).")
		fmt.Fprintln(&b, "\n| NATS | finished intents | heap once warm | heap at the end | heap after | RSS once warm | RSS at the end | RSS after |")
		fmt.Fprintln(&b, "|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, r := range memRows {
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", r.mode, r.intents, mib(r.warmHeap), mib(r.endHeap), mib(r.after.heap),
				mib(r.warmRSS), mib(r.endRSS), mib(r.after.rss))
		}
	}
	fmt.Fprintln(&b, "\n## Notes per scenario")
	for _, rw := range rows {
		fmt.Fprintf(&b, "\n**%s**\n\n", rw.scenario)
		for _, n := range append(rw.notes, extraNotes[rw.scenario]...) {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func machine() string {
	return fmt.Sprintf("%s/%s, %d CPU(s)", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
}
