package audit

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/testharness"
)

// Dropping confirmed intents from memory changes nothing the audit says:
// later messages naming them (an illegal event, a second version 1, an
// unreadable event, one on another route's subject) are judged against the
// state folded again from the stream, exactly as if it had been kept.
func TestAuditEvictionKeepsTheReport(t *testing.T) {
	n := testharness.StartNode(t)
	l := testharness.NewHandLog(t, n.JS, nil, t0)
	confirm := func(name string) *testharness.HandHistory {
		x := l.Record(name).Started(1)
		return x.Next(x.Attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: x.Receipt("p_"+name, "response")})
	}
	var hs []*testharness.HandHistory
	for i := range 20 {
		hs = append(hs, confirm(fmt.Sprintf("done-%d", i)))
	}
	// After confirmation: a second write, a second IntentRecorded, an
	// unreadable event, an event on another route's subject, and an
	// intent confirmed but then refused twice.
	hs[3].Plant(hs[3].Attempt(2), &events.WriteStartedData{Attempt: 2, IdempotencyKey: hs[3].I.Recorded.IdempotencyKey, Deadline: l.At.Add(time.Minute)})
	rec := hs[7].H.Events[0]
	raw, err := events.Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	l.PublishRaw(hs[7].ID(), string(raw))
	l.PublishRaw(hs[11].ID(), `{"schema":"settle.event/v1","event_id":"`+hs[11].ID()+`:4","intent_id":"`+hs[11].ID()+
		`","version":4,"type":"WriteTeleported","at":"2026-07-22T09:00:30Z","actor":"x","data":{}}`)
	if _, err := n.JS.Publish(context.Background(), events.Subject("other_route", hs[13].ID()), raw); err != nil {
		t.Fatal(err)
	}
	hs[15].Plant("", &events.ReadbackFailedData{ExternalID: "p_x", Failed: []string{"url"}}).
		Plant("", &events.ReadbackFailedData{ExternalID: "p_x", Failed: []string{"url"}})
	confirm("after") // and more intents after them

	cfg := AuditConfig{Now: func() time.Time { return t0.Add(2 * time.Hour) }, Grace: time.Minute}
	kept, err := audit(context.Background(), n.JS, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := audit(context.Background(), n.JS, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	if dropped.evict.restores != 5 || len(dropped.intents) >= len(kept.intents) {
		t.Fatalf("restores %d, intents in memory %d (kept %d): want 5 restores and fewer in memory",
			dropped.evict.restores, len(dropped.intents), len(kept.intents))
	}
	if kept.rep.OK() || !reflect.DeepEqual(kept.rep, dropped.rep) {
		t.Fatalf("reports differ:\nkept    %+v\ndropped %+v", kept.rep, dropped.rep)
	}
}
