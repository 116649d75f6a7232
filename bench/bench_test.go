package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/consumers/reconcile"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/examples/routes"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// route is the one route of every benchmark.
const route = "social_post"

// account is the one account every benchmark writes for.
const account = "acct_bench"

// t0 anchors the event times of the append benchmarks and the manual clock
// of the reconcile benchmark.
var t0 = time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)

// durabilities are the two fsync settings of embedded.Config.
var durabilities = []embedded.Durability{embedded.SyncAlways, embedded.SyncDefault}

// postBody is the body of every benchmark post: with it an intent's three
// events (IntentRecorded, WriteStarted, WriteSucceeded) encode to about
// 600 bytes on average.
var postBody = "Benchmark post for settle: the ledger records every external write intent before the write and settles lost responses without a second write. " +
	strings.Repeat("lorem ipsum ", 16)

// --- the raw JetStream baseline ---------------------------------------------

// probeTime is how long the raw probe publishes before and again after
// each measurement.
const probeTime = 250 * time.Millisecond

// probeChunk is how many messages the probe encodes (untimed) between two
// timed runs of publishes.
const probeChunk = 128

// rawStream is the probe's stream: settle's stream configuration under
// another name and subject space, on the benchmark's own node.
const rawStream, rawSubjects = "BENCH_RAW", "bench.raw"

// rawProbe measures raw JetStream appends on the benchmark's own node, just
// before and just after the benchmark's timed loop: sequential acknowledged
// js.PublishMsg calls of the same encoded events (about 600 bytes), one
// subject per intent, to a stream configured like settle's, without
// Nats-Msg-Id and without the expected-last-subject-sequence header. The
// ratios of a benchmark divide by the probe's rate over both runs, so the
// baseline sees the same disk, CPU and neighbours within a second of the
// measurement.
type rawProbe struct {
	js      jetstream.JetStream
	next    int // events published so far
	elapsed time.Duration
}

// newRawProbe creates the probe's stream next to store's and runs the
// "before" half of the probe.
func newRawProbe(b *testing.B, n *testharness.Node, store *ledger.Store) *rawProbe {
	b.Helper()
	ctx := context.Background()
	sc := store.Stream().CachedInfo().Config
	sc.Name, sc.Subjects, sc.Description = rawStream, []string{rawSubjects + ".>"}, "settle benchmarks: raw append baseline"
	if _, err := n.JS.CreateStream(ctx, sc); err != nil {
		b.Fatalf("raw probe stream: %v", err)
	}
	p := &rawProbe{js: n.JS}
	p.run(b)
	return p
}

// run publishes for probeTime (at least one chunk).
func (p *rawProbe) run(b *testing.B) {
	b.Helper()
	ctx := context.Background()
	var spent time.Duration
	for spent < probeTime {
		msgs := rawMsgs(rawSubjects, p.next, probeChunk)
		p.next += probeChunk
		start := time.Now()
		publishRaw(b, ctx, p.js, msgs)
		spent += time.Since(start)
	}
	p.elapsed += spent
}

// rate runs the "after" half of the probe and returns raw events/s over
// both halves.
func (p *rawProbe) rate(b *testing.B) float64 {
	b.Helper()
	p.run(b)
	return float64(p.next) / p.elapsed.Seconds()
}

