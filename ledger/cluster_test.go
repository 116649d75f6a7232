package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/testharness"
)

// On a replicated (R3) stream a retried append with the same Msg-Id is
// answered as a duplicate; so is a competitor's different event at the
// same version, because Msg-Ids are <intent>:<version>. Append must tell
// the two apart by content.
func TestClusterR3DuplicateAckIsResolvedByContent(t *testing.T) {
	c := testharness.StartCluster(t, embedded.SyncAlways)
	js := testharness.ConnectJS(t, c.URLs())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := ledger.DefaultStoreConfig()
	cfg.Replicas = 3
	s := testharness.OpenStoreWhenReady(ctx, t, js, cfg)
	info, err := s.Stream().Info(ctx)
	if err != nil || info.Config.Replicas != 3 {
		t.Fatalf("stream replicas: %v %v", info, err)
	}
	rec := recordedEvent(t, "r3")
	seq1, err := s.Append(ctx, "social_post", rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	e2 := events.New(rec.IntentID, 2, t0.Add(time.Second), "writer-a", "", &events.ApprovalRequiredData{For: "first_write"})
	seq2, err := s.AppendAs(ctx, "social_post", e2, seq1, "writer-a-append-1")
	if err != nil {
		t.Fatal(err)
	}
	// The writer retries after a lost ack: success, same sequence.
	again, err := s.AppendAs(ctx, "social_post", e2, seq1, "writer-a-append-1")
	if err != nil || again != seq2 {
		t.Fatalf("retried append: seq %d err %v (want %d)", again, err, seq2)
	}
	// The same bytes from another writer's Append: not its append.
	if _, err := s.Append(ctx, "social_post", e2, seq1); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("identical append by another writer on R3: %v, want ErrConflict", err)
	}
	// What the server itself answers a competitor's publish (the trap).
	data, _ := events.Encode(events.New(rec.IntentID, 2, t0.Add(3*time.Second), "writer-c", "", &events.ApprovalRequiredData{For: "first_write"}))
	m := &nats.Msg{Subject: events.Subject("social_post", rec.IntentID), Data: data, Header: nats.Header{}}
	m.Header.Set(jetstream.MsgIDHeader, e2.EventID)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "1")
	ack, perr := js.PublishMsg(ctx, m)
	switch {
	case perr == nil && ack.Duplicate:
		t.Logf("R3 answered a competitor's publish with a duplicate ack (seq %d): only content tells it apart", ack.Sequence)
	case perr == nil:
		t.Fatalf("the server stored a second version 2 at seq %d", ack.Sequence)
	default:
		t.Logf("R3 answered a competitor's publish with %v", perr)
	}
	// A competitor's different event at version 2: conflict, not success.
	other := events.New(rec.IntentID, 2, t0.Add(2*time.Second), "writer-b", "", &events.ApprovalRequiredData{For: "first_write"})
	if _, err := s.Append(ctx, "social_post", other, seq1); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("competing append on R3: %v, want ErrConflict", err)
	}
	h, err := s.Load(ctx, "social_post", rec.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 2 || h.Events[1].Actor != "writer-a" {
		t.Fatalf("history %d events, v2 by %s", len(h.Events), h.Events[1].Actor)
	}
	// The log survives the loss of a node: restart one and read again.
	if err := c.Restart(1); err != nil {
		t.Fatal(err)
	}
	// The stream may be electing a leader: retry the read for a while.
	deadline := time.Now().Add(60 * time.Second)
	for {
		lctx, lcancel := context.WithTimeout(context.Background(), 5*time.Second)
		h, err = s.Load(lctx, "social_post", rec.IntentID)
		lcancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a node restart: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(h.Events) != 2 {
		t.Fatalf("after a node restart: %d events", len(h.Events))
	}
}
