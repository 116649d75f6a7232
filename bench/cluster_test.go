package bench

import (
	"context"
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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/node"
	"github.com/settle-dev/settle/testharness"
)

// clusterConcurrency are the caller counts of BenchmarkExecuteCluster
// (SETTLE_BENCH_CLUSTER_CONC, comma-separated, replaces them).
var clusterConcurrency = []int{1, 64, 256}

// settleNode is one settle process of the cluster benchmark: a node.Node
// (the producer, its reconciler and the projector, as settle serve runs
// them) connected to a nats-server it did not start.
type settleNode struct {
	n    *node.Node
	stop func()
}

// startSettle opens and runs a settle node on natsURL with replicas and
// waits until it has read the log and takes appends.
func startSettle(b *testing.B, actor, natsURL string, replicas int, rt adapter.Route) *settleNode {
	b.Helper()
	cfg := node.DefaultConfig()
	cfg.Command, cfg.Actor = "settle bench", actor
	cfg.NATSURL, cfg.Replicas, cfg.Workers = natsURL, replicas, 1
	cfg.Routes = []adapter.Route{rt}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := node.Open(ctx, cfg)
	if err != nil {
		b.Fatalf("settle node %s: %v", actor, err)
	}
	rctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(rctx) }()
	s := &settleNode{n: n, stop: func() { stop(); <-ran; n.Close() }}
	b.Cleanup(s.stop)
	if err := n.Started(ctx); err != nil {
		b.Fatalf("settle node %s: %v", actor, err)
	}
	return s
}

// BenchmarkExecuteCluster: Execute of a new intent per op, as
// BenchmarkExecute, by settle nodes (node.Node: producer, one reconciler
// and the projector running, as settle serve runs them) connected to
// nats-server processes of their own on loopback (testharness.
// StartNATSCluster: the shipped deploy/nats configuration, sync_interval
// always, so every write is fsynced), in one run:
//
//   - single/cN: one server, an R1 stream, one settle node;
//   - cluster/cN: three servers, an R3 stream, one settle node;
//   - cluster2/cN: the same cluster, two settle nodes (two processes'
//     worth: their own connections, producers, reconcilers and views),
//     each connected to another server and taking half the callers;
//     intents/s is their total.
//
// The route trusts the write's response, so an intent is settled by its
// Execute (confirmed) and every intent made exactly one effect on the
// fake. Routes between the servers run through the harness's TCP proxies
// in this process (they let the fault suite cut them): their copying is
// part of every cluster figure. SETTLE_BENCH_CLUSTER_CONC sets the caller
// counts (default 1,64,256).
func BenchmarkExecuteCluster(b *testing.B) {
	concs := clusterConcurrency
	if v := os.Getenv("SETTLE_BENCH_CLUSTER_CONC"); v != "" {
		concs = nil
		for _, f := range strings.Split(v, ",") {
			c, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || c < 1 {
				b.Fatalf("SETTLE_BENCH_CLUSTER_CONC: %q is not a list of caller counts", v)
			}
			concs = append(concs, c)
		}
	}
	api := fakeapi.NewSocialAPI(b)
	pol := adapter.DefaultPolicy()
	pol.TrustResponse = true
	rt := adapter.Route{Name: route, Adapter: newAdapter(b, api), Policy: pol}

	one := testharness.StartNATSCluster(b, testharness.NATSClusterOptions{Nodes: 1})
	single := []*settleNode{startSettle(b, "bench-single", one.DirectURLs(0), 1, rt)}
	three := testharness.StartNATSCluster(b, testharness.NATSClusterOptions{})
	first := startSettle(b, "bench-a", three.DirectURLs(0, 1, 2), 3, rt)
	second := startSettle(b, "bench-b", three.DirectURLs(1, 2, 0), 3, rt)

	rawOne := newPublishProbe(b, one.DirectURLs(0), 1)
	rawThree := newPublishProbe(b, three.DirectURLs(0, 1, 2), 3)

	var seq atomic.Int64 // request ids are unique across every run
	for _, setup := range []struct {
		name  string
		nodes []*settleNode
		raw   *publishProbe
	}{{"single", single, rawOne}, {"cluster", []*settleNode{first}, rawThree}, {"cluster2", []*settleNode{first, second}, rawThree}} {
		for _, conc := range concs {
			if conc < len(setup.nodes) {
				continue // a node without a caller shares nothing
			}
			b.Run(fmt.Sprintf("%s/c%d", setup.name, conc), func(b *testing.B) {
				runExecute(b, api, setup.nodes, conc, &seq)
				if !b.Failed() {
					report(b, setup.raw.p50(b), "raw_publish_p50_ms")
				}
			})
		}
	}
}

