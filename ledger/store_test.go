package ledger_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	crdb "github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/testharness"
)

var t0 = time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)

func recordedEvent(t *testing.T, requestID string) events.Event {
	t.Helper()
	id := events.ScopedIntentID("default", "social_post", "acct_1", requestID)
	payload := []byte(`{"assets":[],"body":"hello"}`)
	sum, err := events.PayloadSHA256(payload)
	if err != nil {
		t.Fatal(err)
	}
	return events.New(id, 1, t0, "test", "", &events.IntentRecordedData{
		Tenant: "default", Route: "social_post", Account: "acct_1", RequestID: requestID,
		IdempotencyKey: events.IdempotencyKey(id), Payload: payload, PayloadSHA256: sum,
		Canon: events.CanonV1, PlannedAt: t0, Policy: adapter.DefaultPolicy(),
	})
}

func TestStreamDeniesDeleteAndPurge(t *testing.T) {
	n := testharness.StartNode(t)
	s := testharness.OpenStore(t, n.JS)
	ctx := context.Background()
	info, err := s.Stream().Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := info.Config
	if !c.DenyDelete || !c.DenyPurge || c.Storage != jetstream.FileStorage || c.Duplicates != 10*time.Minute {
		t.Fatalf("stream config: %+v", c)
	}
	if _, err := s.Append(ctx, "social_post", recordedEvent(t, "r1"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Stream().Purge(ctx); err == nil {
		t.Fatal("purge succeeded on a deny-purge stream")
	}
	if err := s.Stream().DeleteMsg(ctx, 1); err == nil {
		t.Fatal("delete succeeded on a deny-delete stream")
	}
}

func TestConcurrentAppendersExactlyOneWinsEachVersion(t *testing.T) {
	n := testharness.StartNode(t)
	s := testharness.OpenStore(t, n.JS)
	ctx := context.Background()
	rec := recordedEvent(t, "race")
	seq1, err := s.Append(ctx, "social_post", rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Two independent connections ("processes") race for versions 2..21.
	_, js2 := n.Connect()
	s2 := testharness.OpenStore(t, js2)
	stores := []*ledger.Store{s, s2}
	lastSeq := seq1
	for v := uint64(2); v <= 21; v++ {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		seqs := make([]uint64, 2)
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				actor := []string{"worker-a", "worker-b"}[w]
				e := events.New(rec.IntentID, v, t0.Add(time.Duration(v)*time.Second), actor, "",
					&events.ApprovalRequiredData{For: "retry", Reason: actor})
				seqs[w], errs[w] = stores[w].Append(ctx, "social_post", e, lastSeq)
			}(w)
		}
		wg.Wait()
		wins := 0
		for w := 0; w < 2; w++ {
			if errs[w] == nil {
				wins++
				lastSeq = seqs[w]
				continue
			}
			var ce *ledger.ConflictError
			if !errors.Is(errs[w], ledger.ErrConflict) || !errors.As(errs[w], &ce) || ce.Version != v {
				t.Fatalf("version %d: loser got %v, want ErrConflict", v, errs[w])
			}
		}
		if wins != 1 {
			t.Fatalf("version %d: %d winners (%v)", v, wins, errs)
		}
	}
	h, err := s.Load(ctx, "social_post", rec.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 21 || h.LastSeq != lastSeq {
		t.Fatalf("history has %d events, last seq %d (want 21, %d)", len(h.Events), h.LastSeq, lastSeq)
	}
	for i, e := range h.Events {
		if e.Version != uint64(i+1) {
			t.Fatalf("event %d has version %d", i, e.Version)
		}
	}
}

func TestAppendRetriedAfterLostAckIsSuccess(t *testing.T) {
	n := testharness.StartNode(t)
	s := testharness.OpenStore(t, n.JS)
	ctx := context.Background()
	rec := recordedEvent(t, "lost-ack")
	seq1, err := s.Append(ctx, "social_post", rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	e2 := events.New(rec.IntentID, 2, t0.Add(time.Second), "test", "", &events.ApprovalRequiredData{For: "first_write"})
	data, err := events.Encode(e2)
	if err != nil {
		t.Fatal(err)
	}
	// The first publish lands but its ack is never read: a core publish
	// with the same headers, flushed, and no ack awaited.
	m := &nats.Msg{Subject: events.Subject("social_post", rec.IntentID), Data: data, Header: nats.Header{}}
	m.Header.Set(jetstream.MsgIDHeader, e2.EventID)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "1")
	m.Header.Set(ledger.AppendIDHeader, "writer-a-append-7")
	if err := n.NC.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	if err := n.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		h, err := s.Load(ctx, "social_post", rec.IntentID)
		return err == nil && len(h.Events) == 2
	})
	// Another writer with the very same bytes did not make this append:
	// conflict (two Executes that read the same clock build identical
	// events; only one may think it won).
	if _, err := s.Append(ctx, "social_post", e2, seq1); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("identical append by another writer: %v, want ErrConflict", err)
	}
	// The writer retries the same append (same Msg-Id, same CAS, same
	// append id): on a single server the answer is 10071, which must
	// resolve to success.
	seq2, err := s.AppendAs(ctx, "social_post", e2, seq1, "writer-a-append-7")
	if err != nil {
		t.Fatalf("retried append reported %v, want success", err)
	}
	h, err := s.Load(ctx, "social_post", rec.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 2 || h.LastSeq != seq2 {
		t.Fatalf("history %d events, last seq %d, append said %d", len(h.Events), h.LastSeq, seq2)
	}
	// A competitor's different event at the same version (same Msg-Id!)
	// is a conflict, not a success.
	other := events.New(rec.IntentID, 2, t0.Add(2*time.Second), "someone-else", "", &events.ApprovalRequiredData{For: "first_write"})
	if _, err := s.Append(ctx, "social_post", other, seq1); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("competing append with the same Msg-Id: %v, want ErrConflict", err)
	}
	// And after more events, retrying version 2 again still resolves.
	e3 := events.New(rec.IntentID, 3, t0.Add(3*time.Second), "test", "", &events.ApprovedData{Operator: "op"})
	if _, err := s.Append(ctx, "social_post", e3, seq2); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AppendAs(ctx, "social_post", e2, seq1, "writer-a-append-7"); err != nil || got != seq2 {
		t.Fatalf("late retry of v2: seq %d err %v (want %d)", got, err, seq2)
	}
}

