package testharness

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// HandLog writes hand-built histories on a real stream: legal ones with
// Store.AppendNext (fsm-checked) and planted ones with Store.Append, which
// checks only the encoding.
type HandLog struct {
	t     testing.TB
	js    jetstream.JetStream
	Store *ledger.Store
	Route string
	// At is the log's clock: each event is a second after the last.
	At time.Time
}

// NewHandLog writes on store (nil: a store opened on js with the
// defaults), on route social_post, from at.
func NewHandLog(t testing.TB, js jetstream.JetStream, store *ledger.Store, at time.Time) *HandLog {
	t.Helper()
	if store == nil {
		store = OpenStore(t, js)
	}
	return &HandLog{t: t, js: js, Store: store, Route: "social_post", At: at}
}

// Tick advances the log's clock by a second and returns it.
func (l *HandLog) Tick() time.Time {
	l.At = l.At.Add(time.Second)
	return l.At
}

// RecordedEvent is a valid IntentRecorded (account acct_1, caps HandCaps)
// for requestID on route.
func RecordedEvent(route, requestID string, pol events.Policy, at time.Time) events.Event {
	canon, err := events.Canonicalize([]byte(`{"body":"post for ` + requestID + `"}`))
	if err != nil {
		panic(err)
	}
	sum, err := events.PayloadSHA256(canon)
	if err != nil {
		panic(err)
	}
	id := events.ScopedIntentID("default", route, "acct_1", requestID)
	return events.New(id, 1, at, "writer", "", &events.IntentRecordedData{
		Tenant: "default", Route: route, Account: "acct_1", RequestID: requestID,
		IdempotencyKey: events.IdempotencyKey(id), Payload: canon, PayloadSHA256: sum, Canon: events.CanonV1,
		PlannedAt: at, Policy: pol, Caps: &HandCaps,
	})
}

// HandCaps are the capabilities RecordedEvent freezes: an idempotency key
// kept a day, an authoritative search, and readback checks of url, author,
// payload and parent.
var HandCaps = events.Capabilities{IdempotencyKey: true, KeyRetention: events.Duration(24 * time.Hour),
	Search: true, SearchAuthoritative: true, Checks: []string{"url", "author", "payload", "parent"}}

// HandHistory is one intent of a HandLog: its history and its fold.
type HandHistory struct {
	l *HandLog
	H *ledger.History
	I *fsm.Intent
}

// Record appends an IntentRecorded with the default policy.
func (l *HandLog) Record(requestID string) *HandHistory {
	l.t.Helper()
	return l.first(RecordedEvent(l.Route, requestID, adapter.DefaultPolicy(), l.Tick()))
}

func (l *HandLog) first(e events.Event) *HandHistory {
	l.t.Helper()
	seq, err := l.Store.Append(context.Background(), l.Route, e, 0)
	if err != nil {
		l.t.Fatal(err)
	}
	h := &ledger.History{Route: l.Route, Events: []events.Event{e}, LastSeq: seq}
	i, err := h.Fold()
	if err != nil {
		l.t.Fatal(err)
	}
	return &HandHistory{l: l, H: h, I: i}
}

// RecordStarted records an intent with the default policy and starts its
// first attempt (deadline a minute on) in one message, IntentStarted, as
// Execute does.
func (l *HandLog) RecordStarted(requestID string) *HandHistory {
	l.t.Helper()
	at := l.Tick()
	rec := RecordedEvent(l.Route, requestID, adapter.DefaultPolicy(), at)
	d := rec.Data.(*events.IntentRecordedData)
	e, ok := events.Join(rec, events.New(rec.IntentID, 2, at, rec.Actor, events.AttemptID(rec.IntentID, 1),
		&events.WriteStartedData{Attempt: 1, IdempotencyKey: d.IdempotencyKey, Deadline: at.Add(time.Minute)}))
	if !ok {
		l.t.Fatal("record started: the record and its start do not join")
	}
	return l.first(e)
}

func (x *HandHistory) ID() string { return x.I.ID }

// Attempt is the id of the intent's attempt n.
func (x *HandHistory) Attempt(n int) string { return events.AttemptID(x.I.ID, n) }

// Next appends a legal event (fsm-checked).
func (x *HandHistory) Next(attemptID string, d events.Data) *HandHistory {
	x.l.t.Helper()
	if err := x.l.Store.AppendNext(context.Background(), x.H, x.I, "writer", x.l.Tick(), attemptID, d); err != nil {
		x.l.t.Fatal(err)
	}
	return x
}

