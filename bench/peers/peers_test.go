package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// postBody is the body of every post (as in settle's own benchmarks).
var postBody = "Benchmark post for settle: the ledger records every external write intent before the write and settles lost responses without a second write. " +
	strings.Repeat("lorem ipsum ", 16)

// system is one of the compared systems: run makes one durable one-step
// workflow whose step is one POST to the fake API.
type system struct {
	name  string
	setup string // what it runs on, for the table
	run   func(ctx context.Context, id string) error
	stop  func()
}

// result is one measurement.
type result struct {
	system   string
	conc     int
	ops      int
	rate     float64
	p50, p99 time.Duration
	effects  int
}

func payload(id string) json.RawMessage {
	p, _ := json.Marshal(map[string]string{"body": postBody + " " + id})
	return p
}

// write is the one step of the DBOS and Temporal workflows: the same POST
// settle's producer makes, through the same adapter.
func write(ad *httproute.Adapter) func(ctx context.Context, id string) (string, error) {
	return func(ctx context.Context, id string) (string, error) {
		canon, err := ad.NormalizePayload(payload(id))
		if err != nil {
			return "", err
		}
		res, err := ad.Write(ctx, adapter.WriteRequest{IntentID: id, AttemptID: id + ":1", RequestID: id,
			IdempotencyKey: id, Account: "acct_bench", Payload: canon})
		return res.ExternalID, err
	}
}

func settleSystem(b *testing.B, ad *httproute.Adapter) system {
	n := testharness.StartNode(b, embedded.SyncAlways)
	store, err := ledger.OpenStore(context.Background(), n.JS, ledger.DefaultStoreConfig())
	if err != nil {
		b.Fatal(err)
	}
	pc := producer.DefaultConfig()
	pc.Actor = "peers"
	p, err := producer.New(store, pc, adapter.Route{Name: "social_post", Adapter: ad, Policy: adapter.DefaultPolicy()})
	if err != nil {
		b.Fatal(err)
	}
	return system{name: "settle", setup: "embedded nats-server v2.15.2, file store, fsync always (SyncAlways)",
		run: func(ctx context.Context, id string) error {
			res, err := p.Execute(ctx, producer.Request{Route: "social_post", Account: "acct_bench", RequestID: id, Payload: payload(id)})
			if err == nil && res.State != fsm.Verifying {
				err = fmt.Errorf("state %s", res.State)
			}
			return err
		}, stop: func() {}}
}

func dbosSystem(b *testing.B, ad *httproute.Adapter, url string) system {
	ctx, err := dbos.NewContext(context.Background(), dbos.Config{AppName: "settle-peers", DatabaseURL: url,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatalf("dbos: %v", err)
	}
	step := write(ad)
	wf := func(dctx dbos.Context, id string) (string, error) {
		return dbos.RunAsStep(dctx, func(c context.Context) (string, error) { return step(c, id) })
	}
	dbos.RegisterWorkflow(ctx, wf)
	if err := dbos.Launch(ctx); err != nil {
		b.Fatalf("dbos launch: %v", err)
	}
	return system{name: "DBOS", setup: "DBOS Transact Go v1.8.0, PostgreSQL (Debian), fsync=on, synchronous_commit=on",
		run: func(_ context.Context, id string) error {
			h, err := dbos.RunWorkflow(ctx, wf, id, dbos.WithWorkflowID(id))
			if err != nil {
				return err
			}
			_, err = h.GetResult()
			return err
		}, stop: func() { dbos.Shutdown(ctx, 5*time.Second) }}
}

func temporalSystem(b *testing.B, ad *httproute.Adapter, hostPort string) system {
	c, err := client.Dial(client.Options{HostPort: hostPort, Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		b.Fatalf("temporal: %v", err)
	}
	const queue = "settle-peers"
	w := worker.New(c, queue, worker.Options{MaxConcurrentActivityExecutionSize: 512, MaxConcurrentWorkflowTaskExecutionSize: 512,
		MaxConcurrentActivityTaskPollers: 8, MaxConcurrentWorkflowTaskPollers: 8})
	step := write(ad)
	act := func(ctx context.Context, id string) (string, error) { return step(ctx, id) }
	wf := func(ctx workflow.Context, id string) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var out string
		err := workflow.ExecuteActivity(ctx, "write", id).Get(ctx, &out)
		return out, err
	}
	w.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "onestep"})
	w.RegisterActivityWithOptions(act, activity.RegisterOptions{Name: "write"})
	if err := w.Start(); err != nil {
		b.Fatalf("temporal worker: %v", err)
	}
	return system{name: "Temporal", setup: "Temporal CLI v1.5.1 start-dev (server 1.29.1), SQLite file, journal_mode=wal, synchronous=FULL",
		run: func(ctx context.Context, id string) error {
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "onestep", id)
			if err != nil {
				return err
			}
			var out string
			return run.Get(ctx, &out)
		}, stop: func() { w.Stop(); c.Close() }}
}

