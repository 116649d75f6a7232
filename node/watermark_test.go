package node

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/consumers/audit"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/testharness"
)

func TestLostRanges(t *testing.T) {
	for _, c := range []struct {
		name                  string
		first, last, msgs, hw uint64
		deleted               []uint64
		want                  [][2]uint64
	}{
		{"whole", 1, 10, 10, 10, nil, nil},
		{"empty new", 0, 0, 0, 0, nil, nil},
		{"tail below the mark", 1, 10, 10, 14, nil, [][2]uint64{{11, 14}}},
		{"front gone", 4, 10, 7, 10, nil, [][2]uint64{{1, 3}}},
		{"holes", 1, 10, 7, 10, []uint64{7, 3, 4}, [][2]uint64{{3, 4}, {7, 7}}},
		{"holes unlisted", 1, 10, 7, 10, nil, [][2]uint64{{1, 10}}},
		{"everything gone", 11, 10, 0, 10, nil, [][2]uint64{{1, 10}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := lostRanges(c.first, c.last, c.msgs, c.deleted, c.hw); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	if got := audit.SubtractRanges([][2]uint64{{1, 10}, {20, 30}}, [][2]uint64{{3, 4}, {25, 40}}); !reflect.DeepEqual(got, [][2]uint64{{1, 2}, {5, 10}, {20, 24}}) {
		t.Fatalf("subtract: %v", got)
	}
	if got := merge([][2]uint64{{5, 6}, {1, 2}, {3, 4}, {10, 11}}); !reflect.DeepEqual(got, [][2]uint64{{1, 6}, {10, 11}}) {
		t.Fatalf("merge: %v", got)
	}
}

// A log shorter than its high-water mark is refused by name (the lost
// sequences); without the mark nothing tells, and a stream that vanished
// while the mark remembers it is refused too, instead of being created
// empty by the store.
func TestGuardLogRefusesAShortLog(t *testing.T) {
	node, dir, dd, logger := oneEventLog(t)
	ctx := context.Background()
	if _, err := guardLog(ctx, logGuard{js: node.JS, stream: "SETTLE_INTENTS", dd: dd, single: true, logger: logger}); err != nil {
		t.Fatalf("a whole log: %v", err)
	}
	hw := HighWater{Stream: "SETTLE_INTENTS", LastSeq: 5, Msgs: 5}
	if err := writeHighWater(filepath.Join(dir, HighWaterFile), hw); err != nil {
		t.Fatal(err)
	}
	_, err := guardLog(ctx, logGuard{js: node.JS, stream: "SETTLE_INTENTS", dd: dd, single: true, logger: logger})
	if !errors.Is(err, ledger.ErrLogDamaged) || !strings.Contains(err.Error(), "lost sequences 2..5") {
		t.Fatalf("a log behind its mark: %v", err)
	}
	if hint := errors.FlattenHints(err); !strings.Contains(hint, "--accept-log-loss") || !strings.Contains(hint, "settle audit") {
		t.Fatalf("hint: %q", hint)
	}
	// Accepted: recorded, and not refused again.
	if _, err := guardLog(ctx, logGuard{js: node.JS, stream: "SETTLE_INTENTS", dd: dd, accept: true, single: true, logger: logger}); err != nil {
		t.Fatalf("accepting: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, HighWaterFile))
	var got HighWater
	if err := json.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got.Accepted, [][2]uint64{{2, 5}}) || got.LastSeq != 1 {
		t.Fatalf("after accepting: %s (%v)", b, err)
	}
	if _, err := guardLog(ctx, logGuard{js: node.JS, stream: "SETTLE_INTENTS", dd: dd, single: true, logger: logger}); err != nil {
		t.Fatalf("after accepting: %v", err)
	}
	// The stream gone while the mark remembers it.
	if err := node.JS.DeleteStream(ctx, "SETTLE_INTENTS"); err != nil {
		t.Fatal(err)
	}
	_, err = guardLog(ctx, logGuard{js: node.JS, stream: "SETTLE_INTENTS", dd: dd, single: true, logger: logger})
	if !errors.Is(err, ledger.ErrLogDamaged) || !strings.Contains(err.Error(), "is gone") {
		t.Fatalf("a vanished stream: %v", err)
	}
	if _, err := node.JS.Stream(ctx, "SETTLE_INTENTS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the check created the stream: %v", err)
	}
}

// The log check waits for an answer: a server whose JetStream is not up
// yet (no responders), as a cluster still electing its leaders answers
// late, makes it retry rather than end serve. It gives up on a refusal at
// once.
func TestGuardLogWaitsForJetStream(t *testing.T) {
	srv, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	js := testharness.JetStreamOf(t)(nats.Connect(srv.ClientURL()))
	dd, err := LockDataDir(t.TempDir(), "test", true)
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Unlock()
	var logs testharness.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	done := make(chan error, 1)
	go func() {
		_, err := guardLog(context.Background(), logGuard{js: js, stream: "SETTLE_INTENTS", dd: dd, single: true, logger: logger})
		done <- err
	}()
	// Not before a first attempt went unanswered.
	for !strings.Contains(logs.String(), "not ready yet") {
		select {
		case err := <-done:
			t.Fatalf("guardLog returned before JetStream was up: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := srv.EnableJetStream(&natsserver.JetStreamConfig{StoreDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("guardLog once JetStream is up: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("guardLog still waiting 30 s after JetStream came up")
	}
	if !strings.Contains(logs.String(), `op="check the log"`) {
		t.Fatalf("log: %s", logs.String())
	}
	// A refusal is not waited out.
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := guardLog(canceled, logGuard{js: js, stream: "SETTLE_INTENTS", dd: dd, single: true, logger: logger}); !errors.Is(err, context.Canceled) {
		t.Fatalf("guardLog with its context done: %v", err)
	}
}

// While serving, a stream below its high-water mark blocks the appends
// only after shortChecks checks in a row find it so, with no message at or
// after the mark: a leader elected after a partition may answer a few
// seconds behind the mark (the faults suite's minority partition was
// blocked for good by two checks a second apart). A stream that grows
// raises the mark.
func TestHighWaterBlocksOnlyAShortStreamSeenShortRepeatedly(t *testing.T) {
	n := testharness.StartNode(t)
	ctx := t.Context()
	store, err := ledger.OpenStore(ctx, n.JS, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := n.JS.Publish(ctx, "settle.intents.social_post.hw", []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), HighWaterFile)
	if err := writeHighWater(path, HighWater{Stream: "SETTLE_INTENTS", LastSeq: 8}); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	k := newHighWaterKeeper(store.Stream(), path, store, logger)
	for i := 1; i < shortChecks; i++ {
		k.check(ctx)
		if err := store.Blocked(); err != nil {
			t.Fatalf("blocked after %d check(s): %v", i, err)
		}
	}
	k.check(ctx)
	if err := store.Blocked(); !errors.Is(err, ledger.ErrLogDamaged) {
		t.Fatalf("after %d checks of a stream at 5 below its mark 8: blocked %v", shortChecks, err)
	}

	// A stream at or above its mark: never blocked, and the mark follows it.
	n2 := testharness.StartNode(t)
	store2, err := ledger.OpenStore(ctx, n2.JS, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := n2.JS.Publish(ctx, "settle.intents.social_post.hw", []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	path2 := filepath.Join(t.TempDir(), HighWaterFile)
	k2 := newHighWaterKeeper(store2.Stream(), path2, store2, logger)
	for i := 0; i < shortChecks+1; i++ {
		k2.check(ctx)
	}
	hw, err := ReadHighWater(path2)
	if err != nil || hw.LastSeq != 3 || store2.Blocked() != nil {
		t.Fatalf("mark %+v (%v), blocked %v; want 3 and not blocked", hw, err, store2.Blocked())
	}
}

// Accepting a loss marks every intent the views know lost events on the
// log itself (ledger.MarkHeld), so that any process on the stream finds
// it held, and names the versions lost; an intent that lost nothing is
// not marked.
func TestAcceptingALossMarksTheHeldIntentsOnTheLog(t *testing.T) {
	node := testharness.StartNode(t)
	ctx := context.Background()
	dd, err := LockDataDir(t.TempDir(), "test", true)
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Unlock()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	l := testharness.NewHandLog(t, node.JS, nil, time.Now().Add(-time.Hour))
	kept := l.Record("kept").Started(1)
	lost := l.Record("lost").Started(1)
	p, err := projector.Open(ctx, node.JS, projector.Config{DBPath: dd.Views(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	// The stream comes back holding only the first intent's events.
	if err := node.JS.DeleteStream(ctx, "SETTLE_INTENTS"); err != nil {
		t.Fatal(err)
	}
	store := testharness.OpenStore(t, node.JS)
	for k, e := range kept.H.Events {
		if _, err := store.Append(ctx, "social_post", e, uint64(k)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := guardLog(ctx, logGuard{js: node.JS, stream: "SETTLE_INTENTS", dd: dd, accept: true, single: true, logger: logger}); err != nil {
		t.Fatalf("accepting: %v", err)
	}
	h, err := store.LoadByID(ctx, lost.ID())
	if err != nil || h.Hold == nil || len(h.Events) != 0 || !reflect.DeepEqual(h.Hold.Versions, []uint64{1, 2}) || !reflect.DeepEqual(h.Hold.Seqs, []uint64{3, 4}) {
		t.Fatalf("the lost intent on the log: %+v, %v", h, err)
	}
	if _, err := h.Fold(); !errors.Is(err, ledger.ErrHistoryLost) {
		t.Fatalf("fold: %v", err)
	}
	if h, err := store.LoadByID(ctx, kept.ID()); err != nil || h.Hold != nil || len(h.Events) != 2 {
		t.Fatalf("the intent that lost nothing: %+v, %v", h, err)
	}
}

// unreadable is a JetStream whose stream cannot be read through a
// consumer (its state still answers): the whole-log scan fails.
type unreadable struct{ jetstream.JetStream }

func (unreadable) OrderedConsumer(context.Context, string, jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	return nil, errors.New("no consumer today")
}

// Accepting a loss reads the whole log first; when that read fails, the
// start is refused and nothing is accepted: what would be accepted is not
// known.
func TestGuardLogRefusesToAcceptALossItCannotRead(t *testing.T) {
	node, dir, dd, logger := oneEventLog(t)
	ctx := context.Background()
	hw := HighWater{Stream: "SETTLE_INTENTS", LastSeq: 5, Msgs: 5}
	if err := writeHighWater(filepath.Join(dir, HighWaterFile), hw); err != nil {
		t.Fatal(err)
	}
	_, err := guardLog(ctx, logGuard{js: unreadable{node.JS}, stream: "SETTLE_INTENTS", dd: dd, accept: true, single: true, logger: logger})
	if err == nil || !strings.Contains(err.Error(), "accept log loss: read the whole log") || !strings.Contains(err.Error(), "no consumer today") {
		t.Fatalf("accepting a loss over an unreadable log: %v, want the failed read", err)
	}
	got, err := ReadHighWater(filepath.Join(dir, HighWaterFile))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, hw) {
		t.Fatalf("the mark changed: %+v, want %+v", got, hw)
	}
}

// oneEventLog is a node whose intents stream holds one message, and a
// data directory locked for the test.
func oneEventLog(t *testing.T) (*testharness.Node, string, *DataDir, *slog.Logger) {
	t.Helper()
	node := testharness.StartNode(t)
	ctx := context.Background()
	dir := t.TempDir()
	dd, err := LockDataDir(dir, "test", true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dd.Unlock)
	if _, err := ledger.OpenStore(ctx, node.JS, ledger.DefaultStoreConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := node.JS.Publish(ctx, "settle.intents.r.in_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	return node, dir, dd, slog.New(slog.NewTextHandler(io.Discard, nil))
}