// runExecute runs b.N Executes by conc callers spread over nodes and
// reports their rate and latencies.
func runExecute(b *testing.B, api *fakeapi.SocialAPI, nodes []*settleNode, conc int, seq *atomic.Int64) {
	ctx := context.Background()
	effects0, writes0 := api.Effects(), api.Writes()
	var next atomic.Int64
	var failed atomic.Bool
	done := make([]atomic.Int64, len(nodes))
	lat := make([]time.Duration, b.N)
	work := func(k int) {
		nd := nodes[k]
		for !failed.Load() {
			i := next.Add(1)
			if i > int64(b.N) {
				return
			}
			start := time.Now()
			res, err := nd.n.Producer().Execute(ctx, request(fmt.Sprintf("cluster:%d", seq.Add(1)), time.Time{}))
			lat[i-1] = time.Since(start)
			if err != nil || res.State != fsm.Confirmed {
				failed.Store(true)
				b.Errorf("execute %d: state %v, err %v", i, stateOf(res), err)
				return
			}
			done[k].Add(1)
		}
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() { defer wg.Done(); work(g % len(nodes)) }()
	}
	wg.Wait()
	b.StopTimer()
	if failed.Load() {
		return
	}
	if e, w := api.Effects()-effects0, api.Writes()-writes0; e != b.N || w != b.N {
		b.Fatalf("effects %d writes %d, want %d", e, w, b.N)
	}
	for k := range done {
		if b.N >= 64 && done[k].Load() == 0 {
			b.Fatalf("settle node %d settled no intent: %d of %d by the others", k, int64(b.N)-done[k].Load(), b.N)
		}
	}
	reportRate(b, "intents/s")
	reportLatency(b, lat)
	if len(nodes) > 1 {
		// The share of the least busy node (0.5: an even split).
		least := done[0].Load()
		for k := range done {
			least = min(least, done[k].Load())
		}
		report(b, float64(least)/float64(b.N), "least_node_share")
	}
}

// publishProbe times sequential acknowledged publishes of about 600 bytes
// to a stream of its own with the replicas of the setup's log, on the
// same servers: one synced (and, at R3, replicated) publish, the
// baseline of the setup's latencies.
type publishProbe struct {
	js   jetstream.JetStream
	subj string
}

func newPublishProbe(b *testing.B, url string, replicas int) *publishProbe {
	b.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	testharness.CreateStream(b, js, jetstream.StreamConfig{Name: "BENCH_RAW", Subjects: []string{"bench.raw.>"}, Storage: jetstream.FileStorage, Replicas: replicas})
	return &publishProbe{js: js, subj: "bench.raw." + route}
}

// p50 publishes 200 messages one after the other and returns the
// median publish in ms.
func (p *publishProbe) p50(b *testing.B) float64 {
	b.Helper()
	ctx := context.Background()
	msgs := rawMsgs(p.subj, 0, 200)
	lat := make([]time.Duration, len(msgs))
	for k, m := range msgs {
		start := time.Now()
		if _, err := p.js.PublishMsg(ctx, m); err != nil {
			b.Fatalf("raw publish: %v", err)
		}
		lat[k] = time.Since(start)
	}
	slices.Sort(lat)
	return float64(lat[len(lat)/2]) / float64(time.Millisecond)
}