// measure runs sys with conc callers for d (at least minOps workflows) and
// checks that the fake API saw exactly one effect per workflow.
func measure(b *testing.B, api *fakeapi.SocialAPI, sys system, conc int, d time.Duration, minOps int) result {
	ctx := context.Background()
	// Warm up: connections, pools, caches.
	for i := 0; i < min(conc, 8); i++ {
		if err := sys.run(ctx, fmt.Sprintf("%s-warm-c%d-%d", sys.name, conc, i)); err != nil {
			b.Fatalf("%s warm-up: %v", sys.name, err)
		}
	}
	effects0 := api.Effects()
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var failed atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for failed.Load() == nil {
				i := next.Add(1)
				if time.Since(start) > d && i > int64(minOps) {
					break
				}
				t := time.Now()
				if err := sys.run(ctx, fmt.Sprintf("%s-c%d-%d", sys.name, conc, i)); err != nil {
					failed.Store(err)
					break
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if err := failed.Load(); err != nil {
		b.Fatalf("%s c%d: %v", sys.name, conc, err)
	}
	slices.Sort(lat)
	r := result{system: sys.name, conc: conc, ops: len(lat), rate: float64(len(lat)) / el.Seconds(),
		p50: lat[len(lat)/2], p99: lat[min(len(lat)-1, len(lat)*99/100)], effects: api.Effects() - effects0}
	if r.effects != r.ops {
		b.Fatalf("%s c%d: %d workflows made %d effects on the fake API", sys.name, conc, r.ops, r.effects)
	}
	return r
}

// BenchmarkPeers runs the same one-step workload (record it durably, make
// one POST to the fake social API over loopback HTTP, record the outcome)
// on settle, DBOS Transact Go on PostgreSQL and the Temporal dev server, at
// each concurrency of PEERS_CONC (default 1,64,256), for PEERS_SECONDS
// each (default 8), in one run, and prints a table with settle's ratios.
// PEERS_PG_URL and PEERS_TEMPORAL (host:port) name the running peers;
// run.sh starts them (make bench-peers).
func BenchmarkPeers(b *testing.B) {
	pgURL, temporalAddr := os.Getenv("PEERS_PG_URL"), os.Getenv("PEERS_TEMPORAL")
	if pgURL == "" || temporalAddr == "" {
		b.Fatal("PEERS_PG_URL and PEERS_TEMPORAL are not set: run bench/peers/run.sh (make bench-peers), which starts PostgreSQL and the Temporal dev server")
	}
	secs := 8
	if v, err := strconv.Atoi(os.Getenv("PEERS_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	concs := []int{1, 64, 256}
	if v := os.Getenv("PEERS_CONC"); v != "" {
		concs = nil
		for _, f := range strings.Split(v, ",") {
			c, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || c < 1 {
				b.Fatalf("PEERS_CONC: %q is not a list of concurrencies", v)
			}
			concs = append(concs, c)
		}
	}
	api := fakeapi.NewSocialAPI(b)
	ad := testharness.ExampleRoute(b, "social.yaml", api).Adapter.(*httproute.Adapter)
	var results []result
	var setups []string
	for _, mk := range []func() system{
		func() system { return settleSystem(b, ad) },
		func() system { return dbosSystem(b, ad, pgURL) },
		func() system { return temporalSystem(b, ad, temporalAddr) },
	} {
		sys := mk()
		setups = append(setups, fmt.Sprintf("- %s: %s", sys.name, sys.setup))
		for _, c := range concs {
			minOps := 20
			r := measure(b, api, sys, c, time.Duration(secs)*time.Second, minOps)
			results = append(results, r)
			fmt.Fprintf(os.Stderr, "peers: %-8s c%-4d %8.1f workflows/s  p50 %8.2f ms  p99 %8.2f ms  (%d)\n",
				r.system, r.conc, r.rate, ms(r.p50), ms(r.p99), r.ops)
		}
		sys.stop()
	}
	b.StopTimer()
	fmt.Println(table(results, setups))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// table renders the results with settle's ratio to each peer at each
// concurrency (throughput: settle ÷ peer; p50: peer ÷ settle).
func table(rs []result, setups []string) string {
	var sb strings.Builder
	settle := map[int]result{}
	for _, r := range rs {
		if r.system == "settle" {
			settle[r.conc] = r
		}
	}
	sb.WriteString("\n| system | callers | workflows/s | p50 ms | p99 ms | settle ÷ system (workflows/s) | system ÷ settle (p50) |\n")
	sb.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		s := settle[r.conc]
		fmt.Fprintf(&sb, "| %s | %d | %.1f | %.2f | %.2f | %.1f× | %.1f× |\n", r.system, r.conc, r.rate, ms(r.p50), ms(r.p99),
			s.rate/r.rate, float64(r.p50)/float64(s.p50))
	}
	sb.WriteString("\n" + strings.Join(setups, "\n") + "\n")
	sb.WriteString(targetsTable(rs))
	return sb.String()
}

// peerTargets are the peer targets: settle's workflows/s over a peer's at
// a caller count, in the same run. The Temporal ratios are in the table
// above it, with no target.
var peerTargets = []struct {
	system string
	conc   int
	bound  float64
}{{"DBOS", 256, 10}, {"DBOS", 64, 6}}

// targetsTable renders the peer targets, PASS or MISS (or not measured
// when the run lacks a target's figures).
func targetsTable(rs []result) string {
	rate := map[string]float64{}
	for _, r := range rs {
		rate[fmt.Sprintf("%s/%d", r.system, r.conc)] = r.rate
	}
	var sb strings.Builder
	sb.WriteString("\ntargets, each taken within this run:\n\n| target | figures | value | bound | |\n|---|---|---:|---:|---|\n")
	for _, tg := range peerTargets {
		what := fmt.Sprintf("%d callers: settle ÷ %s (workflows/s)", tg.conc, tg.system)
		s, p := rate[fmt.Sprintf("settle/%d", tg.conc)], rate[fmt.Sprintf("%s/%d", tg.system, tg.conc)]
		if s == 0 || p == 0 {
			fmt.Fprintf(&sb, "| %s | not measured | | ≥ %g | — |\n", what, tg.bound)
			continue
		}
		verdict := "MISS"
		if s/p >= tg.bound {
			verdict = "PASS"
		}
		fmt.Fprintf(&sb, "| %s | %.1f ÷ %.1f | %.1f | ≥ %g | %s |\n", what, s, p, s/p, tg.bound, verdict)
	}
	return sb.String()
}

// TestPeerTargetsTable checks the verdicts on made-up results, and that a
// caller count the run lacks is "not measured".
func TestPeerTargetsTable(t *testing.T) {
	got := targetsTable([]result{{system: "settle", conc: 256, rate: 5000}, {system: "DBOS", conc: 256, rate: 400},
		{system: "Temporal", conc: 256, rate: 10}, {system: "settle", conc: 1, rate: 700}})
	for _, want := range []string{"256 callers: settle ÷ DBOS (workflows/s) | 5000.0 ÷ 400.0 | 12.5 | ≥ 10 | PASS |",
		"64 callers: settle ÷ DBOS (workflows/s) | not measured |"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Temporal") {
		t.Errorf("a Temporal target in the table:\n%s", got)
	}
}
