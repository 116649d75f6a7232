package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"
	_ "modernc.org/sqlite"

	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/node"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// commandConfig is the node.Config `settle <command> args…` runs with:
// serve's and mcp's own flag parsing and setup, the same way their
// commands reach node.Open.
func commandConfig(t *testing.T, command string, logs io.Writer, args ...string) node.Config {
	t.Helper()
	m := &Main{Stdout: io.Discard, Stderr: logs}
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	var cfg node.Config
	var err error
	switch command {
	case "serve":
		var f serveFlags
		f.register(fs)
		if err := fs.Parse(append(args, "--dev", "--addr", "127.0.0.1:0")); err != nil {
			t.Fatal(err)
		}
		var su *serveSetup
		if su, err = m.serveSetup(&f); err == nil {
			cfg = su.cfg
		}
	case "mcp":
		var f mcpFlags
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		cfg, err = m.mcpConfig(&f)
	}
	if err != nil {
		t.Fatalf("settle %s %v: %v", command, args, err)
	}
	return cfg
}

// prepareUnsweptIntent leaves in data's store one intent whose response
// was lost (OutcomeUnknown) and whose route consumer has already taken and
// acked every message: only the start-up sweep can find it.
func prepareUnsweptIntent(t *testing.T, data string, cfg node.Config, api *fakeapi.SocialAPI) string {
	t.Helper()
	ctx := t.Context()
	srv, err := embedded.Start(embedded.Config{Dir: filepath.Join(data, node.JetStreamDir), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	js := testharness.JetStreamOf(t)(srv.Connect())
	store, err := ledger.OpenStore(ctx, js, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	prod, err := producer.New(store, producer.DefaultConfig(), cfg.Routes...)
	if err != nil {
		t.Fatal(err)
	}
	api.Next(fakeapi.CommitThenDrop())
	res, err := prod.Execute(ctx, producer.Request{Route: "social_post", Account: "acct_1", RequestID: "unswept",
		Payload: json.RawMessage(`{"body":"a post whose response was lost"}`)})
	if err != nil || res.State != fsm.Unknown {
		t.Fatalf("execute: %v, state %v", err, res)
	}
	cons, err := store.Stream().CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "settle-reconciler-social_post",
		FilterSubject: events.SubjectPrefix + ".social_post.*", DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: -1})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(100, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		acked++
	}
	if acked != len(res.History) {
		t.Fatalf("acked %d messages, the intent has %d events", acked, len(res.History))
	}
	return res.IntentID
}

// settle serve and settle mcp --data run the same supervised node: a log
// behind its high-water mark is refused at start; the start-up sweep
// settles an intent no consumer message wakes; the high-water mark follows
// the stream; a projector that fails (its database locked by another
// process past its busy timeout) is restarted and /readyz says so
// meanwhile; a clock off the log's blocks every append until it is back.
// Before this node, settle mcp did none of it.
func TestServeAndMCPRunTheSameSupervisedNode(t *testing.T) {
	testharness.SkipShort(t, "embedded nats-servers")
	for _, command := range []string{"serve", "mcp"} {
		t.Run(command, func(t *testing.T) {
			api := fakeapi.NewSocialAPIServer(fakeapi.SocialConfig{})
			t.Cleanup(api.Close)
			t.Setenv("SOCIAL_BASE_URL", api.URL())
			t.Setenv("SOCIAL_TOKEN", api.Token())
			data := t.TempDir()
			var logs testharness.SyncBuffer
			cfg := commandConfig(t, command, &logs, "--data", data, "--routes", "../../examples/routes/social.yaml", "--projector-stall", "1m")
			var offset atomic.Int64
			cfg.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
			id := prepareUnsweptIntent(t, data, cfg, api)
			checkSupervision(t, cfg, data, id, api, &offset, &logs)
		})
	}
}

func checkSupervision(t *testing.T, cfg node.Config, data, id string, api *fakeapi.SocialAPI, offset *atomic.Int64, logs *testharness.SyncBuffer) {
	ctx := t.Context()
	// A log below its high-water mark is refused before anything runs.
	hwPath := filepath.Join(data, node.HighWaterFile)
	if err := os.WriteFile(hwPath, []byte(`{"stream":"SETTLE_INTENTS","last_seq":99,"msgs":99}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Open(ctx, cfg); !errors.Is(err, ledger.ErrLogDamaged) || !strings.Contains(err.Error(), "lost sequences") {
		t.Fatalf("a log below its high-water mark: %v", err)
	}
	if err := os.Remove(hwPath); err != nil {
		t.Fatal(err)
	}

	n, err := node.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	rctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(rctx) }()
	defer func() { stop(); <-ran }()
	if err := n.Started(ctx); err != nil {
		t.Fatal(err)
	}

	// The sweep settles the intent whose messages were all acked.
	waitFor(t, time.Minute, "the swept intent confirmed", func() bool {
		h, err := n.Store().Load(ctx, "social_post", id)
		if err != nil {
			return false
		}
		i, err := h.Fold()
		return err == nil && i.State == fsm.Confirmed
	})
	if api.Effects() != 1 {
		t.Fatalf("%d effects, want 1", api.Effects())
	}
	// The high-water mark follows the stream.
	waitFor(t, 10*time.Second, "the high-water mark at the stream's end", func() bool {
		info, err := n.Store().Stream().Info(ctx)
		hw, herr := node.ReadHighWater(hwPath)
		return err == nil && herr == nil && hw.LastSeq == info.State.LastSeq && hw.LastSeq > 0
	})
	waitFor(t, 30*time.Second, "ready", func() bool { return n.Ready(ctx) == nil })

	checkProjectorRestart(t, n, data, logs)
	checkClockGuard(t, n, offset)
}

// checkProjectorRestart locks the views' database from outside past the
// projector's busy timeout while events arrive: the projector fails, is
// restarted, and /readyz reports it until it runs again.
func checkProjectorRestart(t *testing.T, n *node.Node, data string, logs *testharness.SyncBuffer) {
	ctx := t.Context()
	db, err := sql.Open("sqlite", filepath.Join(data, node.ViewsFile)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Producer().Execute(ctx, producer.Request{Route: "social_post", Account: "acct_1", RequestID: "while-locked",
		Payload: json.RawMessage(`{"body":"written while the views are locked"}`)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "/readyz naming the projector", func() bool {
		err := n.Ready(ctx)
		return err != nil && strings.HasPrefix(err.Error(), "projector:")
	})
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "ready again", func() bool { return n.Ready(ctx) == nil })
	if !strings.Contains(logs.String(), "projector failed; restarting it") || !strings.Contains(logs.String(), "projector running again") {
		t.Fatalf("the restart is not in the log:\n%s", logs.String())
	}
}

// checkClockGuard moves the node's clock a minute off the log's: every
// append is refused and /readyz names the clock, until the clock is back.
func checkClockGuard(t *testing.T, n *node.Node, offset *atomic.Int64) {
	ctx := t.Context()
	offset.Store(int64(time.Minute))
	waitFor(t, 30*time.Second, "/readyz naming the clock", func() bool {
		err := n.Ready(ctx)
		return err != nil && strings.HasPrefix(err.Error(), "clock:")
	})
	_, err := n.Producer().Execute(ctx, producer.Request{Route: "social_post", Account: "acct_1", RequestID: "clock-off",
		Payload: json.RawMessage(`{"body":"from a clock a minute ahead"}`)})
	if !errors.Is(err, ledger.ErrClockOffset) {
		t.Fatalf("a submit with the clock off: %v", err)
	}
	offset.Store(0)
	waitFor(t, 30*time.Second, "ready with the clock back", func() bool { return n.Ready(ctx) == nil })
}

func waitFor(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
