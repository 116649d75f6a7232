package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

var at = time.Date(2026, 7, 22, 0, 0, 0, 0, time.UTC)

func sampleRecorded() Event {
	id := ScopedIntentID("acme", "social_post", "acct_1", "task:1")
	payload := []byte(`{"assets":[],"body":"hi"}`)
	sum, _ := PayloadSHA256(payload)
	return New(id, 1, at, "test", "", &IntentRecordedData{
		Tenant: "acme", Route: "social_post", Account: "acct_1", RequestID: "task:1",
		IdempotencyKey: IdempotencyKey(id), Payload: payload, PayloadSHA256: sum, Canon: CanonV1, PlannedAt: at,
		Policy: Policy{FirstWrite: "auto", Retry: "auto", RetryBudget: 1, AttemptDeadline: Duration(time.Minute), SearchAfter: Duration(time.Minute)},
	})
}

// sampleStarted is sampleRecorded's intent started at once, in one
// IntentStarted, its request recorded.
func sampleStarted() Event {
	rec := sampleRecorded()
	return New(rec.IntentID, 1, at, "test", AttemptID(rec.IntentID, 1), &IntentStartedData{
		Recorded: *rec.Data.(*IntentRecordedData),
		Started: WriteStartedData{Attempt: 1, IdempotencyKey: IdempotencyKey(rec.IntentID), Deadline: at.Add(time.Minute),
			Request: &SentRequest{Method: "POST", Path: "/v1/posts", ContentType: "application/json", Body: `{"body":"hi"}`}},
	})
}

// An IntentStarted is refused without its attempt id, with a first write
// that is not attempt 1 or holds a claim, with another idempotency key,
// or with an invalid record (its field named under data.recorded).
func TestIntentStartedValidates(t *testing.T) {
	good := sampleStarted()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		mod   func(*Event, *IntentStartedData)
		field string
	}{
		"no attempt id": {func(e *Event, _ *IntentStartedData) { e.AttemptID = "" }, "attempt_id"},
		"attempt 2":     {func(_ *Event, d *IntentStartedData) { d.Started.Attempt = 2 }, "data.started.attempt"},
		"claim":         {func(_ *Event, d *IntentStartedData) { d.Started.ClaimOwner = "w" }, "data.started.claim_owner"},
		"other key":     {func(_ *Event, d *IntentStartedData) { d.Started.IdempotencyKey = "sk_other" }, "data.started.idempotency_key"},
		"no deadline":   {func(_ *Event, d *IntentStartedData) { d.Started.Deadline = time.Time{} }, "data.started.deadline"},
		"no tenant":     {func(_ *Event, d *IntentStartedData) { d.Recorded.Tenant = "" }, "data.recorded.tenant"},
		"bad canon":     {func(_ *Event, d *IntentStartedData) { d.Recorded.Canon = "x" }, "data.recorded.canon"},
	} {
		e := good
		d := *good.Data.(*IntentStartedData)
		e.Data = &d
		c.mod(&e, &d)
		err := e.Validate()
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != c.field {
			t.Errorf("%s: %v, want a refusal of %s", name, err, c.field)
		}
		if b, err := Encode(e); err == nil {
			t.Errorf("%s: encoded %s", name, b)
		}
	}
	// Split gives the two events a log held before IntentStarted.
	rec, ws, ok := Split(good)
	if !ok || rec.Type != IntentRecorded || rec.Version != 1 || rec.AttemptID != "" || rec.Validate() != nil ||
		ws.Type != WriteStarted || ws.Version != 2 || ws.AttemptID != good.AttemptID || ws.Validate() != nil {
		t.Fatalf("split: %+v %+v %v", rec, ws, ok)
	}
	if back, ok := Join(rec, ws); !ok || !reflect.DeepEqual(back, good) {
		t.Fatalf("join: %+v %v", back, ok)
	}
	if _, ok := Join(ws, rec); ok {
		t.Fatal("joined a WriteStarted and an IntentRecorded")
	}
	late := ws
	late.At = late.At.Add(time.Second)
	if _, ok := Join(rec, late); ok {
		t.Fatal("joined events of different times")
	}
	outcome := New(good.IntentID, 2, at, "test", good.AttemptID, &OutcomeUnknownData{Code: "timeout"})
	split := SplitStarted([]Event{good, outcome})
	if len(split) != 3 || split[0].Type != IntentRecorded || split[1].Type != WriteStarted || split[2].Type != OutcomeUnknown ||
		split[2].Version != 3 || split[2].EventID != MsgID(good.IntentID, 3) || outcome.Version != 2 {
		t.Fatalf("split history %+v", split)
	}
	if old := []Event{rec, ws}; &SplitStarted(old)[0] != &old[0] {
		t.Fatal("a history without IntentStarted is returned as it is")
	}
	if Recorded(good) != &good.Data.(*IntentStartedData).Recorded || Recorded(rec) != rec.Data || Recorded(ws) != nil {
		t.Fatal("Recorded")
	}
}

