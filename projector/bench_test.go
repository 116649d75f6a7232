package projector

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
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
