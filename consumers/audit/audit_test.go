package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/testharness"
)

var t0 = time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)

func auditKinds(vs []Violation) []string {
	out := make([]string, len(vs))
	for k, v := range vs {
		out[k] = v.Kind
	}
	slices.Sort(out)
	return out
}

func auditByIntent(r *AuditReport) map[string][]Violation {
	m := map[string][]Violation{}
	for _, v := range r.Violations {
		m[v.IntentID] = append(m[v.IntentID], v)
	}
	return m
}

func runAudit(t *testing.T, js jetstream.JetStream, cfg AuditConfig) *AuditReport {
	t.Helper()
	rep, err := Audit(context.Background(), js, cfg)
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	return rep
}

func openProjection(t *testing.T, js jetstream.JetStream) (*projector.Projector, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "views.db")
	p, err := projector.Open(context.Background(), js, projector.Config{DBPath: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p, path
}

// TestAuditFindsPlantedViolations plants one violation per intent next to
// a clean intent and checks that each is found, named with its intent,
// and that the clean intent is not named.
func TestAuditFindsPlantedViolations(t *testing.T) {
	n := testharness.StartNode(t)
	l := testharness.NewHandLog(t, n.JS, nil, t0)

	clean := l.Record("clean").Started(1)
	clean.Next(clean.Attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: clean.Receipt("p_clean", "response")})

	// Every event is legal for the fsm, yet two external ids: the API said
	// it created p_1 and an operator later confirmed p_2.
	twoIDs := l.Record("two-ids").Started(1)
	twoIDs.Next(twoIDs.Attempt(1), &events.WriteSucceededData{ExternalID: "p_1", StatusCode: 201}).
		Next("", &events.ReadbackFailedData{ExternalID: "p_1", Failed: []string{"visibility"}}).
		Next("", &events.OperatorConfirmedData{Operator: "bob", Reason: "found it", Receipt: twoIDs.Receipt("p_2", "operator")})

	noStart := l.Record("no-start")
	noStart.Plant(noStart.Attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: noStart.Receipt("p_x", "response")})

	illegal := l.Record("illegal").Started(1)
	illegal.Plant(illegal.Attempt(1), &events.ReadbackPassedData{Receipt: illegal.Receipt("p_y", "readback")}).
		Plant(illegal.Attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: illegal.Receipt("p_y", "response")})

	const token = "abcdefghijklmnopqrstuvwxyz0123"
	secret := l.Record("secret").Started(1)
	secret.Next(secret.Attempt(1), &events.WriteRejectedData{Code: "http_401", StatusCode: 401,
		Message: "upstream said: Authorization: Bearer " + token})

	noClaim := l.Record("no-claim").Started(1)
	noClaim.Next(noClaim.Attempt(1), &events.WriteRejectedData{Code: "http_429", StatusCode: 429, Retryable: true}).
		Plant(noClaim.Attempt(2), &events.WriteStartedData{Attempt: 2, IdempotencyKey: noClaim.I.Recorded.IdempotencyKey, Deadline: l.At.Add(time.Minute)})

	stuckStarted := l.Record("stuck-started").Started(1)
	stuckUnknown := l.Record("stuck-unknown").Started(1)
	stuckUnknown.Next(stuckUnknown.Attempt(1), &events.OutcomeUnknownData{Code: "timeout"})

	// Unreadable events: a future schema (its intent has nothing else), an
	// unknown type in the middle of a history (the intent's later events
	// are not judged), and a v1 event with a field missing.
	futureID := events.ScopedIntentID("default", l.Route, "acct_1", "future")
	l.PublishRaw(futureID, `{"schema":"settle.event/v2","event_id":"`+futureID+`:1","intent_id":"`+futureID+`","version":1,"type":"IntentRecorded","shape":"new"}`)
	midway := l.Record("midway").Started(1)
	midway.H.LastSeq = l.PublishRaw(midway.ID(), `{"schema":"settle.event/v1","event_id":"`+midway.ID()+`:3","intent_id":"`+midway.ID()+
		`","version":3,"type":"WriteTeleported","at":"2026-07-22T09:00:30Z","actor":"future-writer","data":{}}`)
	midway.H.Events = append(midway.H.Events, events.Event{})
	midway.Plant(midway.Attempt(1), &events.WriteRejectedData{Code: "http_400", StatusCode: 400})
	brokenID := events.ScopedIntentID("default", l.Route, "acct_1", "broken")
	l.PublishRaw(brokenID, `{"schema":"settle.event/v1","event_id":"`+brokenID+`:1","intent_id":"`+brokenID+
		`","version":1,"type":"Abandoned","at":"2026-07-22T09:00:31Z","actor":"x","data":{"reason":"no by"}}`)

	rep := runAudit(t, n.JS, AuditConfig{Now: func() time.Time { return t0.Add(2 * time.Hour) }, Grace: time.Minute})
	if rep.OK() {
		t.Fatal("planted violations not found")
	}
	got := auditByIntent(rep)
	want := map[string][]string{
		twoIDs.ID():       {ViolationTwoExternalIDs},
		noStart.ID():      {ViolationIllegalTransition, ViolationOutcomeWithoutWriteStarted},
		illegal.ID():      {ViolationIllegalTransition, ViolationStuck},
		secret.ID():       {ViolationSecret},
		noClaim.ID():      {ViolationIllegalTransition, ViolationRetryWithoutClaim},
		stuckStarted.ID(): {ViolationStuck},
		stuckUnknown.ID(): {ViolationStuck},
		brokenID:          {ViolationMalformedEvent},
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
	for _, v := range got[illegal.ID()] {
		if v.Kind == ViolationIllegalTransition {
			if v.Version != 3 || !strings.Contains(v.Detail, "ReadbackPassed") || !strings.Contains(v.Detail, "write_started") ||
				!strings.Contains(v.Detail, "1 later event") {
				t.Errorf("illegal transition not named: %+v", v)
			}
		}
		if v.Kind == ViolationStuck && !strings.Contains(v.Detail, "write_started") {
			t.Errorf("stuck detail: %+v", v)
		}
	}
	if v := got[twoIDs.ID()][0]; v.Version != 5 || !strings.Contains(v.Detail, `"p_2"`) || !strings.Contains(v.Detail, `"p_1"`) {
		t.Errorf("two ids: %+v", v)
	}
	if v := got[secret.ID()][0]; v.Version != 3 || strings.Contains(v.Detail, token) || !strings.Contains(v.Detail, "WriteRejected") {
		t.Errorf("secret: %+v", v)
	}
	if v := got[stuckUnknown.ID()][0]; !strings.Contains(v.Detail, "unknown") {
		t.Errorf("stuck unknown: %+v", v)
	}
	if rep.UnknownSchema != 1 || rep.UnknownType != 1 || rep.Malformed != 1 || rep.Incomplete != 3 || len(rep.Unreadable) != 3 {
		t.Fatalf("unreadable: schema %d type %d malformed %d incomplete %d %+v", rep.UnknownSchema, rep.UnknownType, rep.Malformed, rep.Incomplete, rep.Unreadable)
	}
	codes := map[string]UnreadableEvent{}
	for _, u := range rep.Unreadable {
		codes[u.Code] = u
	}
	if u := codes[events.CodeUnknownSchema]; u.IntentID != futureID || u.Subject != events.Subject(l.Route, futureID) || u.Seq == 0 {
		t.Errorf("unknown schema listed as %+v", u)
	}
	if u := codes[events.CodeUnknownType]; u.IntentID != midway.ID() || u.Seq == 0 {
		t.Errorf("unknown type listed as %+v", u)
	}
	if rep.Intents != 11 || rep.States[fsm.Confirmed] != 2 {
		t.Errorf("intents %d states %v", rep.Intents, rep.States)
	}

	// The secret's timeline names the events, states and redacts the token.
	rep = runAudit(t, n.JS, AuditConfig{Now: func() time.Time { return t0.Add(2 * time.Hour) }, Intent: secret.ID()})
	var types []events.Type
	var states []fsm.State
	for _, e := range rep.Timeline {
		types = append(types, e.Type)
		states = append(states, e.State)
	}
	if !slices.Equal(types, []events.Type{events.IntentRecorded, events.WriteStarted, events.WriteRejected}) ||
		!slices.Equal(states, []fsm.State{fsm.Recorded, fsm.WriteStarted, fsm.Rejected}) {
		t.Fatalf("timeline %+v", rep.Timeline)
	}
	if d := rep.Timeline[2].Detail; strings.Contains(d, token) || !strings.Contains(d, "[redacted]") || !strings.Contains(d, "http_401") {
		t.Fatalf("timeline detail %q", d)
	}
	js, _ := json.Marshal(rep)
	if strings.Contains(string(js), token) {
		t.Fatal("the report repeats the secret")
	}
	// The illegal intent's timeline says which events were refused.
	rep = runAudit(t, n.JS, AuditConfig{Now: func() time.Time { return t0 }, Intent: illegal.ID()})
	if len(rep.Timeline) != 4 || rep.Timeline[2].State != "" || !strings.HasPrefix(rep.Timeline[2].Refused, ViolationIllegalTransition) ||
		rep.Timeline[1].State != fsm.WriteStarted {
		t.Fatalf("timeline %+v", rep.Timeline)
	}
}

