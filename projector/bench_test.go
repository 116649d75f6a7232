package projector

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/testharness"
)

// BenchmarkProjection projects a generated log of a few thousand events
// into a fresh database per iteration (default config: batches of 8192, WAL,
// synchronous=NORMAL) and, in the same iteration, reads the same stream raw
// with an ordered consumer. It reports both rates and their ratio.
//
//	go test -run XXX -bench Projection ./projector
func BenchmarkProjection(b *testing.B) {
	lg := newTestLog(b)
	intents := generate(b, 1, 40)
	for _, x := range interleave(1, intents) {
		lg.append(x.Route, x.Event)
	}
	total := lg.lastSeq()
	ctx := context.Background()
	dir := b.TempDir()
	var proj, raw time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		cfg := DefaultConfig()
		cfg.DBPath = filepath.Join(dir, "views-"+strconv.Itoa(i)+".db")
		cfg.Logger = quietLogger()
		p, err := Open(ctx, lg.node.JS, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.CatchUp(ctx); err != nil {
			b.Fatal(err)
		}
		if st := p.Stats(); st.Applied != total {
			b.Fatalf("applied %d of %d", st.Applied, total)
		}
		p.Close()
		proj += time.Since(start)

		start = time.Now()
		if n := readRaw(b, lg.node.JS, total); n != total {
			b.Fatalf("raw read %d of %d", n, total)
		}
		raw += time.Since(start)
	}
	b.StopTimer()
	n := float64(total) * float64(b.N)
	projRate, rawRate := n/proj.Seconds(), n/raw.Seconds()
	b.ReportMetric(float64(total), "events/log")
	b.ReportMetric(projRate, "projected_events/s")
	b.ReportMetric(rawRate, "raw_read_events/s")
	b.ReportMetric(projRate/rawRate, "projection/raw_ratio")
}

// readRaw reads total messages of the intents stream with an ordered
// consumer, touching each message's data and metadata.
func readRaw(b *testing.B, js jetstream.JetStream, total uint64) uint64 {
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
	var n, bytes uint64
	for n < total {
		m, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Metadata(); err != nil {
			b.Fatal(err)
		}
		bytes += uint64(len(m.Data()))
		n++
	}
	return n
}

// BenchmarkApplyStore: the SQLite side of a catch-up alone, without NATS:
// a log of finished intents (six events each, testharness.ReplayedIntent)
// encoded and decoded once before the timer, then applied into a fresh
// database per iteration in batches of Config.Batch, as CatchUp applies
// them (synced; SETTLE_BENCH_UNSYNCED=1: unsynced, as a long backlog
// is). SETTLE_BENCH_EVENTS sets the log size (default 60000). cpu_us/event
// is the process's CPU time per event: on a shared machine, where wall
// time measures the neighbours, the figure to compare two versions by.
func BenchmarkApplyStore(b *testing.B) {
	n := 60000
	if v, err := strconv.Atoi(os.Getenv("SETTLE_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	t0 := time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)
	var msgs []rawMsg
	for k := 0; len(msgs) < n; k++ {
		for _, e := range testharness.ReplayedIntent(k, t0) {
			data, err := events.Encode(e)
			if err != nil {
				b.Fatal(err)
			}
			m := rawMsg{seq: uint64(len(msgs) + 1), subject: events.Subject("social_post", e.IntentID), data: data}
			m.decode()
			msgs = append(msgs, m)
		}
	}
	lg := newTestLog(b) // Open wants the stream; nothing is read from it
	ctx := context.Background()
	dir := b.TempDir()
	unsynced := os.Getenv("SETTLE_BENCH_UNSYNCED") == "1"
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cfg := DefaultConfig()
		cfg.DBPath = filepath.Join(dir, "apply-"+strconv.Itoa(i)+".db")
		cfg.Logger = quietLogger()
		p, err := Open(ctx, lg.node.JS, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if unsynced {
			if err := p.beginUnsynced(ctx, uint64(len(msgs))); err != nil {
				b.Fatal(err)
			}
		}
		cpu0 := processCPU(b)
		b.StartTimer()
		for lo := 0; lo < len(msgs); lo += p.batchLimit() {
			if err := p.applyBatch(ctx, msgs[lo:min(lo+p.batchLimit(), len(msgs))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := p.endUnsynced(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += processCPU(b) - cpu0
		if st := p.Stats(); st.Applied != uint64(len(msgs)) {
			b.Fatalf("applied %d of %d", st.Applied, len(msgs))
		}
		p.Close()
		b.StartTimer()
	}
	b.StopTimer()
	total := float64(len(msgs)) * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Microseconds())/total, "cpu_us/event")
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
