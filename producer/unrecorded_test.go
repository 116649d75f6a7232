package producer_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
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
	p, err := producer.New(e.store, pc, adapter.Route{Name: "social_post", Adapter: blockingWriter{Adapter: e.ad, store: e.store}, Policy: adapter.DefaultPolicy()})
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

// overtakingWriter makes the write, then, before the producer records
// its outcome, another worker records the attempt's outcome as unknown
// (its deadline passed while the call ran): the producer's outcome append
// loses the CAS.
type overtakingWriter struct {
	adapter.Adapter
	t     *testing.T
	store *ledger.Store
}

func (o overtakingWriter) Write(ctx context.Context, r adapter.WriteRequest) (adapter.WriteResult, error) {
	res, err := o.Adapter.Write(ctx, r)
	id := strings.TrimSuffix(r.AttemptID, ".a1")
	h, lerr := o.store.Load(ctx, "social_post", id)
	if lerr != nil {
		o.t.Errorf("load %s: %v", id, lerr)
		return res, err
	}
	intent, ferr := fsm.Fold(h.Events)
	if ferr != nil {
		o.t.Errorf("fold: %v", ferr)
		return res, err
	}
	at := intent.LastAttempt().Deadline.Add(time.Minute)
	e := events.New(id, uint64(len(h.Events))+1, at, "other-worker", r.AttemptID,
		&events.OutcomeUnknownData{Code: "attempt_deadline_passed", Message: "no outcome was recorded before the attempt's deadline"})
	if _, aerr := o.store.Append(ctx, "social_post", e, h.LastSeq); aerr != nil {
		o.t.Errorf("the other worker's append: %v", aerr)
	}
	return res, err
}

// Execute makes at most one external call and, when the call's outcome
// cannot be recorded because another worker moved the intent meanwhile,
// says so (ErrOutcomeNotRecorded) instead of reading the intent again
// and driving it as if it had not written: the lost outcome append is
// also a conflict, and Execute's rounds took it for one before any call.
func TestExecuteDoesNotDriveAgainAfterItsOutcomeLostTheCAS(t *testing.T) {
	e := newEnv(t)
	p, err := producer.New(e.store, producer.DefaultConfig(),
		adapter.Route{Name: "social_post", Adapter: overtakingWriter{Adapter: e.ad, t: t, store: e.store}, Policy: adapter.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Execute(context.Background(), req("task:overtaken", "hello"))
	if !errors.Is(err, producer.ErrOutcomeNotRecorded) || res == nil {
		t.Fatalf("execute: result %v, err %v; want the result and ErrOutcomeNotRecorded", res != nil, err)
	}
	if e.api.Effects() != 1 {
		t.Fatalf("%d effects, want 1", e.api.Effects())
	}
	h, err := e.store.Load(context.Background(), "social_post", res.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	got := types(h.Events)
	want := []events.Type{events.IntentStarted, events.OutcomeUnknown}
	if !slices.Equal(got, want) {
		t.Fatalf("log %v, want %v (the other worker's unknown outcome, nothing of the producer's after it)", got, want)
	}
}