func TestLoadAfterServerRestartKeepsHistoryEndingAtWriteStarted(t *testing.T) {
	n := testharness.StartNode(t)
	s := testharness.OpenStore(t, n.JS)
	ctx := context.Background()
	rec := recordedEvent(t, "writer-dies")
	seq, err := s.Append(ctx, "social_post", rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	ws := events.New(rec.IntentID, 2, t0.Add(time.Second), "test", events.AttemptID(rec.IntentID, 1),
		&events.WriteStartedData{Attempt: 1, IdempotencyKey: events.IdempotencyKey(rec.IntentID), Deadline: t0.Add(time.Minute)})
	if _, err := s.Append(ctx, "social_post", ws, seq); err != nil {
		t.Fatal(err)
	}
	// The writer dies here: no outcome. The server restarts.
	n.Restart()
	s = testharness.OpenStore(t, n.JS)
	h, err := s.Load(ctx, "social_post", rec.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	i, err := h.Fold()
	if err != nil {
		t.Fatal(err)
	}
	if i.State != fsm.WriteStarted || len(h.Events) != 2 || i.LastAttempt().Outcome != "" {
		t.Fatalf("after restart: state %s, %d events", i.State, len(h.Events))
	}
	byID, err := s.LoadByID(ctx, rec.IntentID)
	if err != nil || byID.Route != "social_post" || byID.LastSeq != h.LastSeq || len(byID.Events) != 2 {
		t.Fatalf("LoadByID: %+v %v", byID, err)
	}
	if _, err := s.Load(ctx, "social_post", events.ScopedIntentID("default", "social_post", "acct_1", "nope")); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("missing intent: %v", err)
	}
	if _, err := s.LoadByID(ctx, events.ScopedIntentID("default", "social_post", "acct_1", "nope")); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("missing intent by id: %v", err)
	}
}

