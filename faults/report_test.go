package faults

import (
	"reflect"
	"testing"
)

// lossOnly accepts a failing audit only when it names a loss: loss kinds,
// each about an intent an events_lost line names (lines from a real run
// where the server cut its damaged block after the accepted loss).
func TestLossOnlyReadsTheAuditsLines(t *testing.T) {
	out := `settle audit --quiet --data /tmp/x: time=2026-12-01T05:26:54Z level=WARN msg="nats-server: Filestore corrupt state file"
        projection_mismatch - v0 seq 0: the projection holds 150 intents; the log folds 82 at checkpoint 701
        stream_behind - v0 seq 259: the stream ends at sequence 259 but the views' checkpoint is 701
        projection_mismatch in_2b3c v3 seq 0: fields differ: state: projection "confirmed", log "unknown"
        events_lost in_2b3c v4 seq 521: v4 ReconcileStarted, v5 CandidateFound, applied by the views, gone from the log
        settle: audit: 4 violation(s) in stream SETTLE_INTENTS
`
	lost := map[string]bool{}
	if other := lossOnly(out, lost); len(other) != 0 || !reflect.DeepEqual(lost, map[string]bool{"in_2b3c": true}) {
		t.Fatalf("a loss named: other %q, lost %v", other, lost)
	}
	for name, line := range map[string]string{
		"another kind":                      "        two_external_ids in_2b3c v5 seq 600: p_1 and p_2",
		"a mismatch of an intent not named": "        projection_mismatch in_zzzz v3 seq 0: fields differ",
	} {
		lost := map[string]bool{}
		if other := lossOnly(out+line+"\n", lost); len(other) != 1 {
			t.Errorf("%s: other %q", name, other)
		}
	}
}