// openStore opens settle's intent stream on n, a node started with
// durability d, configured as settle serve configures it on its embedded
// server: at the default sync every append is published alone
// (ledger.StoreConfig.ForServerSync).
func openStore(b *testing.B, n *testharness.Node, d embedded.Durability) *ledger.Store {
	b.Helper()
	s, err := ledger.OpenStore(context.Background(), n.JS, ledger.DefaultStoreConfig().ForServerSync(d.SyncsEveryWrite()))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// publishRaw publishes msgs one after the other, each acknowledged.
func publishRaw(b *testing.B, ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) {
	b.Helper()
	for _, m := range msgs {
		if _, err := js.PublishMsg(ctx, m); err != nil {
			b.Fatalf("raw publish: %v", err)
		}
	}
}

// reportRaw reports the probe's rate and returns it.
func reportRaw(b *testing.B, p *rawProbe) float64 {
	raw := p.rate(b)
	report(b, raw, "raw_events/s")
	return raw
}

// --- events -----------------------------------------------------------------

var (
	payloadOnce sync.Once
	payload     json.RawMessage
	payloadSum  string
)

func benchPayload() (json.RawMessage, string) {
	payloadOnce.Do(func() {
		raw, _ := json.Marshal(map[string]any{"body": postBody})
		p, err := socialPayload(raw)
		if err != nil {
			panic(err)
		}
		sum, err := events.PayloadSHA256(p)
		if err != nil {
			panic(err)
		}
		payload, payloadSum = p, sum
	})
	return payload, payloadSum
}

// socialPayload is raw in the canonical shape of examples/routes/social.yaml
// (the route's payload normaliser; no call is made).
func socialPayload(raw json.RawMessage) (json.RawMessage, error) {
	data, err := routes.File("social.yaml")
	if err != nil {
		return nil, err
	}
	env := map[string]string{"SOCIAL_BASE_URL": "http://127.0.0.1:1", "SOCIAL_TOKEN": "bench-token"}
	cfgs, err := httproute.Parse(data, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return nil, err
	}
	ad, err := httproute.New(cfgs[0])
	if err != nil {
		return nil, err
	}
	return ad.NormalizePayload(raw)
}

// eventAt returns event k of the synthetic log: intent k/3, version k%3+1,
// the life of a successful write (IntentRecorded, WriteStarted,
// WriteSucceeded).
func eventAt(k int) events.Event {
	p, sum := benchPayload()
	i := k / 3
	reqID := fmt.Sprintf("bench:%09d", i)
	id := events.ScopedIntentID("default", route, "acct_1", reqID)
	at := t0.Add(time.Duration(i) * time.Millisecond)
	key := events.IdempotencyKey(id)
	switch k % 3 {
	case 0:
		return events.New(id, 1, at, "bench", "", &events.IntentRecordedData{
			Tenant: "default", Route: route, Account: account, RequestID: reqID,
			IdempotencyKey: key, Payload: p, PayloadSHA256: sum, Canon: events.CanonV1,
			PlannedAt: at, Policy: adapter.DefaultPolicy(),
		})
	case 1:
		return events.New(id, 2, at, "bench", events.AttemptID(id, 1),
			&events.WriteStartedData{Attempt: 1, IdempotencyKey: key, Deadline: at.Add(time.Minute)})
	default:
		return events.New(id, 3, at, "bench", events.AttemptID(id, 1),
			&events.WriteSucceededData{ExternalID: fmt.Sprintf("p_%d", i+1), LiveURL: fmt.Sprintf("http://127.0.0.1:8080/p/p_%d", i+1), StatusCode: 201})
	}
}

// rawMsgs encodes events start … start+n-1 as plain messages on their
// intents' subjects under prefix: no Nats-Msg-Id, no expected-sequence
// header.
func rawMsgs(prefix string, start, n int) []*nats.Msg {
	out := make([]*nats.Msg, n)
	for j := range out {
		e := eventAt(start + j)
		data, err := events.Encode(e)
		if err != nil {
			panic(err)
		}
		out[j] = &nats.Msg{Subject: prefix + "." + route + "." + e.IntentID, Data: data}
	}
	return out
}

func reportRate(b *testing.B, unit string) float64 {
	rate := float64(b.N) / b.Elapsed().Seconds()
	report(b, rate, unit)
	return rate
}

// --- 1. raw appends -----------------------------------------------------------

// BenchmarkAppendRaw: one acknowledged js.PublishMsg per op, sequential, of
// an encoded event to its intent's subject in settle's stream, without
// Msg-Id or CAS: the probe's measurement, timed by the benchmark. Its
// ratio_vs_raw (this loop against the probe around it) shows the noise;
// p50_ms with fsync always is one synced publish, the lone intent's
// baseline in the targets table.
func BenchmarkAppendRaw(b *testing.B) {
	for _, d := range durabilities {
		b.Run(string(d), func(b *testing.B) {
			n := testharness.StartNode(b, d)
			store := openStore(b, n, d)
			probe := newRawProbe(b, n, store)
			ctx := context.Background()
			msgs := rawMsgs(events.SubjectPrefix, 0, b.N)
			size := 0
			for _, m := range msgs {
				size += len(m.Data)
			}
			lat := make([]time.Duration, len(msgs))
			b.ResetTimer()
			for k, m := range msgs {
				start := time.Now()
				if _, err := n.JS.PublishMsg(ctx, m); err != nil {
					b.Fatalf("raw publish: %v", err)
				}
				lat[k] = time.Since(start)
			}
			b.StopTimer()
			rate := reportRate(b, "events/s")
			report(b, rate/reportRaw(b, probe), "ratio_vs_raw")
			report(b, float64(size)/float64(b.N), "B/event")
			reportLatency(b, lat)
		})
	}
}

// rawBatch is the size of BenchmarkAppendRawBatch's atomic batches.
const rawBatch = 100

// rawBatchLarge is the size of its -256 runs: the largest batch 256
// callers can make (each has one append outstanding). Against the batches
// of 100 it shows the part of a batch's cost that does not grow with its
// messages (on a single-replica file stream the server stages each atomic
// batch in a store of its own on disk).
const rawBatchLarge = 256

// BenchmarkAppendRawBatch: the same encoded events as BenchmarkAppendRaw,
// published as JetStream atomic batches of 100 (Nats-Batch-Id,
// Nats-Batch-Sequence, Nats-Batch-Commit on the last; one ack per batch),
// one after the other, each message with its Nats-Msg-Id: what the log
// itself can take when one sync covers many messages.
func BenchmarkAppendRawBatch(b *testing.B) {
	for _, d := range durabilities {
		b.Run(string(d), func(b *testing.B) { appendRawBatch(b, d, false, rawBatch) })
		if d == embedded.SyncAlways {
			b.Run(string(d)+"-256", func(b *testing.B) { appendRawBatch(b, d, false, rawBatchLarge) })
		}
		// The same batches, each intent's first message also carrying the
		// expected last sequence of its subject (0), as settle's
		// IntentStarted does: what the server's check costs a batch.
		b.Run(string(d)+"-cas", func(b *testing.B) { appendRawBatch(b, d, true, rawBatch) })
	}
}

// casIntents hands each run of the -cas benchmarks intents no earlier
// run (or raw probe) used.
var casIntents atomic.Int64

func appendRawBatch(b *testing.B, d embedded.Durability, cas bool, size int) {
	n := testharness.StartNode(b, d)
	store := openStore(b, n, d)
	probe := newRawProbe(b, n, store)
	start := 0
	if cas {
		start = 3 * int(casIntents.Add(int64(b.N)+1)+1<<30)
	}
	msgs := rawMsgs(events.SubjectPrefix, start, b.N)
	for k, m := range msgs {
		m.Header = nats.Header{}
		m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("raw:%d:%d", start, k))
		if cas && k%3 == 0 {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0") // an intent's first message
		}
	}
	b.ResetTimer()
	for lo := 0; lo < len(msgs); lo += size {
		publishAtomicRaw(b, n.NC, msgs[lo:min(lo+size, len(msgs))])
	}
	b.StopTimer()
	rate := reportRate(b, "events/s")
	report(b, rate/reportRaw(b, probe), "ratio_vs_raw")
}