// TestAuditDetectsProjectionMismatch projects a real log, then tampers with
// the SQLite file: the audit names the intent and the differing field.
func TestAuditDetectsProjectionMismatch(t *testing.T) {
	n := testharness.StartNode(t)
	l := testharness.NewHandLog(t, n.JS, nil, t0)
	var hs []*testharness.HandHistory
	for _, id := range []string{"a", "b", "c"} {
		x := l.Record(id).Started(1)
		x.Next(x.Attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: x.Receipt("p_"+id, "response")})
		hs = append(hs, x)
	}
	pending := l.Record("pending").Started(1)
	pending.Next(pending.Attempt(1), &events.OutcomeUnknownData{Code: "timeout"})
	proj, path := openProjection(t, n.JS)
	now := func() time.Time { return t0.Add(time.Minute) }
	if rep := runAudit(t, n.JS, AuditConfig{Now: now, Projection: proj}); !rep.OK() || rep.Projection.Compared != 4 {
		t.Fatalf("before tampering: %v %+v", rep.Violations, rep.Projection)
	}
	// An event appended after the projection's checkpoint is not a mismatch:
	// the view is compared with the log as far as the checkpoint.
	pending.Next("", &events.ReconcileStartedData{Worker: "w1", LeaseUntil: l.At.Add(time.Hour), Strategy: "search", Check: 1})
	if rep := runAudit(t, n.JS, AuditConfig{Now: now, Projection: proj}); !rep.OK() {
		t.Fatalf("projection behind the log: %v", rep.Violations)
	}

	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []struct {
		sql string
		arg string
	}{
		{`UPDATE intents SET state = 'unknown' WHERE intent_id = ?`, hs[0].ID()},
		{`UPDATE intents SET receipt_external_id = 'p_forged' WHERE intent_id = ?`, hs[1].ID()},
		{`DELETE FROM intents WHERE intent_id = ?`, hs[2].ID()},
	} {
		if _, err := db.Exec(q.sql, q.arg); err != nil {
			t.Fatal(err)
		}
	}
	rep := runAudit(t, n.JS, AuditConfig{Now: now, Projection: proj})
	got := auditByIntent(rep)
	check := func(id string, fragments ...string) {
		t.Helper()
		vs := got[id]
		if len(vs) != 1 || vs[0].Kind != ViolationProjectionMismatch {
			t.Fatalf("intent %s: %v", id, vs)
		}
		for _, f := range fragments {
			if !strings.Contains(vs[0].Detail, f) {
				t.Errorf("intent %s: detail %q lacks %q", id, vs[0].Detail, f)
			}
		}
	}
	check(hs[0].ID(), `state: projection "unknown", log "confirmed"`)
	check(hs[1].ID(), "receipt: projection", "p_forged")
	check(hs[2].ID(), "missing from the projection")
	if vs := got[""]; len(vs) != 1 || !strings.Contains(vs[0].Detail, "holds 3 intents; the log folds 4") {
		t.Fatalf("intent count: %v", vs)
	}
	if len(got) != 4 {
		t.Fatalf("violations %v", rep.Violations)
	}
}

