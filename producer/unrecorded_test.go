package producer_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// blockingWriter makes the write, then the log stops taking appends (its
// disk full, say): the outcome cannot be recorded.
type blockingWriter struct {
	adapter.Adapter
	store *ledger.Store
}

func (b blockingWriter) Write(ctx context.Context, r adapter.WriteRequest) (adapter.WriteResult, error) {
	res, err := b.Adapter.Write(ctx, r)
	b.store.Block("test", ledger.ErrDiskFull)
	return res, err
}

// A write whose outcome could not be recorded is always a WARN line
// naming the intent and its attempt (9 such outcomes during a SIGSTOP
// once left no line at all).
func TestAnUnrecordedOutcomeIsLoggedNamingTheIntent(t *testing.T) {
	e := newEnv(t)
	var logs testharness.SyncBuffer
	pc := producer.DefaultConfig()
	pc.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	p, err := producer.New(e.p.Store(), pc, adapter.Route{Name: "social_post", Adapter: blockingWriter{Adapter: e.ad, store: e.p.Store()}, Policy: adapter.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Execute(context.Background(), req("task:unrecorded", "hello"))
	if !errors.Is(err, producer.ErrOutcomeNotRecorded) || res == nil {
		t.Fatalf("execute: %v", err)
	}
	if e.api.Effects() != 1 {
		t.Fatalf("%d effects", e.api.Effects())
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "outcome could not be recorded") ||
		!strings.Contains(out, "intent="+res.IntentID) || !strings.Contains(out, "attempt="+res.IntentID+".a1") {
		t.Fatalf("no WARN naming the intent:\n%s", out)
	}
}
