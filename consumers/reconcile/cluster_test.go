package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// On a real 3-node cluster (R3 stream), two workers connected to different
// nodes settle dropped responses while one node restarts under them.
func TestClusterReconcilesThroughANodeRestart(t *testing.T) {
	c := testharness.StartCluster(t, embedded.SyncAlways)
	connect := func(url string) jetstream.JetStream {
		nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg := ledger.DefaultStoreConfig()
	cfg.Replicas = 3
	open := func(js jetstream.JetStream) *ledger.Store {
		for {
			s, err := ledger.OpenStore(ctx, js, cfg)
			if err == nil {
				return s
			}
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	all := c.URLs()
	store := open(connect(all))
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(clock.Now))
	ad := testharness.ExampleRoute(t, "social.yaml", api).Adapter
	pol := adapter.DefaultPolicy()
	pol.ClockSkew = events.Duration(time.Second)
	w := &world{t: t, clock: clock, api: api, route: adapter.Route{Name: "social_post", Adapter: ad, Policy: pol}, store: store}
	pc := producer.DefaultConfig()
	pc.Now, pc.Actor = clock.Now, "writer"
	var err error
	if w.prod, err = producer.New(store, pc, w.route); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for k := 0; k < 20; k++ {
		api.Next(fakeapi.CommitThenDrop())
		ids = append(ids, w.execute(fmt.Sprintf("r3:%d", k), fmt.Sprintf("cluster post %d", k)).IntentID)
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var logs testharness.SyncBuffer
	for k, srv := range c.Servers[:2] {
		r := w.reconciler(fmt.Sprintf("node%d-worker", k), open(connect(srv.ClientURL())))
		r.cfg.MaxWait = 100 * time.Millisecond
		r.cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("worker", k)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// As node supervises it: a Run that returns while the
			// cluster restarts is run again, its error logged.
			for wctx.Err() == nil {
				if err := r.Run(wctx); err != nil && wctx.Err() == nil {
					t.Logf("node%d-worker: run: %v; running it again", k, err)
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}
	// Restart the third node while the workers run.
	if err := c.Restart(2); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for !w.allIn(ids, fsm.Confirmed)() {
		if time.Now().After(deadline) {
			stuck := workerStacks()
			stop()
			wg.Wait()
			var states []string
			for _, id := range ids {
				if h, err := store.Load(context.Background(), "social_post", id); err == nil && len(h.Events) > 0 {
					states = append(states, fmt.Sprintf("%s v%d %s", id, len(h.Events), h.Events[len(h.Events)-1].Type))
				} else {
					states = append(states, fmt.Sprintf("%s: %v", id, err))
				}
			}
			t.Fatalf("not all confirmed in 3 minutes:\n%s\nthe workers' log (its end):\n%s\nthe workers' goroutines:\n%s", strings.Join(states, "\n"), tail(logs.String(), 20000), stuck)
		}
		time.Sleep(50 * time.Millisecond)
		clock.Advance(10 * time.Second)
	}
	stop()
	wg.Wait()
	if api.Effects() != 20 || api.Writes() != 20 {
		t.Fatalf("effects %d writes %d, want 20", api.Effects(), api.Writes())
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// workerStacks is the stacks of the goroutines in a Reconciler's code.
func workerStacks() string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "reconcile.(*Reconciler)") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
