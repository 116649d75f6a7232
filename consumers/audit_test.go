package consumers

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
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/testharness"
)

// auditLog writes hand-built histories on a real stream: legal ones with
// Store.AppendNext (fsm-checked) and planted ones with Store.Append, which
// checks only the encoding.
type auditLog struct {
	t     *testing.T
	js    jetstream.JetStream
	store *ledger.Store
	route string
	at    time.Time
}

func newAuditLog(t *testing.T, js jetstream.JetStream, store *ledger.Store, at time.Time) *auditLog {
	t.Helper()
	if store == nil {
		var err error
		if store, err = ledger.OpenStore(context.Background(), js, ledger.DefaultStoreConfig()); err != nil {
			t.Fatal(err)
		}
	}
	return &auditLog{t: t, js: js, store: store, route: "social_post", at: at}
}

// tick advances the log's clock by a second and returns it.
func (l *auditLog) tick() time.Time {
	l.at = l.at.Add(time.Second)
	return l.at
}

// auditRecordedEvent is a valid IntentRecorded for requestID on route.
func auditRecordedEvent(route, requestID string, pol events.Policy, at time.Time) events.Event {
	canon, err := events.Canonicalize([]byte(`{"body":"post for ` + requestID + `"}`))
	if err != nil {
		panic(err)
	}
	sum, err := events.PayloadSHA256(canon)
	if err != nil {
		panic(err)
	}
	id := events.IntentID("default", route, requestID)
	return events.New(id, 1, at, "writer", "", &events.IntentRecordedData{
		Tenant: "default", Route: route, Account: "acct_1", RequestID: requestID,
		IdempotencyKey: events.IdempotencyKey(id), Payload: canon, PayloadSHA256: sum, Canon: events.CanonV1,
		PlannedAt: at, Policy: pol,
	})
}

type auditHist struct {
	l *auditLog
	h *ledger.History
	i *fsm.Intent
}

// record appends an IntentRecorded with the default policy.
func (l *auditLog) record(requestID string) *auditHist {
	l.t.Helper()
	e := auditRecordedEvent(l.route, requestID, adapter.DefaultPolicy(), l.tick())
	seq, err := l.store.Append(context.Background(), l.route, e, 0)
	if err != nil {
		l.t.Fatal(err)
	}
	h := &ledger.History{Route: l.route, Events: []events.Event{e}, LastSeq: seq}
	i, err := h.Fold()
	if err != nil {
		l.t.Fatal(err)
	}
	return &auditHist{l: l, h: h, i: i}
}

func (x *auditHist) id() string { return x.i.ID }

func (x *auditHist) attempt(n int) string { return events.AttemptID(x.i.ID, n) }

// next appends a legal event (fsm-checked).
func (x *auditHist) next(attemptID string, d events.Data) *auditHist {
	x.l.t.Helper()
	if err := x.l.store.AppendNext(context.Background(), x.h, x.i, "writer", x.l.tick(), attemptID, d); err != nil {
		x.l.t.Fatal(err)
	}
	return x
}

// plant appends an event the fsm may refuse: only its encoding is checked.
func (x *auditHist) plant(attemptID string, d events.Data) *auditHist {
	x.l.t.Helper()
	e := events.New(x.i.ID, uint64(len(x.h.Events))+1, x.l.tick(), "intruder", attemptID, d)
	seq, err := x.l.store.Append(context.Background(), x.h.Route, e, x.h.LastSeq)
	if err != nil {
		x.l.t.Fatal(err)
	}
	x.h.Events = append(x.h.Events, e)
	x.h.LastSeq = seq
	return x
}

// publishRaw puts bytes on an intent's subject as they are.
func (l *auditLog) publishRaw(intentID string, raw string) uint64 {
	l.t.Helper()
	ack, err := l.js.Publish(context.Background(), events.Subject(l.route, intentID), []byte(raw))
	if err != nil {
		l.t.Fatal(err)
	}
	return ack.Sequence
}

func (x *auditHist) started(n int) *auditHist {
	return x.next(x.attempt(n), &events.WriteStartedData{Attempt: n, IdempotencyKey: x.i.Recorded.IdempotencyKey,
		Deadline: x.l.at.Add(time.Minute)})
}

func (x *auditHist) receipt(externalID, source string) events.Receipt {
	r := events.Receipt{ExternalID: externalID, LiveURL: "https://social.example/p/" + externalID,
		PayloadSHA256: x.i.Recorded.PayloadSHA256, Source: source}
	if source == "readback" {
		r.Checks = []events.Check{{Name: "url", OK: true}, {Name: "payload", OK: true}}
		r.ReadbackAt = x.l.at
	}
	return r
}

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

