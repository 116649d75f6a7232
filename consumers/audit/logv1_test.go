package audit

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

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
