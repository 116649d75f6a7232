package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/consumers/audit"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/testharness"
)

// finishedEvents are the three events of an intent confirmed by its
// write's response (a route that trusts responses): IntentRecorded,
// WriteStarted, WriteConfirmed.
func finishedEvents(k int) []events.Event {
	p, sum := benchPayload()
	reqID := fmt.Sprintf("heap:%09d", k)
	id := events.ScopedIntentID("default", route, account, reqID)
	at := t0.Add(time.Duration(k) * time.Millisecond)
	key := events.IdempotencyKey(id)
	pol := adapter.DefaultPolicy()
	pol.TrustResponse = true
	att := events.AttemptID(id, 1)
	return []events.Event{
		events.New(id, 1, at, "bench", "", &events.IntentRecordedData{Tenant: "default", Route: route, Account: account, RequestID: reqID,
			IdempotencyKey: key, Payload: p, PayloadSHA256: sum, Canon: events.CanonV1, PlannedAt: at, Policy: pol}),
		events.New(id, 2, at, "bench", att, &events.WriteStartedData{Attempt: 1, IdempotencyKey: key, Deadline: at.Add(time.Minute)}),
		events.New(id, 3, at, "bench", att, &events.WriteConfirmedData{StatusCode: 201, Receipt: events.Receipt{
			ExternalID: fmt.Sprintf("p_%d", k), LiveURL: fmt.Sprintf("http://127.0.0.1:8080/p/p_%d", k), PayloadSHA256: sum,
			Source: "response", IdempotencyKey: key, RequestID: reqID, AttemptID: att}}),
	}
}

// buildFinished appends n finished intents to settle's stream on node, in
// atomic batches of 333 intents (999 messages, each with its Msg-Id).
func buildFinished(b *testing.B, node *testharness.Node, n int) {
	b.Helper()
	const perBatch = 333
	for lo := 0; lo < n; lo += perBatch {
		var msgs []*nats.Msg
		for k := lo; k < min(lo+perBatch, n); k++ {
			for _, e := range finishedEvents(k) {
				data, err := events.Encode(e)
				if err != nil {
					b.Fatal(err)
				}
				m := nats.NewMsg(events.Subject(route, e.IntentID))
				m.Data = data
				m.Header.Set(jetstream.MsgIDHeader, e.EventID)
				msgs = append(msgs, m)
			}
		}
		publishAtomicRaw(b, node.NC, msgs)
	}
}

// BenchmarkHeapFinished: the Go heap in use (after a GC) while the audit
// and the projector go through a log of SETTLE_BENCH_INTENTS finished
// intents (default 1,000,000; three events each), sampled at 10 % and at
// 100 % of each: flat means the second is not the first times ten. The
// nats-server runs in the process (its caches and per-subject index are
// part of every figure); base_heap_MiB is the heap once the log is built.
func BenchmarkHeapFinished(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("SETTLE_BENCH_INTENTS")); err == nil && v > 0 {
		n = v
	}
	node := testharness.StartNode(b, embedded.SyncDefault)
	if _, err := ledger.OpenStore(context.Background(), node.JS, ledger.DefaultStoreConfig()); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	buildFinished(b, node, n)
	build := time.Since(start)
	total := uint64(3 * n)
	ctx := context.Background()
	base := heapMiB()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The baseline at this size: a raw ordered read of the stream.
		t := time.Now()
		if got := readRaw(b, node.JS, total); got != total {
			b.Fatalf("raw read %d of %d", got, total)
		}
		rawRate := float64(total) / time.Since(t).Seconds()
		// The audit, sampled from its progress callback.
		var auditAt [2]float64
		cfg := audit.DefaultAuditConfig()
		cfg.ProgressEvery = total / 10
		cfg.Progress = func(done, _ uint64) {
			switch {
			case done >= total/10 && auditAt[0] == 0:
				auditAt[0] = heapMiB()
			case done >= total:
				auditAt[1] = heapMiB()
			}
		}
		t = time.Now()
		rep, err := audit.Audit(ctx, node.JS, cfg)
		if err != nil {
			b.Fatal(err)
		}
		auditTime := time.Since(t)
		if !rep.OK() || rep.Events != total || rep.States["confirmed"] != n {
			b.Fatalf("audit: ok %v, %d events, states %v", rep.OK(), rep.Events, rep.States)
		}
		rep = nil

		// The projector, sampled by a watcher of its stats.
		pc := projector.DefaultConfig()
		pc.DBPath = filepath.Join(b.TempDir(), "views.db")
		p, err := projector.Open(ctx, node.JS, pc)
		if err != nil {
			b.Fatal(err)
		}
		var projAt [2]atomic.Uint64 // math.Float64bits
		stop := make(chan struct{})
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if p.Stats().Applied >= total/10 && projAt[0].Load() == 0 {
					projAt[0].Store(uint64(heapMiB() * 1024))
					return
				}
			}
		}()
		t = time.Now()
		if err := p.CatchUp(ctx); err != nil {
			b.Fatal(err)
		}
		projTime := time.Since(t)
		close(stop)
		<-watched
		projAt[1].Store(uint64(heapMiB() * 1024))
		if st := p.Stats(); st.Applied != total || st.Cached != 0 {
			b.Fatalf("projector: %+v", st)
		}
		p.Close()
		report(b, float64(n), "finished_intents")
		report(b, float64(total), "events_in_log")
		report(b, float64(total)/build.Seconds(), "build_events/s")
		report(b, base, "base_heap_MiB")
		report(b, auditAt[0], "audit_heap_10pct_MiB")
		report(b, auditAt[1], "audit_heap_100pct_MiB")
		report(b, rawRate, "raw_read_events/s")
		report(b, float64(total)/auditTime.Seconds(), "audit_events/s")
		report(b, float64(total)/auditTime.Seconds()/rawRate, "audit/raw")
		report(b, float64(projAt[0].Load())/1024, "projector_heap_10pct_MiB")
		report(b, float64(projAt[1].Load())/1024, "projector_heap_100pct_MiB")
		report(b, float64(total)/projTime.Seconds(), "projected_events/s")
		report(b, float64(total)/projTime.Seconds()/rawRate, "projection/raw")
	}
}