// TestAuditCleanLogPasses audits histories written by the producer and the
// reconciler against the fake social API (dropped response reconciled,
// proven not-found retried under a claim, duplicates handed off) and
// hand-built legal ones (trusted response, operator release and abandon),
// with the projection compared: no violation, even though every
// IntentRecorded and WriteStarted carries an sk_ idempotency key.
func TestAuditCleanLogPasses(t *testing.T) {
	w := newWorld(t, nil)
	r := w.reconciler("w1", nil)
	w.api.Next(testharness.CommitThenDrop())
	dropped := w.execute("task:dropped", "hello")
	w.settle(r, dropped.IntentID)
	w.api.Next(testharness.ResetBeforeCommit())
	retried := w.execute("task:retried", "again")
	if i := w.settle(r, retried.IntentID); i.State != fsm.Confirmed || len(i.Attempts) != 2 {
		t.Fatalf("retried intent: %s with %d attempts", i.State, len(i.Attempts))
	}
	plain := w.execute("task:plain", "plain")
	w.settle(r, plain.IntentID)
	w.api.Next(testharness.Duplicate().Dropped())
	dup := w.execute("task:dup", "twice")
	if i := w.settle(r, dup.IntentID); i.State != fsm.ManualAction {
		t.Fatalf("duplicate intent: %s", i.State)
	}

	l := newAuditLog(t, w.node.JS, w.store, w.clock.Now())
	trusted := l.record("hand:trusted").started(1)
	trusted.next(trusted.attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: trusted.receipt("p_trusted", "response")})
	released := l.record("hand:released").started(1)
	released.next(released.attempt(1), &events.OutcomeUnknownData{Code: "timeout"}).
		next("", &events.ManualActionRequiredData{Reason: events.ReasonNoQueryNoDedup}).
		next("", &events.OperatorReleasedData{Operator: "alice", Reason: "checked the account: nothing posted"}).
		started(2)
	released.next(released.attempt(2), &events.WriteRejectedData{Code: "http_400", StatusCode: 400}).
		next("", &events.AbandonedData{By: "alice", Reason: "bad payload"})

	proj, _ := openProjection(t, w.node.JS)
	var calls [][2]uint64
	rep := runAudit(t, w.node.JS, AuditConfig{Now: l.tick, Projection: proj, ProgressEvery: 5,
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

// TestAuditFindsPlantedViolations plants one violation per intent next to
// a clean intent and checks that each is found, named with its intent,
// and that the clean intent is not named.
func TestAuditFindsPlantedViolations(t *testing.T) {
	n := testharness.StartNode(t)
	l := newAuditLog(t, n.JS, nil, t0)

	clean := l.record("clean").started(1)
	clean.next(clean.attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: clean.receipt("p_clean", "response")})

	// Every event is legal for the fsm, yet two external ids: the API said
	// it created p_1 and an operator later confirmed p_2.
	twoIDs := l.record("two-ids").started(1)
	twoIDs.next(twoIDs.attempt(1), &events.WriteSucceededData{ExternalID: "p_1", StatusCode: 201}).
		next("", &events.ReadbackFailedData{ExternalID: "p_1", Failed: []string{"visibility"}}).
		next("", &events.OperatorConfirmedData{Operator: "bob", Reason: "found it", Receipt: twoIDs.receipt("p_2", "operator")})

	noStart := l.record("no-start")
	noStart.plant(noStart.attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: noStart.receipt("p_x", "response")})

	illegal := l.record("illegal").started(1)
	illegal.plant(illegal.attempt(1), &events.ReadbackPassedData{Receipt: illegal.receipt("p_y", "readback")}).
		plant(illegal.attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: illegal.receipt("p_y", "response")})

	const token = "abcdefghijklmnopqrstuvwxyz0123"
	secret := l.record("secret").started(1)
	secret.next(secret.attempt(1), &events.WriteRejectedData{Code: "http_401", StatusCode: 401,
		Message: "upstream said: Authorization: Bearer " + token})

	noClaim := l.record("no-claim").started(1)
	noClaim.next(noClaim.attempt(1), &events.WriteRejectedData{Code: "http_429", StatusCode: 429, Retryable: true}).
		plant(noClaim.attempt(2), &events.WriteStartedData{Attempt: 2, IdempotencyKey: noClaim.i.Recorded.IdempotencyKey, Deadline: l.at.Add(time.Minute)})

	stuckStarted := l.record("stuck-started").started(1)
	stuckUnknown := l.record("stuck-unknown").started(1)
	stuckUnknown.next(stuckUnknown.attempt(1), &events.OutcomeUnknownData{Code: "timeout"})

	// Unreadable events: a future schema (its intent has nothing else), an
	// unknown type in the middle of a history (the intent's later events
	// are not judged), and a v1 event with a field missing.
	futureID := events.IntentID("default", l.route, "future")
	l.publishRaw(futureID, `{"schema":"settle.event/v2","event_id":"`+futureID+`:1","intent_id":"`+futureID+`","version":1,"type":"IntentRecorded","shape":"new"}`)
	midway := l.record("midway").started(1)
	midway.h.LastSeq = l.publishRaw(midway.id(), `{"schema":"settle.event/v1","event_id":"`+midway.id()+`:3","intent_id":"`+midway.id()+
		`","version":3,"type":"WriteTeleported","at":"2026-07-22T09:00:30Z","actor":"future-writer","data":{}}`)
	midway.h.Events = append(midway.h.Events, events.Event{})
	midway.plant(midway.attempt(1), &events.WriteRejectedData{Code: "http_400", StatusCode: 400})
	brokenID := events.IntentID("default", l.route, "broken")
	l.publishRaw(brokenID, `{"schema":"settle.event/v1","event_id":"`+brokenID+`:1","intent_id":"`+brokenID+
		`","version":1,"type":"Abandoned","at":"2026-07-22T09:00:31Z","actor":"x","data":{"reason":"no by"}}`)

	rep := runAudit(t, n.JS, AuditConfig{Now: func() time.Time { return t0.Add(2 * time.Hour) }, Grace: time.Minute})
	if rep.OK() {
		t.Fatal("planted violations not found")
	}
	got := auditByIntent(rep)
	want := map[string][]string{
		twoIDs.id():       {ViolationTwoExternalIDs},
		noStart.id():      {ViolationIllegalTransition, ViolationOutcomeWithoutWriteStarted},
		illegal.id():      {ViolationIllegalTransition, ViolationStuck},
		secret.id():       {ViolationSecret},
		noClaim.id():      {ViolationIllegalTransition, ViolationRetryWithoutClaim},
		stuckStarted.id(): {ViolationStuck},
		stuckUnknown.id(): {ViolationStuck},
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
	for _, v := range got[illegal.id()] {
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
	if v := got[twoIDs.id()][0]; v.Version != 5 || !strings.Contains(v.Detail, `"p_2"`) || !strings.Contains(v.Detail, `"p_1"`) {
		t.Errorf("two ids: %+v", v)
	}
	if v := got[secret.id()][0]; v.Version != 3 || strings.Contains(v.Detail, token) || !strings.Contains(v.Detail, "WriteRejected") {
		t.Errorf("secret: %+v", v)
	}
	if v := got[stuckUnknown.id()][0]; !strings.Contains(v.Detail, "unknown") {
		t.Errorf("stuck unknown: %+v", v)
	}
	if rep.UnknownSchema != 1 || rep.UnknownType != 1 || rep.Malformed != 1 || rep.Incomplete != 3 || len(rep.Unreadable) != 3 {
		t.Fatalf("unreadable: schema %d type %d malformed %d incomplete %d %+v", rep.UnknownSchema, rep.UnknownType, rep.Malformed, rep.Incomplete, rep.Unreadable)
	}
	codes := map[string]UnreadableEvent{}
	for _, u := range rep.Unreadable {
		codes[u.Code] = u
	}
	if u := codes[projector.QuarantineUnknownSchema]; u.IntentID != futureID || u.Subject != events.Subject(l.route, futureID) || u.Seq == 0 {
		t.Errorf("unknown schema listed as %+v", u)
	}
	if u := codes[projector.QuarantineUnknownType]; u.IntentID != midway.id() || u.Seq == 0 {
		t.Errorf("unknown type listed as %+v", u)
	}
	if rep.Intents != 11 || rep.States[fsm.Confirmed] != 2 {
		t.Errorf("intents %d states %v", rep.Intents, rep.States)
	}

	// The secret's timeline names the events, states and redacts the token.
	rep = runAudit(t, n.JS, AuditConfig{Now: func() time.Time { return t0.Add(2 * time.Hour) }, Intent: secret.id()})
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
	rep = runAudit(t, n.JS, AuditConfig{Now: func() time.Time { return t0 }, Intent: illegal.id()})
	if len(rep.Timeline) != 4 || rep.Timeline[2].State != "" || !strings.HasPrefix(rep.Timeline[2].Refused, ViolationIllegalTransition) ||
		rep.Timeline[1].State != fsm.WriteStarted {
		t.Fatalf("timeline %+v", rep.Timeline)
	}
}

// TestAuditDetectsProjectionMismatch projects a real log, then tampers with
// the SQLite file: the audit names the intent and the differing field.
func TestAuditDetectsProjectionMismatch(t *testing.T) {
	n := testharness.StartNode(t)
	l := newAuditLog(t, n.JS, nil, t0)
	var hs []*auditHist
	for _, id := range []string{"a", "b", "c"} {
		x := l.record(id).started(1)
		x.next(x.attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: x.receipt("p_"+id, "response")})
		hs = append(hs, x)
	}
	pending := l.record("pending").started(1)
	pending.next(pending.attempt(1), &events.OutcomeUnknownData{Code: "timeout"})
	proj, path := openProjection(t, n.JS)
	now := func() time.Time { return t0.Add(time.Minute) }
	if rep := runAudit(t, n.JS, AuditConfig{Now: now, Projection: proj}); !rep.OK() || rep.Projection.Compared != 4 {
		t.Fatalf("before tampering: %v %+v", rep.Violations, rep.Projection)
	}
	// An event appended after the projection's checkpoint is not a mismatch:
	// the view is compared with the log as far as the checkpoint.
	pending.next("", &events.ReconcileStartedData{Worker: "w1", LeaseUntil: l.at.Add(time.Hour), Strategy: "search", Check: 1})
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
		{`UPDATE intents SET state = 'unknown' WHERE intent_id = ?`, hs[0].id()},
		{`UPDATE receipts SET external_id = 'p_forged' WHERE intent_id = ?`, hs[1].id()},
		{`DELETE FROM intents WHERE intent_id = ?`, hs[2].id()},
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
	check(hs[0].id(), `state: projection "unknown", log "confirmed"`)
	check(hs[1].id(), "receipt: projection", "p_forged")
	check(hs[2].id(), "missing from the projection")
	if vs := got[""]; len(vs) != 1 || !strings.Contains(vs[0].Detail, "holds 3 intents; the log folds 4") {
		t.Fatalf("intent count: %v", vs)
	}
	if len(got) != 4 {
		t.Fatalf("violations %v", rep.Violations)
	}
}

