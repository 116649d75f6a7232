package projector

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

// The crash test runs the projector in a child process (this test binary,
// re-executed into TestHelperProcess) and kills it with SIGKILL at a chosen
// point: no deferred function, no Close, no rollback runs.
const (
	helperEnv     = "SETTLE_PROJECTOR_HELPER" // "in_tx" or "after_commit"
	helperURL     = "SETTLE_PROJECTOR_NATS_URL"
	helperDB      = "SETTLE_PROJECTOR_DB"
	helperStopAt  = "SETTLE_PROJECTOR_STOP_AT"
	helperBatchSz = 16
	helperUnsync  = "SETTLE_PROJECTOR_UNSYNCED" // "1": UnsyncedBacklog 1
)

// TestHelperProcess is the child: it projects with Run and, once a batch
// reaches STOP_AT, blocks forever either inside that batch's transaction
// (after every write, before COMMIT) or right after its commit, printing
// where it stands, until the parent kills it. Without the env it does
// nothing.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	stopAt, err := strconv.ParseUint(os.Getenv(helperStopAt), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper: bad stop-at:", err)
		os.Exit(2)
	}
	nc, err := nats.Connect(os.Getenv(helperURL))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper: connect:", err)
		os.Exit(2)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper: jetstream:", err)
		os.Exit(2)
	}
	cfg := DefaultConfig()
	cfg.DBPath = os.Getenv(helperDB)
	cfg.Batch = helperBatchSz
	cfg.CacheSize = 8
	if os.Getenv(helperUnsync) == "1" {
		cfg.UnsyncedBacklog = 1
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	p, err := Open(context.Background(), js, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper: open:", err)
		os.Exit(2)
	}
	block := func(seq uint64) {
		fmt.Printf("blocked %d\n", seq)
		for {
			time.Sleep(time.Hour) // until SIGKILL
		}
	}
	p.beforeCommit = func(seq uint64) {
		if mode == "in_tx" && seq >= stopAt {
			block(seq)
		}
	}
	p.afterCommit = func(seq uint64) {
		fmt.Printf("committed %d\n", seq)
		if mode == "after_commit" && seq >= stopAt {
			block(seq)
		}
	}
	err = p.Run(context.Background())
	fmt.Fprintln(os.Stderr, "helper: Run returned:", err)
	os.Exit(3)
}

// runAndKill starts the child, waits until it blocks, SIGKILLs it and
// returns the last checkpoint it reported committed and the one it
// blocked at.
func runAndKill(t *testing.T, url, db, mode string, stopAt uint64, env ...string) (committed, blocked uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperURL+"="+url, helperDB+"="+db,
		helperStopAt+"="+strconv.FormatUint(stopAt, 10))
	cmd.Env = append(cmd.Env, env...)
	var stderr testharness.SyncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		n, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "committed":
			committed = n
		case "blocked":
			blocked = n
		}
		if blocked != 0 {
			break
		}
	}
	if blocked == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper (%s) ended without blocking: %v\n%s", mode, sc.Err(), stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper did not die by SIGKILL: %v\n%s", err, stderr.String())
	}
	return committed, blocked
}

