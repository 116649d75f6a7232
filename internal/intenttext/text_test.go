package intenttext_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/settle-dev/settle/internal/intenttext"
)

// An intent waiting on a failing read: show names the next check, the
// deferral with its error and the wait the API asked for, each attempt's
// outcome and code, and the last error, all of which --json has.
func TestShowNamesWhyTheIntentWaits(t *testing.T) {
	raw := `{"intent_id":"in_1","state":"unknown","route":"r","account":"a","next_check_at":"2026-01-02T03:04:05Z",
	"attempt_history":[{"n":1,"attempt_id":"at_1","outcome":"OutcomeUnknown","code":"timeout_after_send"}],
	"history":[
	 {"version":3,"type":"OutcomeUnknown","at":"t","actor":"w","data":{"code":"timeout_after_send","message":"no answer"}},
	 {"version":5,"type":"CheckDeferred","at":"t","actor":"w","data":{"reason":"read_failed","error":"http_503","retry_after":"30s","next_check_at":"x"}}]}`
	var out bytes.Buffer
	if err := intenttext.Show(&out, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"codes:           1 OutcomeUnknown timeout_after_send\n",
		"next check:      2026-01-02T03:04:05Z\n",
		"deferred:        read_failed, error http_503, the API asked to wait 30s\n",
		"last error:      http_503\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("show lacks %q:\n%s", want, out.String())
		}
	}
}

// The list's REASON: the manual reason, a failure's code, or a rejected
// intent's rejection code (read from its detail); "-" otherwise.
func TestListReasonColumn(t *testing.T) {
	raw := `{"items":[{"intent_id":"in_m","state":"manual_action","manual_reason":"read_failing"},
	{"intent_id":"in_f","state":"failed","failure":"card_declined"},
	{"intent_id":"in_r","state":"rejected"},{"intent_id":"in_c","state":"confirmed"},
	{"intent_id":"in_h","state":"reconciling","held":true}]}`
	detail := `{"attempt_history":[{"n":1,"outcome":"WriteRejected","code":"invalid_body"}]}`
	var out bytes.Buffer
	err := intenttext.List(&out, []byte(raw), func(id string) string {
		if id != "in_r" {
			t.Errorf("detail fetched for %s", id)
		}
		return intenttext.RejectionCode([]byte(detail))
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"in_m": "read_failing", "in_f": "card_declined", "in_r": "invalid_body", "in_c": "-", "in_h": "log_events_lost(held)"}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		f := strings.Fields(l)
		if want[f[0]] != f[len(f)-1] {
			t.Errorf("%s: REASON %q, want %q", f[0], f[len(f)-1], want[f[0]])
		}
	}
}

// A hand-off's candidates are shown as they were seen: id, creation time
// against the first attempt, author, parent as read and from which
// field, and why each check failed.
func TestShowPrintsWhatTheHandoffSaw(t *testing.T) {
	raw := `{"intent_id":"in_1","state":"manual_action","manual_reason":"near_match","evidence":{"candidates":[
	 {"external_id":"1001","match":false,"created_at":"2026-01-02T03:04:05Z","from_first_attempt":"+1.2s","author":"4242","parent":"","parent_from":"$.issue_url",
	  "mismatch":["parent"],"why":["parent read as empty from $.issue_url, the intent's is \"7\""]}]}}`
	var out bytes.Buffer
	if err := intenttext.Show(&out, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"candidates:\n",
		`  1001  not a match  created 2026-01-02T03:04:05Z (+1.2s from the first attempt)  author "4242"  parent "" from $.issue_url` + "\n",
		`       parent read as empty from $.issue_url, the intent's is "7"` + "\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("show lacks %q:\n%s", want, out.String())
		}
	}
}
