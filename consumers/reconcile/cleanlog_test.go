package reconcile

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/consumers/audit"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/testharness"
)

func runAudit(t *testing.T, js jetstream.JetStream, cfg audit.AuditConfig) *audit.AuditReport {
	t.Helper()
	rep, err := audit.Audit(context.Background(), js, cfg)
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	return rep
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openProjection(t *testing.T, js jetstream.JetStream) *projector.Projector {
	t.Helper()
	p, err := projector.Open(context.Background(), js, projector.Config{DBPath: filepath.Join(t.TempDir(), "views.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAuditCleanLogPasses audits histories written by the producer and the
// reconciler against the fake social API (dropped response reconciled,
// proven not-found retried under a claim, duplicates handed off) and
// hand-built legal ones (trusted response, operator release and abandon),
// with the projection compared: no violation, even though every
// IntentRecorded and WriteStarted carries an sk_ idempotency key.
func TestAuditCleanLogPasses(t *testing.T) {
	w := newWorld(t, nil)
	r := w.reconciler("w1", nil)
	w.api.Next(fakeapi.CommitThenDrop())
	dropped := w.execute("task:dropped", "hello")
	w.settle(r, dropped.IntentID)
	w.api.Next(fakeapi.ResetBeforeCommit())
	retried := w.execute("task:retried", "again")
	if i := w.settle(r, retried.IntentID); i.State != fsm.Confirmed || len(i.Attempts) != 2 {
		t.Fatalf("retried intent: %s with %d attempts", i.State, len(i.Attempts))
	}
	plain := w.execute("task:plain", "plain")
	w.settle(r, plain.IntentID)
	w.api.Next(fakeapi.Duplicate().Dropped())
	dup := w.execute("task:dup", "twice")
	if i := w.settle(r, dup.IntentID); i.State != fsm.ManualAction {
		t.Fatalf("duplicate intent: %s", i.State)
	}

	l := testharness.NewHandLog(t, w.node.JS, w.store, w.clock.Now())
	trusted := l.Record("hand:trusted").Started(1)
	trusted.Next(trusted.Attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: trusted.Receipt("p_trusted", "response")})
	released := l.Record("hand:released").Started(1)
	released.Next(released.Attempt(1), &events.OutcomeUnknownData{Code: "timeout"}).
		Next("", &events.ManualActionRequiredData{Reason: events.ReasonNoQueryNoDedup}).
		Next("", &events.OperatorReleasedData{Operator: "alice", Reason: "checked the account: nothing posted"}).
		Started(2)
	released.Next(released.Attempt(2), &events.WriteRejectedData{Code: "http_400", StatusCode: 400}).
		Next("", &events.AbandonedData{By: "alice", Reason: "bad payload"})

	proj := openProjection(t, w.node.JS)
	var calls [][2]uint64
	rep := runAudit(t, w.node.JS, audit.AuditConfig{Now: l.Tick, Projection: proj, ProgressEvery: 5,
		Progress: func(done, total uint64) { calls = append(calls, [2]uint64{done, total}) }})
	if !rep.OK() {
		t.Fatalf("clean log has violations:\n%v", rep.Violations)
	}
	if rep.Intents != 6 || rep.States[fsm.Confirmed] != 4 || rep.States[fsm.ManualAction] != 1 || rep.States[fsm.Abandoned] != 1 {
		t.Fatalf("intents %d states %v", rep.Intents, rep.States)
	}
	if rep.Events != rep.LastSeq || rep.Events < 20 || rep.UnknownSchema+rep.UnknownType+rep.Malformed != 0 {
		t.Fatalf("events %d last seq %d unreadable %d/%d/%d", rep.Events, rep.LastSeq, rep.UnknownSchema, rep.UnknownType, rep.Malformed)
	}
	if rep.Projection == nil || rep.Projection.Compared != 6 || rep.Projection.Checkpoint != rep.LastSeq {
		t.Fatalf("projection %+v", rep.Projection)
	}
	if len(calls) < 2 {
		t.Fatalf("progress calls %v", calls)
	}
	for k, c := range calls {
		if c[1] != rep.Events || (k > 0 && c[0]-calls[k-1][0] < 5 && k != len(calls)-1) {
			t.Fatalf("progress calls %v", calls)
		}
	}
	if last := calls[len(calls)-1]; last[0] != rep.Events {
		t.Fatalf("last progress %v, events %d", last, rep.Events)
	}
}