// publishAtomicRaw publishes msgs as one atomic batch and waits for its ack.
func publishAtomicRaw(b *testing.B, nc *nats.Conn, msgs []*nats.Msg) {
	b.Helper()
	id := nuid.Next()
	for k, m := range msgs {
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(k+1))
		if k < len(msgs)-1 {
			if err := nc.PublishMsg(m); err != nil {
				b.Fatal(err)
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		resp, err := nc.RequestMsg(m, 10*time.Second)
		if err != nil {
			b.Fatalf("atomic batch: %v", err)
		}
		var ack struct {
			Count int             `json:"count"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(resp.Data, &ack); err != nil || ack.Error != nil || ack.Count != len(msgs) {
			b.Fatalf("atomic batch ack %s: %v", resp.Data, err)
		}
	}
}

// --- 2. store appends -------------------------------------------------------

// BenchmarkAppendCAS: one Store.Append per op, sequential: the next version
// of the current intent, with Nats-Msg-Id and the expected last subject
// sequence (0 for version 1), including the event's encoding.
func BenchmarkAppendCAS(b *testing.B) {
	for _, d := range durabilities {
		b.Run(string(d), func(b *testing.B) {
			n := testharness.StartNode(b, d)
			store := openStore(b, n, d)
			ctx := context.Background()
			evs := make([]events.Event, b.N)
			for k := range evs {
				evs[k] = eventAt(k)
			}
			probe := newRawProbe(b, n, store)
			var last uint64
			b.ResetTimer()
			for _, e := range evs {
				if e.Version == 1 {
					last = 0
				}
				seq, err := store.Append(ctx, route, e, last)
				if err != nil {
					b.Fatalf("append %s: %v", e.EventID, err)
				}
				last = seq
			}
			b.StopTimer()
			rate := reportRate(b, "events/s")
			report(b, rate/reportRaw(b, probe), "ratio_vs_raw")
		})
	}
}

// --- 3. Execute ---------------------------------------------------------------

// newAdapter is the route examples/routes/social.yaml compiled against
// api, on the route's own client (adapter.NewHTTPClient), as settle serve runs it.
func newAdapter(b *testing.B, api *fakeapi.SocialAPI) *httproute.Adapter {
	b.Helper()
	return testharness.ExampleRoute(b, "social.yaml", api).Adapter.(*httproute.Adapter)
}

// newProducer is the Execute benchmarks' producer: one route on ad, the
// default policy.
func newProducer(b *testing.B, store *ledger.Store, ad adapter.Adapter) *producer.Producer {
	b.Helper()
	pc := producer.DefaultConfig()
	pc.Actor = "bench"
	p, err := producer.New(store, pc, adapter.Route{Name: route, Adapter: ad, Policy: adapter.DefaultPolicy()})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// request is a new intent of the benchmark account. Its body is its own:
// search tells two intents of one account apart by payload only.
func request(requestID string, plannedAt time.Time) producer.Request {
	p, _ := json.Marshal(map[string]string{"body": postBody + " " + requestID})
	return producer.Request{Route: route, Account: account, RequestID: requestID, Payload: p, PlannedAt: plannedAt}
}

// executeConcurrency are the caller counts of BenchmarkExecute.
var executeConcurrency = []int{1, 16, 64, 256}

// BenchmarkExecute: one Producer.Execute of a new intent per op against the
// fake social API (success): IntentStarted (the record and the write's
// start in one message, CAS "subject empty", no read before it; a share
// of an atomic batch under load), POST over loopback HTTP,
// WriteSucceeded. cN is N goroutines sharing one producer and one store
// (so, with fsync always, their appends are group-committed; at the
// default sync each is published alone, as serve does), splitting b.N.
// p50_ms and p99_ms are the latencies of single Executes; msgs/batch is the
// mean size of the atomic batches the group commit made (0: every append
// went alone), alone/intent the appends published alone per intent; cpu_us/intent is the CPU time of the whole process (settle,
// the in-process nats-server, the fake API, the GC) per Execute.
func BenchmarkExecute(b *testing.B) {
	for _, d := range durabilities {
		for _, conc := range executeConcurrency {
			b.Run(fmt.Sprintf("%s/c%d", d, conc), func(b *testing.B) {
				n := testharness.StartNode(b, d)
				store := openStore(b, n, d)
				api := fakeapi.NewSocialAPI(b)
				p := newProducer(b, store, newAdapter(b, api))
				ctx := context.Background()
				var next atomic.Int64
				var failed atomic.Bool
				lat := make([]time.Duration, b.N)
				probe := newRawProbe(b, n, store)
				work := func() {
					for !failed.Load() {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						start := time.Now()
						res, err := p.Execute(ctx, request(fmt.Sprintf("task:%d", i), time.Time{}))
						lat[i-1] = time.Since(start)
						if err != nil || res.State != fsm.Verifying {
							failed.Store(true)
							b.Errorf("execute %d: state %v, err %v", i, stateOf(res), err)
							return
						}
					}
				}
				st0 := store.BatchStats()
				b.ResetTimer()
				cpu0 := processCPU(b)
				var wg sync.WaitGroup
				for g := 0; g < conc; g++ {
					wg.Add(1)
					go func() { defer wg.Done(); work() }()
				}
				wg.Wait()
				cpu := processCPU(b) - cpu0
				b.StopTimer()
				if failed.Load() {
					return
				}
				report(b, float64(cpu.Microseconds())/float64(b.N), "cpu_us/intent")
				if api.Effects() != b.N || api.Writes() != b.N {
					b.Fatalf("effects %d writes %d, want %d", api.Effects(), api.Writes(), b.N)
				}
				st := store.BatchStats()
				rate := reportRate(b, "intents/s")
				report(b, rate/reportRaw(b, probe), "ratio_vs_raw_append")
				reportLatency(b, lat)
				report(b, float64(st.Batches-st0.Batches)/float64(b.N), "batches/intent")
				report(b, float64(st.Alone-st0.Alone)/float64(b.N), "alone/intent")
				if nb := st.Batches - st0.Batches; nb > 0 {
					report(b, float64(st.Messages-st0.Messages)/float64(nb), "msgs/batch")
				} else {
					report(b, 0, "msgs/batch")
				}
			})
		}
	}
}

// processCPU is the CPU time (user and system) the whole process has
// used: settle's client, the in-process nats-server and the fake API.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportLatency reports the median and 99th percentile of lat in ms.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / float64(time.Millisecond)
	}
	report(b, at(0.50), "p50_ms")
	report(b, at(0.99), "p99_ms")
}

func stateOf(res *producer.Result) fsm.State {
	if res == nil {
		return ""
	}
	return res.State
}

// --- 4. reconciliation ------------------------------------------------------

// reconcileDurability is the fsync setting of the reconcile benchmarks:
// settle's default.
const reconcileDurability = embedded.SyncAlways

// reconcileGroup is how many unknown intents share overlapping search
// windows: each group's posts are made at one clock time, its intents'
// planned_at spread over 16 minutes, and groups are two hours apart (the
// windows are planned_at −5m … +30m, ±1s skew).
const reconcileGroup = 64

// reconcileBatch is the Run worker's fetch size.
const reconcileBatch = 64

type reconcileWorld struct {
	node  *testharness.Node
	clock *testharness.ManualClock
	api   *fakeapi.SocialAPI
	route adapter.Route
	store *ledger.Store
	prod  *producer.Producer
}

func newReconcileWorld(b *testing.B) *reconcileWorld {
	b.Helper()
	n := testharness.StartNode(b, reconcileDurability)
	clock := testharness.NewManualClock(t0)
	// Posts are visible at once (no eventual-consistency delay).
	api := fakeapi.NewSocialAPI(b, fakeapi.WithSocialClock(clock.Now))
	pol := adapter.DefaultPolicy()
	pol.SearchBefore = events.Duration(5 * time.Minute)
	pol.SearchAfter = events.Duration(30 * time.Minute)
	pol.ClockSkew = events.Duration(time.Second)
	rt := adapter.Route{Name: route, Adapter: newAdapter(b, api), Policy: pol}
	store := openStore(b, n, reconcileDurability)
	pc := producer.DefaultConfig()
	pc.Now = clock.Now
	pc.Actor = "writer"
	prod, err := producer.New(store, pc, rt)
	if err != nil {
		b.Fatal(err)
	}
	return &reconcileWorld{node: n, clock: clock, api: api, route: rt, store: store, prod: prod}
}

// unknownIntents makes count intents whose POST commits and whose response
// is dropped (CommitThenDrop): each is unknown, with exactly one post on
// the fake. They are made a group at a time, concurrently within a group.
func (w *reconcileWorld) unknownIntents(b *testing.B, count int) []string {
	b.Helper()
	ids := make([]string, count)
	ctx := context.Background()
	for g := 0; g*reconcileGroup < count; g++ {
		base := t0.Add(time.Duration(g) * 2 * time.Hour)
		w.clock.Set(base)
		lo, hi := g*reconcileGroup, min(count, (g+1)*reconcileGroup)
		for range hi - lo {
			w.api.Next(fakeapi.CommitThenDrop())
		}
		var wg sync.WaitGroup
		var failed atomic.Bool
		for i := lo; i < hi; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				planned := base.Add(time.Duration(i-lo) * 15 * time.Second)
				res, err := w.prod.Execute(ctx, request(fmt.Sprintf("task:%d", i), planned))
				if err != nil || res.State != fsm.Unknown {
					failed.Store(true)
					b.Errorf("setup execute %d: state %v, err %v", i, stateOf(res), err)
					return
				}
				ids[i] = res.IntentID
			}()
		}
		wg.Wait()
		if failed.Load() {
			b.FailNow()
		}
	}
	if w.api.Effects() != count || w.api.Writes() != count || w.api.PendingFaults() != 0 {
		b.Fatalf("setup: effects %d writes %d pending faults %d, want %d", w.api.Effects(), w.api.Writes(), w.api.PendingFaults(), count)
	}
	return ids
}

// states counts the intents by state.
func (w *reconcileWorld) states(b *testing.B, ids []string) map[fsm.State]int {
	b.Helper()
	out := map[fsm.State]int{}
	for _, id := range ids {
		h, err := w.store.Load(context.Background(), route, id)
		if err != nil {
			b.Fatal(err)
		}
		i, err := h.Fold()
		if err != nil {
			b.Fatal(err)
		}
		out[i.State]++
	}
	return out
}

func (w *reconcileWorld) reconciler(b *testing.B) *reconcile.Reconciler {
	b.Helper()
	cfg := reconcile.DefaultConfig()
	cfg.Durable = "bench-reconciler"
	cfg.Worker = "bench-worker"
	cfg.Now = w.clock.Now
	cfg.Recheck = time.Minute
	cfg.MaxRecheck = 8 * time.Minute
	cfg.MaxWait = 20 * time.Millisecond
	cfg.AckWait = 30 * time.Second
	cfg.Lease = 30 * time.Second
	cfg.Batch = reconcileBatch
	if v, err := strconv.Atoi(os.Getenv("SETTLE_BENCH_STEPS")); err == nil && v > 0 {
		cfg.Steps = v
	}
	cfg.Rand = rand.New(rand.NewPCG(7, 7))
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := reconcile.NewReconciler(w.store, cfg, w.route)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkReconcile: b.N unknown intents of one account (groups of 64 with
// overlapping windows, made before the timer starts), then every one
// settled to confirmed by search, readback and URL probe, with the manual
// clock standing still (no real waiting). A group is written by 64
// concurrent Execute calls, as in a burst whose responses were all lost:
// its OutcomeUnknown events mostly sit next to each other on the stream,
// so one fetch of 64 messages wakes most of a group (had each intent's
// three events been adjacent, a fetch would wake about 21).
//
//   - batched: one Reconciler.Run worker (Batch 64) consumes the stream from
//     its first message; the timer stops when the log holds every intent's
//     three reconciliation events (ReconcileStarted, CandidateFound,
//     ReadbackPassed).
//   - unbatched: one Reconciler.Step per intent, in order.
//
// reads/intent counts the fake's list pages and gets; lists/intent its
// list pages alone; readcalls/intent the reconciler's own count of
// external reads (searches, gets and URL probes).
func BenchmarkReconcile(b *testing.B) {
	for _, batched := range []bool{true, false} {
		name := "unbatched"
		if batched {
			name = "batched"
		}
		b.Run(name, func(b *testing.B) {
			w := newReconcileWorld(b)
			ids := w.unknownIntents(b, b.N)
			r := w.reconciler(b)
			ctx := context.Background()
			if batched {
				// The worker's Fetch(64) returns when 64 messages came or
				// after its 1 s max wait: with fewer than 64 messages left
				// behind the last unknown intent (b.N < ~22), the run would
				// measure that idle second. Other traffic on the stream
				// fills the last fetch: messages on a subject that is no
				// intent's, which the worker acks unread.
				for k := range reconcileBatch {
					if _, err := w.node.JS.Publish(ctx, fmt.Sprintf("%s.other.traffic%d", events.SubjectPrefix, k), []byte("{}")); err != nil {
						b.Fatal(err)
					}
				}
			}
			info, err := w.store.Stream().Info(ctx)
			if err != nil {
				b.Fatal(err)
			}
			want := info.State.Msgs + 3*uint64(b.N)
			reads0, lists0 := w.api.Reads(), w.api.ListCalls()
			probe := newRawProbe(b, w.node, w.store)

			b.ResetTimer()
			if batched {
				runCtx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- r.Run(runCtx) }()
				// Stop at the last append; fail when the log stops growing
				// (an intent left confirmed-less appends fewer events).
				var seen uint64
				progress := time.Now()
				for {
					info, err := w.store.Stream().Info(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if info.State.Msgs >= want {
						break
					}
					if info.State.Msgs != seen {
						seen, progress = info.State.Msgs, time.Now()
					} else if time.Since(progress) > 15*time.Second {
						b.StopTimer()
						cancel()
						<-done
						b.Fatalf("the worker stalled at %d of %d events; states %v", seen, want, w.states(b, ids))
					}
					time.Sleep(2 * time.Millisecond)
				}
				b.StopTimer()
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			} else {
				for _, id := range ids {
					res, err := r.Step(ctx, route, id)
					if err != nil || !res.Done || res.State != fsm.Confirmed {
						b.Fatalf("step %s: %+v %v", id, res, err)
					}
				}
				b.StopTimer()
			}

			reads, lists := w.api.Reads()-reads0, w.api.ListCalls()-lists0
			if st := w.states(b, ids); st[fsm.Confirmed] != b.N {
				b.Fatalf("states %v, want %d confirmed", st, b.N)
			}
			if w.api.Effects() != b.N || w.api.Writes() != b.N {
				b.Fatalf("effects %d writes %d, want %d: a second write", w.api.Effects(), w.api.Writes(), b.N)
			}
			rate := reportRate(b, "intents/s")
			report(b, rate/reportRaw(b, probe), "ratio_vs_raw_append")
			report(b, float64(reads)/float64(b.N), "reads/intent")
			report(b, float64(lists)/float64(b.N), "lists/intent")
			report(b, float64(r.ReadCalls())/float64(b.N), "readcalls/intent")
		})
	}
}
