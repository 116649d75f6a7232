package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/consumers/audit"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/testharness"
)

// replayLog appends n events: finished intents of six events each
// (recorded, started, unknown, reconciling, found, read back), the shape of
// a dropped response settled by reconciliation.
func replayLog(b *testing.B, js jetstream.JetStream, n int) *ledger.Store {
	b.Helper()
	ctx := context.Background()
	store, err := ledger.OpenStore(ctx, js, ledger.DefaultStoreConfig())
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)
	for k := 0; k*6 < n; k++ {
		var last uint64
		for _, e := range testharness.ReplayedIntent(k, t0) {
			seq, err := store.Append(ctx, "social_post", e, last)
			if err != nil {
				b.Fatal(err)
			}
			last = seq
		}
	}
	return store
}

func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}

// BenchmarkReplay measures, on one log and in one run: a raw ordered-
// consumer read (the baseline), the audit replay and a projection into a
// fresh SQLite database, each as events/s and as a ratio to the raw read;
// and the Go heap in use (after a GC) before and after each, to show
// whether memory grows with finished intents. SETTLE_BENCH_EVENTS sets the log size (default 60000;
// BenchmarkHeapFinished reads a 3M-event log).
func BenchmarkReplay(b *testing.B) {
	n := 60000
	if v, err := strconv.Atoi(os.Getenv("SETTLE_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	node := testharness.StartNode(b, embedded.SyncDefault)
	store := replayLog(b, node.JS, n)
	info, err := store.Stream().Info(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	total := info.State.Msgs
	dir := b.TempDir()
	ctx := context.Background()
	// SETTLE_BENCH_SKIP_AUDIT=1 leaves the audit out, so that a CPU
	// profile (-cpuprofile) shows the projection alone.
	skipAudit := os.Getenv("SETTLE_BENCH_SKIP_AUDIT") == "1"
	baseHeap := heapMiB()
	var raw, replay, proj, rawCPU, projCPU time.Duration
	var auditHeap, projHeap, dbMiB float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start, cpu0 := time.Now(), processCPU(b)
		if got := readRaw(b, node.JS, total); got != total {
			b.Fatalf("raw read %d of %d", got, total)
		}
		raw += time.Since(start)
		rawCPU += processCPU(b) - cpu0

		if !skipAudit {
			start = time.Now()
			rep, err := audit.Audit(ctx, node.JS, audit.DefaultAuditConfig())
			if err != nil {
				b.Fatal(err)
			}
			replay += time.Since(start)
			if !rep.OK() || rep.Events != total {
				b.Fatalf("audit: ok %v, %d of %d events, violations %v", rep.OK(), rep.Events, total, rep.Violations)
			}
			auditHeap = heapMiB()
		}

		start, cpu0 = time.Now(), processCPU(b)
		cfg := projector.DefaultConfig()
		cfg.DBPath = filepath.Join(dir, fmt.Sprintf("views-%d.db", i))
		p, err := projector.Open(ctx, node.JS, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.CatchUp(ctx); err != nil {
			b.Fatal(err)
		}
		proj += time.Since(start)
		projCPU += processCPU(b) - cpu0
		projHeap = heapMiB()
		p.Close()
		if st, err := os.Stat(cfg.DBPath); err == nil {
			dbMiB = float64(st.Size()) / (1 << 20)
		}
	}
	b.StopTimer()
	events := float64(total) * float64(b.N)
	rawRate := events / raw.Seconds()
	report(b, float64(total), "events_in_log")
	report(b, rawRate, "raw_read_events/s")
	if !skipAudit {
		report(b, events/replay.Seconds(), "audit_events/s")
		report(b, events/replay.Seconds()/rawRate, "audit/raw")
	}
	report(b, events/proj.Seconds(), "projected_events/s")
	report(b, events/proj.Seconds()/rawRate, "projection/raw")
	// CPU time of the whole process (the in-process nats-server included)
	// per event: on a busy machine, where wall time measures the
	// neighbours, the ratio of the two CPU figures is what stays.
	report(b, float64(rawCPU.Microseconds())/events, "raw_cpu_us/event")
	report(b, float64(projCPU.Microseconds())/events, "projection_cpu_us/event")
	report(b, baseHeap, "base_heap_MiB")
	report(b, auditHeap, "audit_heap_MiB")
	report(b, projHeap, "projector_heap_MiB")
	report(b, dbMiB, "sqlite_MiB")
}

// readRaw reads total messages of the intents stream with an ordered
// consumer, touching each message's data and metadata: the baseline.
func readRaw(b *testing.B, js jetstream.JetStream, total uint64) uint64 {
	b.Helper()
	ctx := context.Background()
	cons, err := js.OrderedConsumer(ctx, "SETTLE_INTENTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.AllSubjects}})
	if err != nil {
		b.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(512))
	if err != nil {
		b.Fatal(err)
	}
	defer it.Stop()
	var n uint64
	for n < total {
		m, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Metadata(); err != nil {
			b.Fatal(err)
		}
		_ = m.Data()
		n++
	}
	return n
}