func TestAuditEmptyStreamAndBadConfig(t *testing.T) {
	n := testharness.StartNode(t)
	newAuditLog(t, n.JS, nil, t0)
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
	l := newAuditLog(t, n.JS, nil, t0)
	e := auditRecordedEvent(l.route, "hdr", adapter.DefaultPolicy(), t0)
	raw, err := events.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(events.Subject(l.route, e.IntentID))
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

func TestScanSecrets(t *testing.T) {
	key := events.IdempotencyKey(events.IntentID("default", "social_post", "r1"))
	flagged := []string{
		`{"message":"Authorization: Bearer abcdefghijklmnopqrst"}`,
		`{"headers":{"Authorization":["Basic dXNlcjpwYXNz"]}}`,
		`{"message":"bearer eyJhbGciOiJIUzI1NiJ9.e30.x"}`,
		`{"message":"key sk_live_4eC39HqLyjWDarjtT1zdp7dc"}`,
		`{"message":"key sk_test_4eC39HqLyjWDarjtT1zdp7dc"}`,
		`{"message":"ghp_0123456789abcdefghijABCDEFGHIJ012345"}`,
		`{"message":"xoxb-1234567890-abcdefghij"}`,
		`{"message":"xoxp-1234567890-abcdefghij"}`,
		`{"message":"AKIAIOSFODNN7EXAMPLE"}`,
		`{"message":"-----BEGIN RSA PRIVATE KEY-----\nMIIB"}`,
		`{"message":"-----BEGIN PRIVATE KEY-----"}`,
		`{"password":"hunter2"}`,
		`{"message":"{\"password\":\"hunter2\"}"}`,
		`{"api_key":"0123456789abcdef"}`,
		`{"message":"GET /v1?apikey=0123456789abcdef"}`,
		`{"token":"0123456789abcdef0123456789"}`,
		`{"access_token":"0123456789abcdef0123456789"}`,
		`{"message":"\u0062earer abcdefghijklmnopqrst"}`,
	}
	for _, s := range flagged {
		if hits := scanSecrets([]byte(s)); len(hits) == 0 {
			t.Errorf("not flagged: %s", s)
		}
	}
	clean := []string{
		`{"idempotency_key":"` + key + `"}`,
		`{"token":"` + key + `"}`,
		`{"message":"retry with key ` + key + `"}`,
		`{"message":"401 unauthorized from POST api.example.com","code":"http_401"}`,
		`{"message":"token expired","code":"auth_failed"}`,
		`{"body":"my password is short","reason":"the bearer of bad news"}`,
		`{"payload_sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}`,
		`{"external_id":"AKIA-not-a-key","live_url":"https://social.example/p/1"}`,
	}
	for _, s := range clean {
		if hits := scanSecrets([]byte(s)); len(hits) != 0 {
			t.Errorf("flagged %v: %s", hits, s)
		}
	}
	if r := redact("x Authorization: Bearer abcdefghijklmnopqrst y " + key); strings.Contains(r, "abcdefghijklmnopqrst") || !strings.Contains(r, key) {
		t.Errorf("redact: %q", r)
	}
}
