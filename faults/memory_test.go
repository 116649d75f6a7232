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
// flat: its floor over the last tenth of the run may exceed its floor once
// warm (past a fifth) by at most a quarter plus 16 MiB — a leak of even
// 200 bytes per intent would add 16 MB over 80,000 intents. Floors (the
// least of the samples in a window) are taken because a sample lands
// anywhere in a GC cycle. The heap and RSS after the last intent finished
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
			if ok1 && ok2 {
				mu.Lock()
				samples = append(samples, memSample{done: int(answered.Load()), heap: heap, rss: rss, goroutines: g})
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
	floor := func(from, to float64) (heap, rss, g float64) {
		heap, rss = -1, -1
		for _, s := range samples {
			f := float64(s.done) / float64(n)
			if f < from || f > to {
				continue
			}
			if heap < 0 || s.heap < heap {
				heap = s.heap
			}
			if rss < 0 || s.rss < rss {
				rss = s.rss
			}
			g = max(g, s.goroutines)
		}
		return heap, rss, g
	}
	warmHeap, warmRSS, warmG := floor(0.2, 0.3)
	endHeap, endRSS, endG := floor(0.9, 1.0)
	if warmHeap < 0 || endHeap < 0 {
		t.Fatalf("too few samples (%d) to judge the heap", len(samples))
	}
	mib := func(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }
	w.notef("%d intents through the API in %s (%d in the log, %d samples); heap floor %s once warm, %s at the end; RSS floor %s → %s; goroutines ≤ %.0f → ≤ %.0f",
		n, took.Round(time.Second), len(lv.intents), len(samples), mib(warmHeap), mib(endHeap), mib(warmRSS), mib(endRSS), warmG, endG)
	recordMemory(memRow{mode: mode, intents: n, warmHeap: warmHeap, endHeap: endHeap, warmRSS: warmRSS, endRSS: endRSS, after: after})
	if endHeap > warmHeap*1.25+16<<20 {
		t.Errorf("the heap grew with finished intents: %s once warm, %s after %d intents", mib(warmHeap), mib(endHeap), n)
	}
	if endG > warmG*1.5+50 {
		t.Errorf("goroutines grew: %.0f → %.0f", warmG, endG)
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