func TestEncodeDecodeRoundTripEveryType(t *testing.T) {
	rec := sampleRecorded()
	id := rec.IntentID
	bodies := map[Type]Data{
		IntentRecorded:       rec.Data,
		IntentStarted:        sampleStarted().Data,
		ApprovalRequired:     &ApprovalRequiredData{For: "retry", Reason: "policy"},
		Approved:             &ApprovedData{Operator: "op"},
		WriteStarted:         &WriteStartedData{Attempt: 1, IdempotencyKey: IdempotencyKey(id), Deadline: at},
		WriteSucceeded:       &WriteSucceededData{ExternalID: "p1", StatusCode: 201},
		WriteConfirmed:       &WriteConfirmedData{StatusCode: 201, Receipt: Receipt{ExternalID: "p1", Source: "response"}},
		WriteRejected:        &WriteRejectedData{Code: "dns_failure", Retryable: true},
		OutcomeUnknown:       &OutcomeUnknownData{Code: "timeout_after_send"},
		ReconcileStarted:     &ReconcileStartedData{Worker: "w", LeaseUntil: at, Strategy: "search", Check: 1},
		CheckDeferred:        &CheckDeferredData{Reason: "eventual_consistency", NextCheckAt: at},
		CandidateFound:       &CandidateFoundData{ExternalID: "p1", Source: "search"},
		ReadbackPassed:       &ReadbackPassedData{Receipt: Receipt{ExternalID: "p1", Source: "readback", Checks: []Check{{Name: "url", OK: true}}}},
		ReadbackFailed:       &ReadbackFailedData{ExternalID: "p1", Failed: []string{"url"}},
		TargetProcessing:     &TargetProcessingData{Poll: 1, NextCheckAt: at},
		SearchWindowElapsed:  &SearchWindowElapsedData{WindowTo: at},
		StatusNotFound:       &StatusNotFoundData{Queried: "request_id"},
		TargetFailed:         &TargetFailedData{Code: "declined", PartialEffects: []string{"hold"}},
		RetryClaimed:         &RetryClaimedData{Owner: "w", LeaseUntil: at, Attempt: 2},
		ClaimExpired:         &ClaimExpiredData{Owner: "w", LeaseUntil: at},
		ManualActionRequired: &ManualActionRequiredData{Reason: ReasonDuplicateExactMatches, Evidence: Evidence{Candidates: []CandidateRef{{ExternalID: "a", Match: true}}}},
		OperatorConfirmed:    &OperatorConfirmedData{Operator: "op", Reason: "seen", Receipt: Receipt{ExternalID: "p1", Source: "operator"}},
		OperatorReleased:     &OperatorReleasedData{Operator: "op", Reason: "absent"},
		Abandoned:            &AbandonedData{By: "op", Reason: "cancel"},
	}
	if len(bodies) != len(AllTypes()) {
		t.Fatalf("test covers %d of %d types", len(bodies), len(AllTypes()))
	}
	for typ, d := range bodies {
		attempt := ""
		if typ.StartsWrite() {
			attempt = AttemptID(id, 1)
		}
		e := New(id, 2, at, "test", attempt, d)
		b, err := Encode(e)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		// What settle writes takes the canonical path, and it agrees
		// with the careful one.
		canon, ok := decodeCanonical(b)
		careful, cerr := decodeCareful(b)
		if !ok || cerr != nil || !reflect.DeepEqual(canon, careful) || !reflect.DeepEqual(got, careful) {
			t.Fatalf("%s: canonical path ok %v, %+v; careful %+v, %v", typ, ok, canon, careful, cerr)
		}
		b2, _ := Encode(got)
		if string(b) != string(b2) || got.Type != typ || got.EventID != MsgID(id, 2) {
			t.Fatalf("%s: round trip differs:\n%s\n%s", typ, b, b2)
		}
	}
}