// TestCrashMidStreamExactlyOnce kills a projecting process twice with
// SIGKILL — once inside a batch's transaction, once right after a commit —
// restarts it each time, and finally catches up in this process. The
// views must equal a fresh rebuild, each stream sequence must be applied
// exactly once, and every intent must agree with its fold.
func TestCrashMidStreamExactlyOnce(t *testing.T) {
	ctx := context.Background()
	lg := newTestLog(t)
	intents := generate(t, 4242, 5)
	for _, x := range interleave(4242, intents) {
		lg.append(x.Route, x.Event)
	}
	total := lg.lastSeq()
	db := filepath.Join(t.TempDir(), "views.db")
	url := lg.node.URL()

	// Kill inside a transaction: the blocked batch must not be there.
	committed, blocked := runAndKill(t, url, db, "in_tx", total/3)
	if blocked <= committed || committed == 0 {
		t.Fatalf("in_tx: committed %d, blocked at %d", committed, blocked)
	}
	p := openProjector(t, lg.node.JS, db, nil)
	if cp, err := p.Checkpoint(ctx); err != nil || cp != committed {
		t.Fatalf("after a kill inside the transaction of %d: checkpoint %d (%v), want %d", blocked, cp, err, committed)
	}
	p.Close()

	// Kill right after a commit: that batch must be there, once.
	committed2, blocked2 := runAndKill(t, url, db, "after_commit", 2*total/3)
	if blocked2 != committed2 || blocked2 <= blocked || blocked2 >= total {
		t.Fatalf("after_commit: committed %d, blocked at %d (first run blocked at %d, total %d)", committed2, blocked2, blocked, total)
	}
	p = openProjector(t, lg.node.JS, db, nil)
	if cp, _ := p.Checkpoint(ctx); cp != committed2 {
		t.Fatalf("after a kill after the commit of %d: checkpoint %d", committed2, cp)
	}

	// Restart here and catch up.
	catchUp(t, p)
	if st := p.Stats(); st.Applied != total-committed2 || st.Quarantined != 0 {
		t.Fatalf("restart applied %+v, want %d events", st, total-committed2)
	}
	if d, r := dump(t, p), rebuildDump(t, lg.node.JS); d != r {
		t.Fatalf("projection after two crashes differs from a rebuild: %s", firstDiff(d, r))
	}
	var n, distinct, lo, hi int64
	if err := p.r.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT seq), min(seq), max(seq) FROM events`).Scan(&n, &distinct, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if uint64(n) != total || n != distinct || lo != 1 || uint64(hi) != total {
		t.Fatalf("events table: %d rows, %d distinct seqs, %d..%d; want each of 1..%d once", n, distinct, lo, hi, total)
	}
	for _, gi := range intents {
		f, err := fsm.Fold(gi.History)
		if err != nil {
			t.Fatal(err)
		}
		v, err := p.Get(ctx, gi.ID())
		if err != nil {
			t.Fatal(err)
		}
		if v.Attempts != len(f.Attempts) || v.Version != uint64(len(gi.History)) || v.State != f.State {
			t.Fatalf("%s: view attempts %d version %d state %s; fold %d %d %s", gi.ID(), v.Attempts, v.Version, v.State,
				len(f.Attempts), len(gi.History), f.State)
		}
	}
}

// TestCrashDuringAnUnsyncedCatchUp kills (SIGKILL) a projector inside a
// batch of an unsynced catch-up, twice. On the same boot, Open finds the
// marker, syncs the files and resumes from the checkpoint; told that the
// machine restarted, it removes the database and rebuilds it from the
// log. Both end equal to a synced rebuild.
func TestCrashDuringAnUnsyncedCatchUp(t *testing.T) {
	ctx := context.Background()
	lg := newTestLog(t)
	for _, x := range interleave(99, generate(t, 99, 5)) {
		lg.append(x.Route, x.Event)
	}
	total := lg.lastSeq()
	want := rebuildDump(t, lg.node.JS)
	url := lg.node.URL()
	for _, restarted := range []bool{false, true} {
		db := filepath.Join(t.TempDir(), "views.db")
		committed, blocked := runAndKill(t, url, db, "in_tx", total/2, helperUnsync+"=1")
		if committed == 0 || blocked <= committed {
			t.Fatalf("committed %d, blocked at %d", committed, blocked)
		}
		if !fileExists(t, markerPath(db)) {
			t.Fatal("no marker after a kill during an unsynced catch-up")
		}
		if restarted {
			fakeBoot(t, "a-later-boot", nil)
		}
		p := openProjector(t, lg.node.JS, db, nil)
		if fileExists(t, markerPath(db)) {
			t.Fatal("Open left the marker")
		}
		cp, err := p.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if wantCP := map[bool]uint64{false: committed, true: 0}[restarted]; cp != wantCP {
			t.Fatalf("machine restarted %v: checkpoint %d after Open, want %d", restarted, cp, wantCP)
		}
		catchUp(t, p)
		if st := p.Stats(); st.Applied != total-cp || st.Quarantined != 0 {
			t.Fatalf("machine restarted %v: %+v after catching up from %d", restarted, st, cp)
		}
		if d := dump(t, p); d != want {
			t.Fatalf("machine restarted %v: views differ from a rebuild: %s", restarted, firstDiff(d, want))
		}
		p.Close()
	}
}

// TestRunFollowsTheLogAndStopsCleanly runs the projector while events are
// appended, lets CatchUp wait for it, closes the database under a running
// Run (which must fail, not crash), then resumes from the checkpoint.
func TestRunFollowsTheLogAndStopsCleanly(t *testing.T) {
	ctx := context.Background()
	lg := newTestLog(t)
	intents := generate(t, 77, 3)
	order := interleave(77, intents)
	half := len(order) / 2
	for _, x := range order[:half] {
		lg.append(x.Route, x.Event)
	}
	p := openProjector(t, lg.node.JS, "", func(c *Config) { c.Batch = 5 })
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	for _, x := range order[half:] {
		lg.append(x.Route, x.Event)
	}
	// CatchUp while Run consumes: it waits for Run to get there.
	catchUp(t, p)
	if cp, _ := p.Checkpoint(ctx); cp != lg.lastSeq() {
		t.Fatalf("checkpoint %d, want %d", cp, lg.lastSeq())
	}
	// Close the database under the running projector: Run stops with
	// ErrClosed. What is appended next waits for the next projector.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Run after Close: %v, want ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not stop after Close")
	}
	g := newGenerator(78)
	route, rec := g.recorded(1000)
	lg.append(route, rec)
	// Resume on the same file; then a Run ended by its context returns nil.
	p2 := openProjector(t, lg.node.JS, p.cfg.DBPath, nil)
	runCtx2, cancel2 := context.WithCancel(ctx)
	done2 := make(chan error, 1)
	go func() { done2 <- p2.Run(runCtx2) }()
	catchUp(t, p2)
	cancel2()
	if err := <-done2; err != nil {
		t.Fatalf("Run ended by its context: %v", err)
	}
	if d, r := dump(t, p2), rebuildDump(t, lg.node.JS); d != r {
		t.Fatalf("resumed projection differs from a rebuild: %s", firstDiff(d, r))
	}
	if st := p2.Stats(); st.Applied != 1 {
		t.Fatalf("resumed projector applied %d events, want the 1 appended after Close", st.Applied)
	}
}

// TestTwoProjectorsOneDatabase runs two projectors (as two processes
// would) on one database file at once. The checkpoint read inside each
// batch's transaction makes every event land exactly once, and each
// projector drops its cache when the other moved the checkpoint.
func TestTwoProjectorsOneDatabase(t *testing.T) {
	ctx := context.Background()
	lg := newTestLog(t)
	intents := generate(t, 5150, 3)
	for _, x := range interleave(5150, intents) {
		lg.append(x.Route, x.Event)
	}
	db := filepath.Join(t.TempDir(), "views.db")
	_, js2 := lg.node.Connect()
	p1 := openProjector(t, lg.node.JS, db, func(c *Config) { c.Batch = 3 })
	p2 := openProjector(t, js2, db, func(c *Config) { c.Batch = 4 })
	errs := make(chan error, 2)
	for _, p := range []*Projector{p1, p2} {
		go func() { errs <- p.CatchUp(ctx) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s1, s2 := p1.Stats(), p2.Stats()
	total := lg.lastSeq()
	if s1.Applied+s2.Applied != total || s1.Quarantined+s2.Quarantined != 0 {
		t.Fatalf("applied %d + %d, want %d in all", s1.Applied, s2.Applied, total)
	}
	t.Logf("p1 %+v\np2 %+v", s1, s2)
	if d, r := dump(t, p1), rebuildDump(t, lg.node.JS); d != r {
		t.Fatalf("two projectors on one file differ from a rebuild: %s", firstDiff(d, r))
	}
	if cp, _ := p2.Checkpoint(ctx); cp != total {
		t.Fatalf("checkpoint %d, want %d", cp, total)
	}
}
