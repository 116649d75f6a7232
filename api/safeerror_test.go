package api

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
)

// A log line keeps what the code marked safe of an error — the operation,
// the sentinel, the event type and the state — and hides every value
// (ids, payloads, what an API answered): errors are made with
// cockroachdb/errors, whose format strings are safe and whose arguments
// are not, and the vocabulary (events.Type, fsm.State) is safe.
func TestSafeErrorKeepsTheSafeParts(t *testing.T) {
	p := &producer.Producer{}
	rec := events.New(events.ScopedIntentID("default", "social_post", "acct_secret_value", "r1"), 1, t0, "w", "", &events.IntentRecordedData{
		Tenant: "default", Route: "social_post", Account: "acct_secret_value", RequestID: "r1",
		IdempotencyKey: events.IdempotencyKey(events.ScopedIntentID("default", "social_post", "acct_secret_value", "r1")),
		Payload:        []byte(`{"body":"x"}`), PayloadSHA256: "sha", Canon: events.CanonV1, PlannedAt: t0,
		Policy: events.Policy{FirstWrite: events.PolicyAuto, Retry: events.PolicyNever}})
	h := &ledger.History{Route: "social_post", Events: []events.Event{rec}, LastSeq: 1}
	i := &fsm.Intent{State: fsm.None}
	if err := i.Apply(rec); err != nil {
		t.Fatal(err)
	}
	// Approve in state recorded is refused before anything is appended.
	err := p.Approve(context.Background(), h, i, "alice", "ok")
	if got, want := SafeError(err), "action not allowed in this state: Approved in state recorded"; got != want {
		t.Fatalf("safe text %q, want %q (error %v)", got, want, err)
	}
	// An invalid field keeps the sentinel and hides the reason's values.
	err = p.Approve(context.Background(), h, i, "", "ok")
	if got := SafeError(err); got != "invalid request: ‹×›" {
		t.Fatalf("safe text of an invalid field: %q (error %v)", got, err)
	}
}
