package faults

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/testharness"
)

// memSample is one reading of settle's own metrics.
type memSample struct {
	done       int     // intents answered so far
	heap, rss  float64 // bytes: heap in use, resident set
	goal       float64 // bytes: the GC's next heap goal, set from the heap live at the last cycle
	goroutines float64
}

// metric reads one unlabelled sample from a Prometheus text exposition.
func metric(body []byte, name string) (float64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, name)), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// Memory under a long run: `settle serve` with its embedded nats-server
// (the default deployment) goes through many finished intents (100,000 in
// make faults), submitted at the pace its reconcilers settle them, while
// the test samples its heap and RSS from /metrics. The heap must stay
// flat: the GC's heap goal (twice the heap live at the last collection)
// over the last tenth of the run may exceed its floor once warm (past a
// fifth) by at most a quarter plus 32 MiB, 16 MiB of live heap — a leak
// of even 200 bytes per intent would add 16 MB over 80,000 intents.
// Floors (the least of the samples in a window) are taken. The heap and RSS after the last intent finished
// go into FAULTS.md's memory table. FAULTS_MEM_EXTERNAL=1 runs the
// nats-server in a process of its own instead (settle's memory alone).
func TestMemoryFlatOverManyIntents(t *testing.T) {
	t.Parallel()
	n := sizes(4000, 100_000)
	if v, err := strconv.Atoi(os.Getenv("FAULTS_MEM_INTENTS")); err == nil && v > 0 {
		n = v
	}
	w := newWorld(t, fmt.Sprintf("long run: %d finished intents, heap and RSS sampled", n), *seed0)
	w.retryFor = time.Minute
	data := t.TempDir()
	// The reconcilers' history caches are LRUs bounded in bytes: the heap
	// is flat only once they are full. A short run is too short to fill
	// the default 32 MiB before its first sample window, so it bounds
	// them at 1 MiB (full after a few hundred intents); the full run
	// keeps the default (full after about 13,000 of its 100,000).
	args := []string{"--workers", "2", "--cache-mb", map[bool]string{true: "32", false: "1"}[*full]}
	mode := "embedded nats-server"
	if os.Getenv("FAULTS_MEM_EXTERNAL") != "" {
		// settle's own memory: the server in a process of its own.
		w.nats = testharness.StartNATSCluster(t, testharness.NATSClusterOptions{Nodes: 1})
		mode = "nats-server in a process of its own"
	}
	a := w.startSettle("settle", data, args)
	var answered atomic.Int64
	var mu sync.Mutex
	var samples []memSample
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			code, body := a.Get("/metrics")
			if code != 200 {
				continue
			}
			heap, ok1 := metric(body, "go_memstats_heap_inuse_bytes")
			rss, ok2 := metric(body, "process_resident_memory_bytes")
			g, _ := metric(body, "go_goroutines")
			goal, _ := metric(body, "go_memstats_next_gc_bytes")
			if ok1 && ok2 {
				mu.Lock()
				samples = append(samples, memSample{done: int(answered.Load()), heap: heap, rss: rss, goal: goal, goroutines: g})
				mu.Unlock()
			}
		}
	}()
	start := time.Now()
	// The burst is paced by settle's own backlog: after each chunk the
	// test waits until the reconcilers' consumer holds at most a chunk's
	// worth of messages, so the intents finish as the run goes (every
	// intent of this route ends with a readback by a reconciler) instead
	// of piling up behind a burst the reconcilers cannot match on two
	// shared cores.
	const chunk = 1000
	pendingName := `settle_reconciler_pending{route="` + route + `"}`
	for first := 0; first < n; first += chunk {
		w.burst(first, min(chunk, n-first), 16, func(int) *testharness.SettleProc { return a }, func(int) { answered.Add(1) })
		deadline := time.Now().Add(3 * time.Minute)
		for {
			code, body := a.Get("/metrics")
			if p, ok := metric(body, pendingName); code == 200 && ok && p <= 3*chunk {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the reconcilers' backlog stayed above %d messages for 3 minutes after %d submits", 3*chunk, first+chunk)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	took := time.Since(start)
	lv := w.waitSettled(5 * time.Minute)
	close(stop)
	<-sampled
	after := settledMemory(a)
	mu.Lock()
	defer mu.Unlock()
	floor := func(from, to float64) (m memSample) {
		m = memSample{heap: -1, rss: -1, goal: -1}
		low := func(cur, v float64) float64 {
			if cur < 0 || v < cur {
				return v
			}
			return cur
		}
		for _, s := range samples {
			f := float64(s.done) / float64(n)
			if f < from || f > to {
				continue
			}
			m.heap, m.rss = low(m.heap, s.heap), low(m.rss, s.rss)
			if s.goal > 0 {
				m.goal = low(m.goal, s.goal)
			}
			m.goroutines = max(m.goroutines, s.goroutines)
		}
		return m
	}
	warm, end := floor(0.2, 0.3), floor(0.9, 1.0)
	if warm.heap < 0 || end.heap < 0 || warm.goal < 0 || end.goal < 0 {
		t.Fatalf("too few samples (%d) to judge the heap", len(samples))
	}
	mib := func(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }
	w.notef("%d intents through the API in %s (%d in the log, %d samples); heap floor %s once warm, %s at the end; GC goal floor %s → %s; RSS floor %s → %s; goroutines ≤ %.0f → ≤ %.0f",
		n, took.Round(time.Second), len(lv.intents), len(samples), mib(warm.heap), mib(end.heap), mib(warm.goal), mib(end.goal), mib(warm.rss), mib(end.rss), warm.goroutines, end.goroutines)
	recordMemory(memRow{mode: mode, intents: n, warmHeap: warm.heap, endHeap: end.heap, warmRSS: warm.rss, endRSS: end.rss, after: after})
	// The judgement uses the GC's heap goal, not the heap in use: a
	// sample of the heap in use lands anywhere between two collections
	// (up to twice the live heap with GOGC=100), and a window of a few
	// samples need not hold one taken just after a collection; the goal
	// moves only at a collection and is set from the heap live then.
	// The short tier's 4,000 intents write less than the embedded
	// server's few cached 8 MiB blocks hold, so its caches are still
	// filling at the end (about 16 MiB of live heap measured): it allows
	// 24 MiB of live heap and catches a gross leak (6 KB per intent); the
	// full run allows 16 MiB over 80,000 intents.
	slack := float64(32 << 20)
	if !*full {
		slack = 48 << 20
	}
	if end.goal > warm.goal*1.25+slack {
		t.Errorf("the heap grew with finished intents: the GC's goal was %s once warm, %s after %d intents (heap in use %s → %s)", mib(warm.goal), mib(end.goal), n, mib(warm.heap), mib(end.heap))
	}
	if end.goroutines > warm.goroutines*1.5+50 {
		t.Errorf("goroutines grew: %.0f → %.0f", warm.goroutines, end.goroutines)
	}
	mustHold(t, w.finish(5*time.Minute))
}

// settledMemory is the least heap and RSS of ten samples a second apart,
// once every intent has finished.
func settledMemory(a *testharness.SettleProc) memSample {
	m := memSample{heap: -1, rss: -1}
	for i := 0; i < 10; i++ {
		if code, body := a.Get("/metrics"); code == 200 {
			heap, ok1 := metric(body, "go_memstats_heap_inuse_bytes")
			rss, ok2 := metric(body, "process_resident_memory_bytes")
			if ok1 && ok2 {
				if m.heap < 0 || heap < m.heap {
					m.heap = heap
				}
				if m.rss < 0 || rss < m.rss {
					m.rss = rss
				}
			}
		}
		time.Sleep(time.Second)
	}
	return m
}

// memRow is one long run's memory, for FAULTS.md.
type memRow struct {
	mode                               string
	intents                            int
	warmHeap, endHeap, warmRSS, endRSS float64
	after                              memSample
}

var memRows []memRow

func recordMemory(r memRow) {
	reportMu.Lock()
	defer reportMu.Unlock()
	memRows = append(memRows, r)
}