// Plant appends an event the fsm may refuse: only its encoding is checked.
func (x *HandHistory) Plant(attemptID string, d events.Data) *HandHistory {
	x.l.t.Helper()
	e := events.New(x.I.ID, uint64(len(x.H.Events))+1, x.l.Tick(), "intruder", attemptID, d)
	seq, err := x.l.Store.Append(context.Background(), x.H.Route, e, x.H.LastSeq)
	if err != nil {
		x.l.t.Fatal(err)
	}
	x.H.Events = append(x.H.Events, e)
	x.H.LastSeq = seq
	return x
}

// PublishRaw puts raw on an intent's subject as it is.
func (l *HandLog) PublishRaw(intentID string, raw string) uint64 {
	l.t.Helper()
	ack, err := l.js.Publish(context.Background(), events.Subject(l.Route, intentID), []byte(raw))
	if err != nil {
		l.t.Fatal(err)
	}
	return ack.Sequence
}

// Started appends the WriteStarted of attempt n (deadline a minute on).
func (x *HandHistory) Started(n int) *HandHistory {
	return x.Next(x.Attempt(n), &events.WriteStartedData{Attempt: n, IdempotencyKey: x.I.Recorded.IdempotencyKey,
		Deadline: x.l.At.Add(time.Minute)})
}

// Receipt is a receipt of externalID for the intent, from source
// (response, readback, operator); a readback receipt carries every check
// HandCaps declares, passing.
func (x *HandHistory) Receipt(externalID string, source events.Source) events.Receipt {
	r := events.Receipt{ExternalID: externalID, LiveURL: "https://social.example/p/" + externalID,
		PayloadSHA256: x.I.Recorded.PayloadSHA256, Source: source}
	if source == events.SourceReadback {
		for _, c := range HandCaps.Checks {
			r.Checks = append(r.Checks, events.Check{Name: c, OK: true})
		}
		r.ReadbackAt = x.l.At
	}
	return r
}

// ReplayedIntent is intent k of the benchmarks' replay log: the six events
// of a dropped response settled by reconciliation (recorded, started,
// unknown, reconciling, found, read back), on route social_post, at
// t0 + k ms.
func ReplayedIntent(k int, t0 time.Time) []events.Event {
	payload := []byte(`{"assets":[],"body":"replay"}`)
	sum, _ := events.PayloadSHA256(payload)
	req := "replay:" + strconv.Itoa(k)
	id := events.ScopedIntentID("default", "social_post", "acct_1", req)
	at := t0.Add(time.Duration(k) * time.Millisecond)
	key := events.IdempotencyKey(id)
	ext := "p_" + strconv.Itoa(k)
	rec := &events.IntentRecordedData{Tenant: "default", Route: "social_post", Account: "acct_1", RequestID: req,
		IdempotencyKey: key, Payload: payload, PayloadSHA256: sum, Canon: events.CanonV1, PlannedAt: at, Policy: adapter.DefaultPolicy()}
	var out []events.Event
	add := func(attempt string, d events.Data) {
		out = append(out, events.New(id, uint64(len(out)+1), at, "bench", attempt, d))
	}
	a1 := events.AttemptID(id, 1)
	add("", rec)
	add(a1, &events.WriteStartedData{Attempt: 1, IdempotencyKey: key, Deadline: at.Add(time.Minute)})
	add(a1, &events.OutcomeUnknownData{Code: "connection_reset"})
	add("", &events.ReconcileStartedData{Worker: "w", LeaseUntil: at.Add(time.Minute), Strategy: "search", Check: 1})
	add("", &events.CandidateFoundData{ExternalID: ext, Source: events.SourceSearch})
	add("", &events.ReadbackPassedData{Receipt: events.Receipt{ExternalID: ext, PayloadSHA256: sum, Source: events.SourceReadback,
		ReadbackAt: at, Checks: []events.Check{{Name: "url", OK: true}, {Name: "author", OK: true}, {Name: "payload", OK: true}, {Name: "parent", OK: true}, {Name: "visibility", OK: true}}}})
	return out
}

// MarkHeld writes the intent's hold marker naming versions lost, as serve
// does when a loss is accepted.
func (l *HandLog) MarkHeld(intentID string, versions ...uint64) {
	l.t.Helper()
	h := events.NewHold(intentID, versions, nil, nil, l.Tick(), "test", "the test says this intent lost events.")
	if ok, err := ledger.MarkHeld(context.Background(), l.js, l.Store.Config().Stream, l.Route, h); err != nil || !ok {
		l.t.Fatalf("mark %s held: appended %v, %v", intentID, ok, err)
	}
}

// MarkHeld writes the intent's hold marker and reads it into the history,
// so that later events follow it.
func (x *HandHistory) MarkHeld(versions ...uint64) *HandHistory {
	x.l.t.Helper()
	x.l.MarkHeld(x.I.ID, versions...)
	if err := x.l.Store.Refresh(context.Background(), x.H, x.I.ID); err != nil {
		x.l.t.Fatal(err)
	}
	return x
}