func TestDecodeErrorsAreTypedAndSpecific(t *testing.T) {
	good, err := Encode(sampleRecorded())
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	cases := []struct {
		name  string
		in    []byte
		kind  error
		field string
	}{
		{"not json", []byte("{"), ErrMalformed, ""},
		{"trailing", append(append([]byte{}, good...), []byte(" {}")...), ErrMalformed, ""},
		{"unknown schema", mutate(func(m map[string]any) { m["schema"] = "settle.event/v9" }), ErrUnknownSchema, "schema"},
		{"future schema with new envelope fields", mutate(func(m map[string]any) { m["schema"] = "settle.event/v2"; m["trace"] = "x" }), ErrUnknownSchema, "schema"},
		{"no schema", mutate(func(m map[string]any) { delete(m, "schema") }), ErrMissingField, "schema"},
		{"unknown type", mutate(func(m map[string]any) { m["type"] = "Teleported" }), ErrUnknownType, "type"},
		{"missing type", mutate(func(m map[string]any) { delete(m, "type") }), ErrMissingField, "type"},
		{"bad intent id", mutate(func(m map[string]any) { m["intent_id"] = "in_../../x" }), ErrBadID, "intent_id"},
		{"event id mismatch", mutate(func(m map[string]any) { m["event_id"] = "x:1" }), ErrBadID, "event_id"},
		{"version zero", mutate(func(m map[string]any) { m["version"] = 0 }), ErrMissingField, "version"},
		{"no actor", mutate(func(m map[string]any) { m["actor"] = "" }), ErrMissingField, "actor"},
		{"no time", mutate(func(m map[string]any) { delete(m, "at") }), ErrMissingField, "at"},
		{"no data", mutate(func(m map[string]any) { delete(m, "data") }), ErrMissingField, "data"},
		{"unknown field", mutate(func(m map[string]any) { m["extra"] = 1 }), ErrMalformed, ""},
		{"unknown data field", mutate(func(m map[string]any) { m["data"].(map[string]any)["x"] = 1 }), ErrInvalidField, "data"},
		{"missing data field", mutate(func(m map[string]any) { delete(m["data"].(map[string]any), "request_id") }), ErrMissingField, "data.request_id"},
		{"bad route token", mutate(func(m map[string]any) { m["data"].(map[string]any)["route"] = "Social Post" }), ErrInvalidField, "data.route"},
		{"bad policy", mutate(func(m map[string]any) {
			m["data"].(map[string]any)["policy"].(map[string]any)["retry"] = "sometimes"
		}), ErrInvalidField, "data.policy.retry"},
		{"bad duration", mutate(func(m map[string]any) {
			m["data"].(map[string]any)["policy"].(map[string]any)["attempt_deadline"] = "soon"
		}), ErrInvalidField, "data"},
		{"attempt of another intent", mutate(func(m map[string]any) {
			m["attempt_id"] = AttemptID(ScopedIntentID("a", "b", "acct_1", "c"), 1)
		}), ErrBadID, "attempt_id"},
		{"too big", make([]byte, MaxEventSize+1), ErrMalformed, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.in)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("want *DecodeError, got %v", err)
			}
			if !errors.Is(err, c.kind) {
				t.Fatalf("want %v, got %v", c.kind, err)
			}
			if de.Field != c.field {
				t.Fatalf("field %q, want %q (%v)", de.Field, c.field, err)
			}
		})
	}
}

