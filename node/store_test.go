package node

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/testharness"
)

// Validate reports every problem at once, each naming its field.
func TestConfigValidateNamesEveryProblem(t *testing.T) {
	ok := DefaultConfig()
	ok.Command, ok.Data, ok.Routes = "test", "dir", []adapter.Route{{Name: "r"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	bad := ok
	bad.Lease, bad.MinFreeMB, bad.Steps, bad.GroupCommit = 500*time.Millisecond, 0, 1025, "on"
	bad.Data, bad.Workers, bad.MaxClockOffset, bad.Routes = "", 0, -time.Second, nil
	var ce *ConfigError
	if err := bad.Validate(); !errors.As(err, &ce) {
		t.Fatalf("a bad config: %v", err)
	}
	got := map[string]string{}
	for _, p := range ce.Problems {
		got[p.Field] = p.Reason
	}
	want := map[string]string{
		"Data": "is required unless NATSURL is set", "Routes": "at least one route is required",
		"GroupCommit": `"on": want auto, measured or off`, "Workers": "0 only with NATSURL (another process must settle the intents)",
		"MinFreeMB": "0 must be ≥ 1", "MaxClockOffset": "-1s is negative", "Lease": "500ms must be at least 1s",
		"Steps": "1025 is outside 1..1024",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("problems:\n%v\nwant:\n%v", got, want)
	}
	withURL := ok
	withURL.Data, withURL.NATSURL, withURL.Workers = "", "nats://127.0.0.1:4222", 0
	if err := withURL.Validate(); err != nil {
		t.Fatalf("mcp with --nats-url and no workers: %v", err)
	}
}

// The cluster cannot place the stream yet: fewer servers than its
// replicas are there, or the meta leader has not heard from one of them
// (seen in CI right after a cluster started: "no suitable peers for
// placement, peer offline"). settle waits, saying so, instead of exiting;
// nothing is created meanwhile, and the wait ends with its context. (A
// fresh nats-server cluster elects no meta leader before all its servers
// are up, so the refusal is made here by asking 5 replicas of 3 servers.)
func TestOpenStoreWaitsForTheClusterToPlaceTheStream(t *testing.T) {
	c := testharness.StartCluster(t, embedded.SyncAlways)
	js := testharness.JetStreamOf(t)(c.Servers[0].Connect())
	var logs testharness.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	sc := ledger.DefaultStoreConfig()
	sc.Replicas = 5
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := openStore(ctx, js, sc, logger)
		done <- err
	}()
	waits := func() int { return strings.Count(logs.String(), "the stream is not ready yet") }
	for waits() < 2 {
		select {
		case err := <-done:
			t.Fatalf("openStore returned while the cluster could not place the stream: %v\n%s", err, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !strings.Contains(logs.String(), "no suitable peers for placement") {
		t.Fatalf("the wait does not say why:\n%s", logs.String())
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("openStore after its context ended: %v", err)
	}
	if _, err := js.Stream(context.Background(), sc.Stream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream after a refused placement: %v", err)
	}
}

// The hint of a refused placement names what to look at: servers online,
// not JetStream missing.
func TestOpenStoreHintNamesThePlacement(t *testing.T) {
	c := testharness.StartCluster(t, embedded.SyncAlways)
	js := testharness.JetStreamOf(t)(c.Servers[0].Connect())
	sc := ledger.DefaultStoreConfig()
	sc.Replicas = 5
	_, err := ledger.OpenStore(context.Background(), js, sc)
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != ledger.JSErrCodeClusterNoPeers {
		t.Fatalf("5 replicas on 3 servers: %v, want error code %d", err, ledger.JSErrCodeClusterNoPeers)
	}
	hint := errors.FlattenHints(err)
	if !strings.Contains(hint, "needs 5 JetStream servers online") || strings.Contains(hint, "must run JetStream") {
		t.Fatalf("hint %q", hint)
	}
}

// The answer to the first request to open the store is lost (a meta
// leader being elected never answers it). openStore is given a context
// with a long deadline, as the cluster benchmark gives node.Open two
// minutes: it asks again after its own attempt bound and opens the
// store, instead of waiting for that answer until the deadline and
// failing with "context deadline exceeded" (make test, bench-smoke).
func TestOpenStoreAsksAgainWhenAnAnswerIsLost(t *testing.T) {
	js, asked, lost := losingFirstAnswer(t, testharness.StartNode(t), "$JS.API.STREAM.")
	var logs testharness.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := openStore(ctx, js, ledger.DefaultStoreConfig(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("open the store with its first answer lost: %v (requests %d, lost %d)\n%s", err, asked.Load(), lost.Load(), logs.String())
	}
	if lost.Load() != 1 || asked.Load() < 2 || !strings.Contains(logs.String(), "the stream is not ready yet") {
		t.Fatalf("requests %d, lost %d; log:\n%s", asked.Load(), lost.Load(), logs.String())
	}
	if _, err := store.Stream().Info(ctx); err != nil {
		t.Fatalf("the stream: %v", err)
	}
}

// The same for the check of the log before the store opens (guardLog):
// its first answer lost, it asks again instead of waiting until the
// caller's deadline.
func TestGuardLogAsksAgainWhenAnAnswerIsLost(t *testing.T) {
	n := testharness.StartNode(t)
	if _, err := ledger.OpenStore(context.Background(), n.JS, ledger.DefaultStoreConfig()); err != nil {
		t.Fatal(err)
	}
	js, asked, lost := losingFirstAnswer(t, n, "$JS.API.STREAM.INFO.")
	dd, err := LockDataDir(t.TempDir(), "test", true)
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Unlock()
	var logs testharness.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := guardLog(ctx, logGuard{js: js, stream: "SETTLE_INTENTS", dd: dd, single: true, logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
		t.Fatalf("check the log with its first answer lost: %v (requests %d, lost %d)\n%s", err, asked.Load(), lost.Load(), logs.String())
	}
	if lost.Load() != 1 || asked.Load() < 2 {
		t.Fatalf("requests %d, lost %d", asked.Load(), lost.Load())
	}
}

// losingFirstAnswer is JetStream on n whose first API request under
// prefix is never answered (testharness.LossyAPI), with storeAttempt cut
// to half a second for the test; asked counts those requests, lost the
// ones dropped.
func losingFirstAnswer(t *testing.T, n *testharness.Node, prefix string) (js jetstream.JetStream, asked, lost *atomic.Int64) {
	t.Helper()
	old := storeAttempt
	storeAttempt = 500 * time.Millisecond
	t.Cleanup(func() { storeAttempt = old })
	nc, _ := n.Connect()
	asked = new(atomic.Int64)
	lost = testharness.LossyAPI(t, nc, func(subject string) bool {
		return strings.HasPrefix(subject, prefix) && asked.Add(1) == 1
	})
	js, err := jetstream.NewWithAPIPrefix(nc, testharness.LossyAPIPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return js, asked, lost
}
