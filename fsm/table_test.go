package fsm

import (
	"errors"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
)

// prepare returns an intent in state s whose other fields satisfy the
// guards of event type t, and a valid event of type t for it.
func prepare(t *testing.T, s State, typ events.Type) (*Intent, events.Event) {
	t.Helper()
	var i *Intent
	if s == None {
		i = &Intent{State: None}
	} else {
		var err error
		i, err = Fold([]events.Event{recorded(autoPolicy())})
		if err != nil {
			t.Fatal(err)
		}
		i.State = s
	}
	id := events.ScopedIntentID("acme", "social_post", "acct_1", "task-1:step-1")
	key := events.IdempotencyKey(id)
	closed := Attempt{N: 1, ID: events.AttemptID(id, 1), StartedAt: t0, Deadline: t0.Add(time.Minute), Outcome: events.OutcomeUnknown}
	at := t0.Add(10 * time.Second)
	attempt := ""
	var d events.Data
	switch typ {
	case events.IntentRecorded:
		e := recorded(autoPolicy())
		e.Version = i.Version + 1
		e.EventID = events.MsgID(e.IntentID, e.Version)
		return i, e
	case events.IntentStarted:
		rec := recorded(autoPolicy())
		attempt = events.AttemptID(rec.IntentID, 1)
		return i, events.New(rec.IntentID, i.Version+1, rec.At, "test", attempt, &events.IntentStartedData{
			Recorded: *rec.Data.(*events.IntentRecordedData),
			Started:  events.WriteStartedData{Attempt: 1, IdempotencyKey: key, Deadline: rec.At.Add(time.Minute)}})
	case events.ApprovalRequired:
		d = &events.ApprovalRequiredData{For: "retry"}
	case events.Approved:
		d = &events.ApprovedData{Operator: "op"}
	case events.WriteStarted:
		n := 1
		if s == RetryClaimed {
			i.Attempts = []Attempt{closed}
			i.Claim = &Claim{Owner: "w1", LeaseUntil: t0.Add(time.Hour), Attempt: 2}
			n = 2
		}
		attempt = events.AttemptID(id, n)
		d = &events.WriteStartedData{Attempt: n, IdempotencyKey: key, Deadline: at.Add(time.Minute), ClaimOwner: claimOwner(n)}
	case events.WriteSucceeded, events.WriteConfirmed, events.WriteRejected, events.OutcomeUnknown:
		open := closed
		open.Outcome = ""
		i.Attempts = []Attempt{open}
		attempt = open.ID
		switch typ {
		case events.WriteSucceeded:
			d = &events.WriteSucceededData{ExternalID: "p_1", StatusCode: 201}
		case events.WriteConfirmed:
			d = &events.WriteConfirmedData{StatusCode: 201, Receipt: events.Receipt{ExternalID: "p_1", Source: "response", PayloadSHA256: i.Recorded.PayloadSHA256}}
		case events.WriteRejected:
			d = &events.WriteRejectedData{Code: "http_rejected", StatusCode: 400}
		default:
			d = &events.OutcomeUnknownData{Code: "timeout_after_send"}
		}
	case events.ReconcileStarted:
		d = &events.ReconcileStartedData{Worker: "w1", LeaseUntil: at.Add(time.Minute), Strategy: "search", Check: 1}
	case events.CheckDeferred:
		d = &events.CheckDeferredData{Reason: "eventual_consistency", NextCheckAt: at.Add(time.Minute)}
	case events.CandidateFound:
		d = &events.CandidateFoundData{ExternalID: "p_1", Source: "search"}
	case events.ReadbackPassed:
		d = &events.ReadbackPassedData{Receipt: receipt(i)}
	case events.ReadbackFailed:
		d = &events.ReadbackFailedData{ExternalID: "p_1", Failed: []string{"visibility"}}
	case events.TargetProcessing:
		d = &events.TargetProcessingData{Poll: 1, NextCheckAt: at.Add(time.Second), Deadline: at.Add(time.Hour)}
	case events.SearchWindowElapsed:
		d = &events.SearchWindowElapsedData{WindowTo: at}
	case events.StatusNotFound:
		d = &events.StatusNotFoundData{Queried: "request_id"}
	case events.TargetFailed:
		d = &events.TargetFailedData{Code: "declined"}
	case events.RetryClaimed:
		i.Attempts = []Attempt{closed}
		i.LastRejection = &events.WriteRejectedData{Code: "dns_failure", Retryable: true}
		d = &events.RetryClaimedData{Owner: "w1", LeaseUntil: at.Add(time.Minute), Attempt: 2}
	case events.ClaimExpired:
		i.Claim = &Claim{Owner: "w1", LeaseUntil: t0, Attempt: 2}
		d = &events.ClaimExpiredData{Owner: "w1", LeaseUntil: t0}
	case events.ManualActionRequired:
		d = &events.ManualActionRequiredData{Reason: events.ReasonDuplicateExactMatches}
	case events.OperatorConfirmed:
		d = &events.OperatorConfirmedData{Operator: "op", Reason: "seen it", Receipt: events.Receipt{ExternalID: "p_1", Source: "operator", PayloadSHA256: i.Recorded.PayloadSHA256}}
	case events.OperatorReleased:
		d = &events.OperatorReleasedData{Operator: "op", Reason: "proven absent"}
	case events.Abandoned:
		d = &events.AbandonedData{By: "op", Reason: "cancelled"}
	default:
		t.Fatalf("no fixture for %s", typ)
	}
	return i, events.New(id, i.Version+1, at, "test", attempt, d)
}