func TestLoadRefusesUndecodableEvent(t *testing.T) {
	n := testharness.StartNode(t)
	s := testharness.OpenStore(t, n.JS)
	ctx := context.Background()
	rec := recordedEvent(t, "corrupt")
	if _, err := s.Append(ctx, "social_post", rec, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := n.JS.Publish(ctx, events.Subject("social_post", rec.IntentID), []byte(`{"schema":"settle.event/v9"}`)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Load(ctx, "social_post", rec.IntentID)
	if !errors.Is(err, ledger.ErrCorruptHistory) || !errors.Is(err, events.ErrUnknownSchema) {
		t.Fatalf("want ErrCorruptHistory+ErrUnknownSchema, got %v", err)
	}
}

func TestStoreConfigValidate(t *testing.T) {
	c := ledger.DefaultStoreConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Replicas = 2
	if err := c.Validate(); err == nil {
		t.Fatal("replicas 2 accepted")
	}
	c = ledger.DefaultStoreConfig()
	c.DuplicateWindow = time.Second
	if err := c.Validate(); err == nil {
		t.Fatal("1s dedup window accepted")
	}
	// Batches in flight: two (pipelined), or as set.
	c = ledger.DefaultStoreConfig()
	if n := ledger.Flushers(c); n != 2 {
		t.Fatalf("default flushers on one replica: %d, want 2", n)
	}
	c.Replicas = 3
	if n := ledger.Flushers(c); n != 2 {
		t.Fatalf("default flushers on three replicas: %d, want 2", n)
	}
	c.BatchFlushers = 4
	if n := ledger.Flushers(c); n != 4 || c.Validate() != nil {
		t.Fatalf("flushers set to 4: %d, %v", n, c.Validate())
	}
	c.BatchFlushers = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "BatchFlushers") {
		t.Fatalf("BatchFlushers -1: %v, want an error naming the field", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A stream the store creates carries this build's log format, kept when
// the store opens it again; a stream without one (format 1) or with
// another is refused with a message naming both formats and what to do,
// and left as it was.
func TestStoreWritesAndChecksTheLogFormat(t *testing.T) {
	ctx := context.Background()
	n := testharness.StartNode(t)
	for range 2 {
		s := testharness.OpenStore(t, n.JS)
		if err := ledger.CheckFormat(s.Stream()); err != nil {
			t.Fatal(err)
		}
		if got := s.Stream().CachedInfo().Config.Metadata[events.FormatMetadata]; got != "2" {
			t.Fatalf("format %q, want 2", got)
		}
	}

	for _, c := range []struct {
		metadata map[string]string
		want     string
	}{
		{map[string]string{"owner": "ops"}, "stream SETTLE_INTENTS holds log format 1 (no settle.log_format in its metadata); this build reads log format 2 only"},
		{map[string]string{"owner": "ops", events.FormatMetadata: "3"}, "stream SETTLE_INTENTS holds log format 3; this build reads log format 2 only"},
	} {
		old := testharness.StartNode(t)
		if _, err := old.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "SETTLE_INTENTS", Subjects: []string{events.AllSubjects},
			Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute, DenyDelete: true, DenyPurge: true,
			Metadata: c.metadata}); err != nil {
			t.Fatal(err)
		}
		_, err := ledger.OpenStore(ctx, old.JS, ledger.DefaultStoreConfig())
		if !errors.Is(err, events.ErrLogFormat) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "docs/deploy.md#upgrades") {
			t.Fatalf("open on %v: %v, want ErrLogFormat saying %q", c.metadata, err, c.want)
		}
		st, err := old.JS.Stream(ctx, "SETTLE_INTENTS")
		if err != nil {
			t.Fatal(err)
		}
		if cfg := st.CachedInfo().Config; cfg.AllowAtomicPublish || cfg.Metadata[events.FormatMetadata] != c.metadata[events.FormatMetadata] || cfg.Metadata["owner"] != "ops" {
			t.Fatalf("the refused stream was changed: atomic %v, metadata %v", cfg.AllowAtomicPublish, cfg.Metadata)
		}
	}
}

// A request is asked again (opening the store, creating a stream) only
// while the cluster is not ready: no answer in time (a cluster electing
// the stream's leader), or no servers to place the stream on yet; never on
// a refusal waiting cannot change.
func TestClusterNotReadyOnlyForAClusterForming(t *testing.T) {
	wrap := func(err error) error {
		return crdb.WithHint(crdb.Wrapf(err, "open store: stream %s", "SETTLE_INTENTS"), "hint")
	}
	api := func(code jetstream.ErrorCode, desc string) error {
		return &jetstream.APIError{Code: 400, ErrorCode: code, Description: desc}
	}
	for err, want := range map[error]bool{
		wrap(context.DeadlineExceeded): true,
		wrap(nats.ErrTimeout):          true,
		wrap(nats.ErrNoResponders):     true,
		wrap(api(ledger.JSErrCodeClusterNoPeers, "no suitable peers for placement, peer offline")): true,
		wrap(api(ledger.JSErrCodeClusterNotAvail, "JetStream system temporarily unavailable")):     true,
		wrap(api(jetstream.JSErrCodeJetStreamNotEnabledForAccount, "jetstream not enabled")):       false,
		wrap(jetstream.ErrJetStreamNotEnabled):                                                     false,
		wrap(errors.New("insufficient resources")):                                                 false,
	} {
		if got := ledger.ClusterNotReady(err); got != want {
			t.Errorf("%v: retried %v, want %v", err, got, want)
		}
	}
}