func TestAuditEmptyStreamAndBadConfig(t *testing.T) {
	n := testharness.StartNode(t)
	testharness.NewHandLog(t, n.JS, nil, t0)
	rep := runAudit(t, n.JS, AuditConfig{})
	if !rep.OK() || rep.Events != 0 || rep.Intents != 0 {
		t.Fatalf("%+v", rep)
	}
	if _, err := Audit(context.Background(), n.JS, AuditConfig{Stream: "NOPE"}); err == nil {
		t.Fatal("audit of a missing stream succeeded")
	}
	if _, err := Audit(context.Background(), n.JS, AuditConfig{Intent: "not-an-id"}); err == nil || !strings.Contains(err.Error(), "Intent") {
		t.Fatalf("bad intent id: %v", err)
	}
}

// TestAuditFlagsSecretsInHeaders: a header on the message is part of the log.
func TestAuditFlagsSecretsInHeaders(t *testing.T) {
	n := testharness.StartNode(t)
	l := testharness.NewHandLog(t, n.JS, nil, t0)
	e := testharness.RecordedEvent(l.Route, "hdr", adapter.DefaultPolicy(), t0)
	raw, err := events.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(events.Subject(l.Route, e.IntentID))
	msg.Data = raw
	msg.Header.Set(jetstream.MsgIDHeader, e.EventID)
	msg.Header.Set("X-Upstream-Auth", "ghp_0123456789abcdefghijABCDEFGHIJ012345")
	if _, err := n.JS.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	rep := runAudit(t, n.JS, AuditConfig{Now: func() time.Time { return t0 }})
	vs := auditByIntent(rep)[e.IntentID]
	if len(vs) != 1 || vs[0].Kind != ViolationSecret || !strings.Contains(vs[0].Detail, "GitHub") || !strings.Contains(vs[0].Detail, "header") {
		t.Fatalf("%v", rep.Violations)
	}
}