func allowed(s State, typ events.Type) bool {
	_, ok := target(s, typ)
	return ok
}

// TestEveryStateEventPair applies every event type in every state: the
// pairs in the table are accepted (and land in the table's target state),
// all others are refused as illegal transitions naming the state.
func TestEveryStateEventPair(t *testing.T) {
	accepted := 0
	for _, s := range AllStates() {
		for _, typ := range events.AllTypes() {
			i, e := prepare(t, s, typ)
			if err := e.Validate(); err != nil {
				t.Fatalf("fixture %s: %v", typ, err)
			}
			err := i.Apply(e)
			if allowed(s, typ) {
				if err != nil {
					t.Errorf("%s in %s: want accepted, got %v", typ, s, err)
					continue
				}
				want, _ := target(s, typ)
				if i.State != want {
					t.Errorf("%s in %s: landed in %s, table says %s", typ, s, i.State, want)
				}
				accepted++
				continue
			}
			var te *TransitionError
			if !errors.As(err, &te) || !errors.Is(err, ErrIllegalTransition) || te.State != s || te.Type != typ {
				t.Errorf("%s in %s: want illegal transition, got %v", typ, s, err)
			}
			if i.Can(typ) {
				t.Errorf("Can(%s) in %s is true for a refused pair", typ, s)
			}
		}
	}
	n := 0
	for _, tr := range Transitions {
		n += len(tr.From)
	}
	if accepted != n {
		t.Fatalf("accepted %d pairs, table has %d", accepted, n)
	}
}

func TestTerminalStatesAcceptNothing(t *testing.T) {
	if !Confirmed.Terminal() || Abandoned.Terminal() {
		t.Fatal("confirmed is terminal; abandoned is not (a late-proven effect is recorded on it)")
	}
	for _, typ := range events.AllTypes() {
		if allowed(Confirmed, typ) {
			t.Errorf("confirmed allows %s", typ)
		}
		if allowed(Abandoned, typ) != (typ == events.OperatorConfirmed) {
			t.Errorf("abandoned: %s allowed=%v", typ, allowed(Abandoned, typ))
		}
	}
}

func TestEveryTypeAndStateIsUsed(t *testing.T) {
	used := map[events.Type]bool{}
	for _, tr := range Transitions {
		used[tr.Type] = true
	}
	for _, typ := range events.AllTypes() {
		if !used[typ] {
			t.Errorf("event type %s has no transition", typ)
		}
	}
	if len(AllStates()) != 16 {
		t.Errorf("states: %v", AllStates())
	}
}

// target returns the state t leads to from s, or false when illegal.
func target(s State, t events.Type) (State, bool) {
	for _, tr := range Transitions {
		if tr.Type != t {
			continue
		}
		for _, f := range tr.From {
			if f == s {
				return tr.To, true
			}
		}
	}
	return "", false
}