func TestIDs(t *testing.T) {
	a := ScopedIntentID("acme", "social_post", "acct_1", "task:1")
	if a != ScopedIntentID("acme", "social_post", "acct_1", "task:1") || a == ScopedIntentID("acme", "social_post", "acct_1", "task:2") {
		t.Fatal("intent id not stable or not distinct")
	}
	// Boundaries cannot be shifted between parts.
	if ScopedIntentID("ab", "c", "acct_1", "d") == ScopedIntentID("a", "bc", "acct_1", "d") {
		t.Fatal("intent id ambiguous across parts")
	}
	if err := ValidateIntentID(a); err != nil {
		t.Fatal(err)
	}
	if IdempotencyKey(a) != IdempotencyKey(a) || strings.Contains(IdempotencyKey(a), a) {
		t.Fatal("idempotency key unstable or leaks the intent id")
	}
	id, n, err := ParseAttemptID(AttemptID(a, 3))
	if err != nil || id != a || n != 3 {
		t.Fatalf("ParseAttemptID: %s %d %v", id, n, err)
	}
	r, i, err := ParseSubject(Subject("social_post", a))
	if err != nil || r != "social_post" || i != a {
		t.Fatalf("ParseSubject: %s %s %v", r, i, err)
	}
	mi, v, err := ParseMsgID(MsgID(a, 7))
	if err != nil || mi != a || v != 7 {
		t.Fatalf("ParseMsgID: %s %d %v", mi, v, err)
	}
	for _, bad := range []string{"", "UPPER", "a.b", "a*", "a>", "a b", strings.Repeat("x", 65)} {
		if err := ValidateToken("route", bad); !errors.Is(err, ErrInvalidField) || !strings.HasPrefix(err.Error(), "route: ") {
			t.Errorf("token %q: %v", bad, err)
		}
	}
	for _, bad := range []string{"", " x", "x\n", "a\x00b", string([]byte{0xff}), strings.Repeat("y", 257)} {
		if err := ValidateFreeform("request_id", bad); !errors.Is(err, ErrInvalidField) {
			t.Errorf("freeform %q accepted", bad)
		}
	}
	if ToolKey("task", "step", "") == ToolKey("task", "step2", "") || ToolKey("t", "s", "") != ToolKey("t", "s", "") {
		t.Fatal("tool keys")
	}
}

func FuzzDecode(f *testing.F) {
	good, _ := Encode(sampleRecorded())
	f.Add(good)
	started, _ := Encode(sampleStarted())
	f.Add(started)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"schema":"settle.event/v1","type":"WriteStarted","data":{}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error is not a *DecodeError: %v", err)
			}
			return
		}
		// Whatever decodes re-encodes and decodes to the same bytes.
		b1, err := Encode(e)
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		e2, err := Decode(b1)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		b2, _ := Encode(e2)
		if string(b1) != string(b2) {
			t.Fatalf("unstable encoding")
		}
	})
}

func TestScopedIntentIDNamesTenantRouteAccountAndRequest(t *testing.T) {
	base := ScopedIntentID("acme", "social_post", "acct_1", "task:1")
	if err := ValidateIntentID(base); err != nil {
		t.Fatal(err)
	}
	for name, other := range map[string]string{
		"tenant":  ScopedIntentID("other", "social_post", "acct_1", "task:1"),
		"route":   ScopedIntentID("acme", "social_other", "acct_1", "task:1"),
		"account": ScopedIntentID("acme", "social_post", "acct_2", "task:1"),
		"request": ScopedIntentID("acme", "social_post", "acct_1", "task:2"),
		"shifted": ScopedIntentID("acme", "social_post", "acct_1t", "ask:1"),
	} {
		if other == base {
			t.Errorf("changing the %s keeps the id", name)
		}
	}
}

// An IntentStarted keeps the traceparent it was submitted under through
// encoding (settle's encoder and encoding/json agree), and refuses one
// that is not a W3C traceparent, naming the field.
func TestIntentStartedTraceparent(t *testing.T) {
	e := sampleStarted()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	e.Data.(*IntentStartedData).Traceparent = tp
	b, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	std, err := json.Marshal(e.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, std) {
		t.Fatalf("the encoded event does not hold the body as encoding/json writes it:\n%s\n%s", b, std)
	}
	back, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Data.(*IntentStartedData).Traceparent; got != tp {
		t.Fatalf("decoded traceparent %q, want %q", got, tp)
	}
	for _, bad := range []string{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "x"} {
		e.Data.(*IntentStartedData).Traceparent = bad
		if err := e.Validate(); err == nil || !strings.Contains(err.Error(), "data.traceparent") {
			t.Errorf("%q: %v, want a data.traceparent error", bad, err)
		}
	}
}
