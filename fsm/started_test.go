package fsm

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
)

// joinFirst is h as this version writes it: an IntentRecorded followed at
// once by the first WriteStarted becomes one IntentStarted, and every
// later event's version is one less. orig is h with that WriteStarted at
// the IntentRecorded's time (the two halves of one message share it). ok
// is false when h does not start a write right after recording.
func joinFirst(h []events.Event) (orig, joined []events.Event, ok bool) {
	if len(h) < 2 || h[1].Type != events.WriteStarted {
		return nil, nil, false
	}
	orig = append([]events.Event(nil), h...)
	orig[1].At = orig[0].At
	orig[1].Actor = orig[0].Actor
	start, ok := events.Join(orig[0], orig[1])
	if !ok {
		return nil, nil, false
	}
	joined = []events.Event{start}
	for _, e := range orig[2:] {
		e.Version--
		e.EventID = events.MsgID(e.IntentID, e.Version)
		joined = append(joined, e)
	}
	return orig, joined, true
}

// An IntentStarted folds to what its IntentRecorded and WriteStarted fold
// to, whatever follows: every history of the decision table (every state ×
// capability profile × policy profile) whose first write starts at once is
// folded both ways, prefix by prefix, and the intents are the same but
// for the version (one message less) and, right after the start, the last
// event's type; the decider decides the same on both at several times.
func TestIntentStartedFoldsAsRecordedAndStarted(t *testing.T) {
	dec := testDecider()
	joinedAny := 0
	for capName, caps := range capProfiles {
		for _, pp := range policyProfiles {
			for name, h := range histories(caps, pp) {
				orig, joined, ok := joinFirst(h)
				if !ok {
					continue
				}
				label := capName + "/" + name
				if _, err := Fold(orig); err != nil {
					continue // the shifted start broke a later guard: not this test's history
				}
				joinedAny++
				for n := 1; n <= len(joined); n++ {
					want, err := Fold(orig[:n+1])
					if err != nil {
						t.Fatalf("%s: %v", label, err)
					}
					got, err := Fold(joined[:n])
					if err != nil {
						t.Fatalf("%s: joined history refused at %d: %v", label, n, err)
					}
					if got.Version != want.Version-1 {
						t.Fatalf("%s: version %d, want %d", label, got.Version, want.Version-1)
					}
					if n == 1 && (got.LastType != events.IntentStarted || want.LastType != events.WriteStarted) {
						t.Fatalf("%s: last types %s / %s", label, got.LastType, want.LastType)
					}
					w := *want
					w.Version, w.LastType = got.Version, got.LastType
					if !reflect.DeepEqual(got, &w) {
						t.Fatalf("%s at %d:\n got %+v\nwant %+v", label, n, got, &w)
					}
					for _, d := range []time.Duration{0, time.Minute, time.Hour, 48 * time.Hour} {
						now := joined[n-1].At.Add(d)
						sg, sw := dec.Next(got, caps, now), dec.Next(want, caps, now)
						if sg.Kind != sw.Kind || sg.Why != sw.Why || !reflect.DeepEqual(sg.Event, sw.Event) {
							t.Fatalf("%s at %d +%s: decided %+v, want %+v", label, n, d, sg, sw)
						}
					}
				}
			}
		}
	}
	if joinedAny < 50 {
		t.Fatalf("only %d histories started at once", joinedAny)
	}
}

// An IntentStarted is refused wherever its halves would be, naming itself
// and leaving the intent unchanged: after an intent is recorded, on a
// route that needs approval first, past the intent's expiry, with
// another intent's attempt id.
func TestIntentStartedRefusals(t *testing.T) {
	start := func(p events.Policy, mod func(*events.Event, *events.IntentStartedData)) events.Event {
		rec := recorded(p)
		d := &events.IntentStartedData{Recorded: *rec.Data.(*events.IntentRecordedData),
			Started: events.WriteStartedData{Attempt: 1, IdempotencyKey: events.IdempotencyKey(rec.IntentID), Deadline: t0.Add(time.Minute)}}
		e := events.New(rec.IntentID, 1, t0, "test", events.AttemptID(rec.IntentID, 1), d)
		if mod != nil {
			mod(&e, d)
		}
		return e
	}
	good := start(autoPolicy(), nil)
	i, err := Fold([]events.Event{good})
	if err != nil || i.State != WriteStarted || i.Version != 1 || len(i.Attempts) != 1 || i.Attempts[0].ID != good.AttemptID || i.CreatedAt != t0 {
		t.Fatalf("%v %+v", err, i)
	}
	approval := autoPolicy()
	approval.FirstWrite = events.PolicyApproval
	strict := func(e *events.Event, d *events.IntentStartedData) {
		d.Recorded.Caps = &events.Capabilities{Search: true}
		d.Recorded.ExpiresAt = t0
	}
	for name, c := range map[string]struct {
		history []events.Event
		e       events.Event
		kind    error
	}{
		"after IntentRecorded": {[]events.Event{recorded(autoPolicy())}, start(autoPolicy(), func(e *events.Event, _ *events.IntentStartedData) {
			e.Version, e.EventID = 2, events.MsgID(e.IntentID, 2)
		}), ErrIllegalTransition},
		"approval first": {nil, start(approval, nil), ErrGuard},
		"expired":        {nil, start(autoPolicy(), strict), ErrGuard},
		"other attempt id": {nil, start(autoPolicy(), func(e *events.Event, _ *events.IntentStartedData) {
			e.AttemptID = events.AttemptID(e.IntentID, 2)
		}), ErrGuard},
	} {
		i := &Intent{State: None}
		for _, e := range c.history {
			if err := i.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
		before := i.Clone()
		err := i.Apply(c.e)
		var te *TransitionError
		if !errors.Is(err, c.kind) || !errors.As(err, &te) || te.Type != events.IntentStarted || te.Version != c.e.Version || te.State != before.State {
			t.Errorf("%s: %v, want %v naming IntentStarted", name, err, c.kind)
		}
		if !reflect.DeepEqual(i, before) {
			t.Errorf("%s: the intent changed", name)
		}
	}
}
