package audit

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

// TestAuditReplaysLogV1 audits a log written before a new intent's record
// and first write start became one message (IntentStarted): every write
// there is IntentRecorded, WriteStarted and an outcome. It must audit as
// it did when it was written (testharness/testdata/logv1/audit.json): no
// violation, the same intents, events and states, the projection equal to
// the fold.
func TestAuditReplaysLogV1(t *testing.T) {
	n := testharness.StartNode(t)
	testharness.RepublishLogV1(t, n.JS)
	var want struct {
		Intents int               `json:"intents"`
		Events  uint64            `json:"events"`
		States  map[fsm.State]int `json:"states"`
	}
	b, err := os.ReadFile(filepath.Join(testharness.LogV1Dir(), "audit.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for _, m := range testharness.ReadDump(t, filepath.Join(testharness.LogV1Dir(), "log.jsonl")) {
		e, err := events.Decode([]byte(m.Data))
		if err != nil {
			t.Fatalf("seq %d: %v", m.Seq, err)
		}
		if e.Type == "IntentStarted" {
			t.Fatalf("seq %d: the v1 log holds an IntentStarted", m.Seq)
		}
		last = e.At
	}
	proj, _ := openProjection(t, n.JS)
	rep := runAudit(t, n.JS, AuditConfig{Now: func() time.Time { return last }, Projection: proj})
	if !rep.OK() {
		t.Fatalf("the v1 log has violations: %v", rep.Violations)
	}
	if rep.Intents != want.Intents || rep.Events != want.Events || !maps.Equal(rep.States, want.States) {
		t.Fatalf("intents %d events %d states %v, want %d %d %v", rep.Intents, rep.Events, rep.States, want.Intents, want.Events, want.States)
	}
	if rep.UnknownSchema+rep.UnknownType+rep.Malformed != 0 || rep.Projection == nil || rep.Projection.Compared != want.Intents {
		t.Fatalf("unreadable %d/%d/%d projection %+v", rep.UnknownSchema, rep.UnknownType, rep.Malformed, rep.Projection)
	}
}

// TestAuditReadsIntentStarted audits intents recorded and started in one
// message (IntentStarted): a clean one finds nothing (its outcome follows
// its start); a second attempt without a claim, an IntentStarted on
// another route's subject and one after a hold marker are found, as they
// are for IntentRecorded and WriteStarted.
func TestAuditReadsIntentStarted(t *testing.T) {
	n := testharness.StartNode(t)
	l := testharness.NewHandLog(t, n.JS, nil, t0)
	clean := l.RecordStarted("s-clean")
	clean.Next(clean.Attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: clean.Receipt("p_clean", "response")})
	noClaim := l.RecordStarted("s-no-claim")
	noClaim.Next(noClaim.Attempt(1), &events.WriteRejectedData{Code: "http_429", StatusCode: 429, Retryable: true}).
		Plant(noClaim.Attempt(2), &events.WriteStartedData{Attempt: 2, IdempotencyKey: noClaim.I.Recorded.IdempotencyKey, Deadline: l.At.Add(time.Minute)})
	// An IntentStarted recording route social_post, on another route's subject.
	rec := testharness.RecordedEvent("social_post", "s-stray", adapter.DefaultPolicy(), l.Tick())
	stray, ok := events.Join(rec, events.New(rec.IntentID, 2, rec.At, rec.Actor, events.AttemptID(rec.IntentID, 1),
		&events.WriteStartedData{Attempt: 1, IdempotencyKey: events.IdempotencyKey(rec.IntentID), Deadline: rec.At.Add(time.Minute)}))
	if !ok {
		t.Fatal("join")
	}
	raw, err := events.Encode(stray)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.JS.Publish(context.Background(), events.Subject("other_route", stray.IntentID), raw); err != nil {
		t.Fatal(err)
	}
	rep := runAudit(t, n.JS, AuditConfig{Now: func() time.Time { return l.At }})
	got := auditByIntent(rep)
	want := map[string][]string{
		noClaim.ID():   {ViolationIllegalTransition, ViolationRetryWithoutClaim},
		stray.IntentID: {ViolationSubjectMismatch},
	}
	for id, kinds := range want {
		if g := auditKinds(got[id]); !slices.Equal(g, kinds) {
			t.Errorf("intent %s: violations %v, want %v\n%v", id, g, kinds, got[id])
		}
	}
	for id, vs := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("unexpected violations of %s: %v", id, vs)
		}
	}
	if rep.States[fsm.Confirmed] != 1 {
		t.Errorf("states %v", rep.States)
	}
}
