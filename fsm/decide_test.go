package fsm

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
)

// Capability profiles a route can have.
var capProfiles = map[string]events.Capabilities{
	"search":            {Search: true, SearchAuthoritative: true},
	"search-unmapped":   {Search: true},
	"search+marker":     {Search: true, SearchAuthoritative: true, Correlation: true},
	"search+key":        {Search: true, SearchAuthoritative: true, IdempotencyKey: true, KeyRetention: events.Duration(24 * time.Hour)},
	"status+key":        {StatusQuery: true, ReflectionDelay: events.Duration(5 * time.Second), IdempotencyKey: true, KeyRetention: events.Duration(24 * time.Hour)},
	"status-no-key":     {StatusQuery: true, ReflectionDelay: events.Duration(5 * time.Second)},
	"status+key+marker": {StatusQuery: true, ReflectionDelay: events.Duration(5 * time.Second), IdempotencyKey: true, KeyRetention: events.Duration(24 * time.Hour), Correlation: true},
	"status+short-key":  {StatusQuery: true, IdempotencyKey: true, KeyRetention: events.Duration(10 * time.Minute)},
	"key-unknown-ttl":   {StatusQuery: true, IdempotencyKey: true},
	"none":              {},
	"none+key(legacy?)": {IdempotencyKey: true, KeyRetention: events.Duration(time.Hour)},
}

type policyProfile struct {
	first, retry string
	expires      bool
}

var policyProfiles = []policyProfile{
	{"auto", "auto", false}, {"auto", "approval", false}, {"auto", "never", false},
	{"approval", "auto", false}, {"auto", "auto", true}, {"approval", "approval", true},
}

// sb builds the history of a strict intent (capabilities frozen).
type sb struct {
	h  []events.Event
	at time.Time
}

func newStrict(caps events.Capabilities, pp policyProfile) *sb {
	p := autoPolicy()
	p.FirstWrite, p.Retry = pp.first, pp.retry
	p.ResendBudget = 3
	p.ClockSkew = events.Duration(time.Second)
	e := recorded(p)
	d := e.Data.(*events.IntentRecordedData)
	c := caps
	d.Caps = &c
	if pp.expires {
		d.ExpiresAt = t0.Add(10 * time.Minute)
	}
	return &sb{h: []events.Event{e}, at: t0}
}

func (b *sb) id() string { return b.h[0].IntentID }

func (b *sb) add(attempt int, d events.Data) *sb {
	b.at = b.at.Add(time.Second)
	aid := ""
	if attempt > 0 {
		aid = events.AttemptID(b.id(), attempt)
	}
	b.h = append(b.h, events.New(b.id(), uint64(len(b.h)+1), b.at, "test", aid, d))
	return b
}

// tableRequest is the request every attempt of the table's histories
// records (a retry sends its first attempt's).
var tableRequest = &events.SentRequest{Method: "POST", Path: "/posts", ContentType: "application/json", Body: `{"body":"hello"}`}

func (b *sb) start(n int, owner string) *sb {
	return b.add(n, &events.WriteStartedData{Attempt: n, IdempotencyKey: events.IdempotencyKey(b.id()), Deadline: b.at.Add(time.Minute + time.Second), ClaimOwner: owner,
		Request: tableRequest})
}

// histories returns, for one capability and policy profile, a history that
// reaches each state (several for some), or nil where the profile cannot.
func histories(caps events.Capabilities, pp policyProfile) map[string][]events.Event {
	out := map[string][]events.Event{}
	try := func(name string, f func(b *sb)) {
		b := newStrict(caps, pp)
		f(b)
		if _, err := Fold(b.h); err == nil {
			out[name] = b.h
		}
	}
	firstWrite := func(b *sb) {
		if pp.first == events.PolicyApproval {
			b.add(0, &events.ApprovalRequiredData{For: "first_write", Reason: "r"}).add(0, &events.ApprovedData{Operator: "op"})
		}
		b.start(1, "")
	}
	unknown := func(b *sb) { firstWrite(b); b.add(1, &events.OutcomeUnknownData{Code: "timeout_after_send"}) }
	reconciling := func(b *sb, owner string) {
		unknown(b)
		b.add(0, &events.ReconcileStartedData{Worker: owner, LeaseUntil: b.at.Add(30 * time.Second), Strategy: StrategyOf(caps), Check: 1})
	}
	notFoundBy := func(b *sb, d events.Data) { reconciling(b, "me"); b.add(0, d) }
	searchNF := &events.SearchWindowElapsedData{WindowTo: t0.Add(time.Hour)}
	statusNF := &events.StatusNotFoundData{Queried: "status"}

	try("recorded", func(b *sb) {})
	try("awaiting_approval", func(b *sb) { b.add(0, &events.ApprovalRequiredData{For: "first_write", Reason: "r"}) })
	try("approved(first)", func(b *sb) {
		b.add(0, &events.ApprovalRequiredData{For: "first_write", Reason: "r"}).add(0, &events.ApprovedData{Operator: "op"})
	})
	try("write_started", func(b *sb) { firstWrite(b) })
	try("verifying(response)", func(b *sb) { firstWrite(b); b.add(1, &events.WriteSucceededData{ExternalID: "p_1"}) })
	try("confirmed", func(b *sb) {
		firstWrite(b)
		b.add(1, &events.WriteConfirmedData{Receipt: events.Receipt{ExternalID: "p_1", Source: "response", PayloadSHA256: b.h[0].Data.(*events.IntentRecordedData).PayloadSHA256}})
	})
	try("rejected(retryable)", func(b *sb) {
		firstWrite(b)
		b.add(1, &events.WriteRejectedData{Code: "http_retryable", StatusCode: 429, Retryable: true})
	})
	try("rejected(definite)", func(b *sb) {
		firstWrite(b)
		b.add(1, &events.WriteRejectedData{Code: "http_rejected", StatusCode: 400})
	})
	try("rejected(retry-after)", func(b *sb) {
		firstWrite(b)
		b.add(1, &events.WriteRejectedData{Code: "http_retryable", StatusCode: 429, Retryable: true, RetryAfter: events.Duration(10 * time.Minute)})
	})
	try("rejected(key reused)", func(b *sb) {
		firstWrite(b)
		b.add(1, &events.WriteRejectedData{Code: events.CodeKeyReused, StatusCode: 400, Retryable: true})
	})
	try("unknown", unknown)
	try("unknown(proven)", func(b *sb) {
		firstWrite(b)
		b.add(1, &events.WriteSucceededData{ExternalID: "p_1"}).add(0, &events.CheckDeferredData{Reason: "readback_not_visible", NextCheckAt: b.at})
	})
	try("unknown(proven, checked after its window)", func(b *sb) {
		firstWrite(b)
		b.add(1, &events.WriteSucceededData{ExternalID: "p_1"})
		b.at = b.at.Add(48 * time.Hour)
		b.add(0, &events.CheckDeferredData{Reason: "readback_not_visible", NextCheckAt: b.at.Add(time.Hour)})
	})
	try("reconciling(mine)", func(b *sb) { reconciling(b, "me") })
	try("reconciling(theirs)", func(b *sb) { reconciling(b, "other") })
	try("in_progress", func(b *sb) {
		reconciling(b, "me")
		b.add(0, &events.TargetProcessingData{Poll: 1, NextCheckAt: b.at.Add(time.Second), Deadline: b.at.Add(time.Hour)})
	})
	try("not_found(search)", func(b *sb) { notFoundBy(b, searchNF) })
	try("not_found(status)", func(b *sb) { notFoundBy(b, statusNF) })
	try("not_found(after reject)", func(b *sb) {
		// A retryable rejection, a resend that timed out, then not found.
		firstWrite(b)
		b.add(1, &events.WriteRejectedData{Code: "connection_refused", Retryable: true})
		if pp.retry == events.PolicyApproval {
			b.add(0, &events.ApprovalRequiredData{For: "retry", Reason: "r"}).add(0, &events.ApprovedData{Operator: "op"})
		}
		b.add(0, &events.RetryClaimedData{Owner: "me", LeaseUntil: b.at.Add(time.Minute), Attempt: 2}).start(2, "me").
			add(2, &events.OutcomeUnknownData{Code: "timeout_after_send"}).
			add(0, &events.ReconcileStartedData{Worker: "me", LeaseUntil: b.at.Add(30 * time.Second), Strategy: StrategyOf(caps), Check: 1}).
			add(0, searchNF)
	})
	try("verifying(found)", func(b *sb) {
		reconciling(b, "me")
		b.add(0, &events.CandidateFoundData{ExternalID: "p_1", Source: "search", CorrelationID: b.id()})
	})
	try("failed(partial)", func(b *sb) {
		reconciling(b, "me")
		b.add(0, &events.TargetFailedData{Code: "x", PartialEffects: []string{"seat held"}})
	})
	try("failed", func(b *sb) { reconciling(b, "me"); b.add(0, &events.TargetFailedData{Code: "x"}) })
	try("manual_action", func(b *sb) {
		unknown(b)
		b.add(0, &events.ManualActionRequiredData{Reason: events.ReasonNoQueryNoDedup})
	})
	try("abandoned", func(b *sb) { b.add(0, &events.AbandonedData{By: "op"}) })
	try("awaiting_approval(retry)", func(b *sb) {
		notFoundBy(b, searchNF)
		b.add(0, &events.ApprovalRequiredData{For: "retry", Reason: "r"})
	})
	try("approved(retry)", func(b *sb) {
		notFoundBy(b, searchNF)
		b.add(0, &events.ApprovalRequiredData{For: "retry", Reason: "r"}).add(0, &events.ApprovedData{Operator: "op"})
	})
	try("retry_claimed(mine)", func(b *sb) {
		firstWrite(b)
		b.add(1, &events.WriteRejectedData{Code: "connection_refused", Retryable: true})
		if pp.retry == events.PolicyApproval {
			b.add(0, &events.ApprovalRequiredData{For: "retry", Reason: "r"}).add(0, &events.ApprovedData{Operator: "op"})
		}
		b.add(0, &events.RetryClaimedData{Owner: "me", LeaseUntil: b.at.Add(time.Minute), Attempt: 2})
	})
	return out
}

func testDecider() Decider {
	d := DefaultDecider("me")
	d.Jitter = func(limit time.Duration) time.Duration { return limit / 2 }
	return d
}

// Every state × capability profile × policy profile, at several times:
// the decision is deterministic, never mutates the intent, is always
// accepted by the guards, and never breaks a safety rule.
func TestDecisionTableEveryStateCapabilityPolicy(t *testing.T) {
	d := testDecider()
	statesSeen := map[State]bool{}
	rows := 0
	for capName, caps := range capProfiles {
		for _, pp := range policyProfiles {
			for name, h := range histories(caps, pp) {
				i, err := Fold(h)
				if err != nil {
					t.Fatal(err)
				}
				statesSeen[i.State] = true
				for _, dt := range []time.Duration{0, 30 * time.Second, 3 * time.Minute, 9*time.Minute + 30*time.Second, 20 * time.Minute, 2 * time.Hour, 48 * time.Hour} {
					rows++
					now := i.UpdatedAt.Add(dt)
					label := fmt.Sprintf("%s/%s/%+v/+%s", name, capName, pp, dt)
					before := i.Clone()
					s := d.Next(i, caps, now)
					if !reflect.DeepEqual(i, before) {
						t.Fatalf("%s: Next mutated the intent", label)
					}
					if again := d.Next(i, caps, now); !reflect.DeepEqual(s, again) {
						t.Fatalf("%s: Next is not deterministic: %+v then %+v", label, s, again)
					}
					checkStepSafe(t, label, i, now, s)
				}
			}
		}
	}
	for _, st := range AllStates() {
		if st != None && !statesSeen[st] {
			t.Errorf("no row reaches state %s", st)
		}
	}
	t.Logf("%d rows", rows)
}

// checkStepSafe applies the step's event to a copy: the guards must accept
// it, and it must keep every safety rule.
func checkStepSafe(t *testing.T, label string, i *Intent, now time.Time, s Step) {
	t.Helper()
	if s.Kind != StepAppend && s.Kind != StepWrite {
		if s.Kind == StepWait && !s.At.After(now) && !s.At.Equal(now) {
			t.Fatalf("%s: waits until %s, before now %s", label, s.At, now)
		}
		return
	}
	e := events.New(i.ID, i.Version+1, now, "me", s.AttemptID, s.Event)
	if err := e.Validate(); err != nil {
		t.Fatalf("%s: the decided %s is invalid: %v", label, e.Type, err)
	}
	next := i.Clone()
	if err := next.Apply(e); err != nil {
		t.Fatalf("%s: the guards refuse the decided %s: %v", label, e.Type, err)
	}
	switch e.Type {
	case events.WriteStarted, events.RetryClaimed:
		if i.Expired(now) {
			t.Fatalf("%s: %s after expiry", label, e.Type)
		}
		if i.WriteProven {
			t.Fatalf("%s: %s after a proven write", label, e.Type)
		}
		if e.Type == events.RetryClaimed && i.RiskyAttempts() {
			kv := i.KeyValidUntil()
			lease := s.Event.(*events.RetryClaimedData).LeaseUntil
			attemptBy := lease.Add(i.Recorded.Policy.AttemptDeadline.D() + i.Recorded.Policy.ClockSkew.D())
			if kv.IsZero() || !lease.After(now) || attemptBy.After(kv) {
				t.Fatalf("%s: a retry without a dedup proof: its attempt may reach the API until %s, the key is valid until %s", label, attemptBy, kv)
			}
		}
	case events.SearchWindowElapsed, events.StatusNotFound:
		if i.WriteProven {
			t.Fatalf("%s: a proven write declared not found", label)
		}
	}
	if ws, ok := s.Event.(*events.WriteStartedData); ok && i.SentRequest() != nil && !ws.Request.Equal(i.SentRequest()) {
		t.Fatalf("%s: attempt %d does not send the request its first attempt recorded", label, ws.Attempt)
	}
	if (e.Type == events.RetryClaimed || e.Type == events.WriteStarted && i.State == RetryClaimed) && now.Before(i.RetryNotBefore) {
		t.Fatalf("%s: %s before the API's Retry-After (%s)", label, e.Type, i.RetryNotBefore)
	}
	if r := i.LastRejection; i.State == Rejected && r != nil && r.Code == events.CodeKeyReused &&
		(e.Type == events.RetryClaimed || e.Type == events.ApprovalRequired || e.Type == events.Abandoned) {
		t.Fatalf("%s: a key-reused answer treated as a rejection: %s", label, e.Type)
	}
}

// Specific decisions at the edges of exactly once.
func TestDecisions(t *testing.T) {
	d := testDecider()
	search, statusNoKey, statusKey := capProfiles["search"], capProfiles["status-no-key"], capProfiles["status+key"]
	auto := policyProfile{"auto", "auto", false}
	cases := []struct {
		name   string
		caps   events.Capabilities
		pp     policyProfile
		hist   string
		after  time.Duration
		kind   StepKind
		event  events.Type
		reason events.ManualReason
	}{
		{"proven write, window closed, not read since: read back once more", search, auto, "unknown(proven)", 48 * time.Hour, StepAppend, events.ReconcileStarted, ""},
		{"retry after a proven write: never (read back after its window, not verified)", search, auto, "unknown(proven, checked after its window)", time.Second, StepAppend, events.ManualActionRequired, events.ReasonWrittenUnverified},
		{"proven write inside its window: read back", search, auto, "unknown(proven)", time.Minute, StepAppend, events.ReconcileStarted, ""},
		{"status not found, no key: no retry", statusNoKey, auto, "not_found(status)", time.Minute, StepAppend, events.ManualActionRequired, events.ReasonNoDedupProof},
		{"status not found, key in retention: retry", statusKey, auto, "not_found(status)", time.Minute, StepAppend, events.RetryClaimed, ""},
		{"status not found, key expired: no retry", statusKey, auto, "not_found(status)", 48 * time.Hour, StepAppend, events.ManualActionRequired, events.ReasonKeyRetentionExpired},
		{"unmapped search: no retry", capProfiles["search-unmapped"], auto, "not_found(search)", time.Minute, StepAppend, events.ManualActionRequired, events.ReasonNoDedupProof},
		{"authoritative search: retry", search, auto, "not_found(search)", time.Minute, StepAppend, events.RetryClaimed, ""},
		{"expired recorded intent: abandoned", search, policyProfile{"auto", "auto", true}, "recorded", time.Hour, StepAppend, events.Abandoned, ""},
		{"expired approval: abandoned", search, policyProfile{"approval", "approval", true}, "approved(first)", time.Hour, StepAppend, events.Abandoned, ""},
		{"expired retryable rejection: abandoned", search, policyProfile{"auto", "auto", true}, "rejected(retryable)", time.Hour, StepAppend, events.Abandoned, ""},
		{"retryable rejection: resend after backoff", search, auto, "rejected(retryable)", time.Hour, StepAppend, events.RetryClaimed, ""},
		{"retryable rejection: wait for the backoff", search, auto, "rejected(retryable)", 0, StepWait, "", ""},
		{"definite rejection: done", search, auto, "rejected(definite)", time.Hour, StepDone, "", ""},
		{"own claim: write", search, auto, "retry_claimed(mine)", 0, StepWrite, events.WriteStarted, ""},
		{"own lease: reconcile", search, auto, "reconciling(mine)", 0, StepReconcile, "", ""},
		{"foreign lease: wait", search, auto, "reconciling(theirs)", 0, StepWait, "", ""},
		{"foreign lease expired: defer", search, auto, "reconciling(theirs)", time.Minute, StepAppend, events.CheckDeferred, ""},
		{"no query, no dedup: hand off", capProfiles["none"], policyProfile{"auto", "never", false}, "unknown", 0, StepAppend, events.ManualActionRequired, events.ReasonNoQueryNoDedup},
		{"partial effects: hand off", statusKey, auto, "failed(partial)", 0, StepAppend, events.ManualActionRequired, events.ReasonPartialEffects},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, ok := histories(c.caps, c.pp)[c.hist]
			if !ok {
				t.Fatalf("no history %s", c.hist)
			}
			i, err := Fold(h)
			if err != nil {
				t.Fatal(err)
			}
			s := d.Next(i, c.caps, i.UpdatedAt.Add(c.after))
			if s.Kind != c.kind {
				t.Fatalf("step %s (%s), want %s", s.Kind, s.Why, c.kind)
			}
			if c.event != "" && (s.Event == nil || s.Event.EventType() != c.event) {
				t.Fatalf("event %v, want %s", s.Event, c.event)
			}
			if c.reason != "" && s.Event.(*events.ManualActionRequiredData).Reason != c.reason {
				t.Fatalf("reason %q, want %q", s.Event.(*events.ManualActionRequiredData).Reason, c.reason)
			}
		})
	}
}

func cand(i *Intent, mod func(*Candidate)) Candidate {
	c := Candidate{ExternalID: "p_9", AuthorID: i.Recorded.Account, ParentID: i.Recorded.ParentExternalID,
		PayloadSHA256: i.Recorded.PayloadSHA256, CreatedAt: i.Attempts[0].StartedAt.Add(time.Second), CorrelationID: i.ID, Visibility: "public"}
	if mod != nil {
		mod(&c)
	}
	return c
}

func TestConcludeSearch(t *testing.T) {
	d := testDecider()
	caps := capProfiles["search"]
	i, err := Fold(histories(caps, policyProfile{"auto", "auto", false})["reconciling(mine)"])
	if err != nil {
		t.Fatal(err)
	}
	_, to := Window(i)
	open, closed := i.UpdatedAt, to.Add(time.Second)
	cases := []struct {
		name   string
		now    time.Time
		caps   events.Capabilities
		cands  []Candidate
		want   events.Type
		reason events.ManualReason
	}{
		{"one exact", open, caps, []Candidate{cand(i, nil)}, events.CandidateFound, ""},
		{"two exact", open, caps, []Candidate{cand(i, nil), cand(i, func(c *Candidate) { c.ExternalID = "p_8" })}, events.ManualActionRequired, events.ReasonDuplicateExactMatches},
		{"none, window open", open, caps, nil, events.CheckDeferred, ""},
		{"none, window closed", closed, caps, nil, events.SearchWindowElapsed, ""},
		{"author only differs", closed, caps, []Candidate{cand(i, func(c *Candidate) { c.AuthorID = "u_other" })}, events.ManualActionRequired, events.ReasonNearMatch},
		{"parent only differs", closed, caps, []Candidate{cand(i, func(c *Candidate) { c.ParentID = "p_other" })}, events.ManualActionRequired, events.ReasonNearMatch},
		{"damaged copy", closed, caps, []Candidate{cand(i, func(c *Candidate) { c.PayloadSHA256, c.Resembles = "x", true })}, events.ManualActionRequired, events.ReasonNearMatch},
		{"unrelated payload", closed, caps, []Candidate{cand(i, func(c *Candidate) { c.PayloadSHA256 = "x" })}, events.SearchWindowElapsed, ""},
		{"pre-existing look-alike", open, caps, []Candidate{cand(i, func(c *Candidate) { c.CreatedAt = i.Attempts[0].StartedAt.Add(-20 * time.Second) })}, events.CheckDeferred, ""},
		{"pre-existing look-alike, window closed", closed, caps, []Candidate{cand(i, func(c *Candidate) { c.CreatedAt = i.Attempts[0].StartedAt.Add(-20 * time.Second) })}, events.SearchWindowElapsed, ""},
		{"inside the skew, no marker: ambiguous", open, caps, []Candidate{cand(i, func(c *Candidate) { c.CreatedAt = i.Attempts[0].StartedAt.Add(-500 * time.Millisecond) })}, events.ManualActionRequired, events.ReasonAmbiguousMatch},
		{"inside the skew, marker names us", open, capProfiles["search+marker"], []Candidate{cand(i, func(c *Candidate) { c.CreatedAt = i.Attempts[0].StartedAt.Add(-500 * time.Millisecond) })}, events.CandidateFound, ""},
		{"inside the skew beside an exact match, no marker", open, caps, []Candidate{cand(i, nil), cand(i, func(c *Candidate) {
			c.ExternalID, c.CreatedAt = "p_8", i.Attempts[0].StartedAt.Add(-500*time.Millisecond)
		})}, events.ManualActionRequired, events.ReasonDuplicateExactMatches},
		{"payload equal under the route's normalisations", open, caps, []Candidate{cand(i, func(c *Candidate) { c.PayloadSHA256, c.Normalised = "x", []string{"entities"} })}, events.CandidateFound, ""},
		{"marker names us, payload differs", open, capProfiles["search+marker"], []Candidate{cand(i, func(c *Candidate) { c.PayloadSHA256 = "x" })}, events.ManualActionRequired, events.ReasonWrittenModified},
		{"exact without external id", open, caps, []Candidate{cand(i, func(c *Candidate) { c.ExternalID = "" })}, events.ManualActionRequired, events.ReasonNoExternalID},
		{"marker names us", open, capProfiles["search+marker"], []Candidate{cand(i, nil)}, events.CandidateFound, ""},
		{"marker names another intent", closed, capProfiles["search+marker"], []Candidate{cand(i, func(c *Candidate) { c.CorrelationID = "in_other" })}, events.SearchWindowElapsed, ""},
		{"marker missing", closed, capProfiles["search+marker"], []Candidate{cand(i, func(c *Candidate) { c.CorrelationID = "" })}, events.ManualActionRequired, events.ReasonNearMatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := d.ConcludeSearch(i, c.caps, c.now, c.now, c.cands)
			if ev.EventType() != c.want {
				t.Fatalf("got %s %+v, want %s", ev.EventType(), ev, c.want)
			}
			if c.reason != "" && ev.(*events.ManualActionRequiredData).Reason != c.reason {
				t.Fatalf("reason %q", ev.(*events.ManualActionRequiredData).Reason)
			}
			e := events.New(i.ID, i.Version+1, c.now, "me", "", ev)
			if err := i.Clone().Apply(e); err != nil && reflect.DeepEqual(c.caps, caps) {
				t.Fatalf("guards refuse the conclusion: %v", err)
			}
		})
	}
	// Evidence stays bounded however many candidates a search returns.
	many := make([]Candidate, 500)
	for k := range many {
		many[k] = cand(i, func(c *Candidate) { c.PayloadSHA256, c.ExternalID = "x", fmt.Sprintf("p_%d", k) })
	}
	ev := d.ConcludeSearch(i, caps, closed, closed, many).(*events.SearchWindowElapsedData)
	if len(ev.Candidates) != d.MaxCandidates || ev.CandidatesOmitted != 500-d.MaxCandidates {
		t.Fatalf("%d candidates, %d omitted", len(ev.Candidates), ev.CandidatesOmitted)
	}
}

// A comment on a pull request: the API leaves the field the route reads
// the parent from empty. With a marker naming the intent, that is no
// difference (found, and its readback passes, saying what was read);
// without one, the object cannot be told ours (a near match). Neither is
// "edited after the write".
func TestParentReadEmpty(t *testing.T) {
	d := testDecider()
	base := foldAuto(t, capProfiles["search+marker"], "reconciling(mine)")
	i := base.Clone()
	i.Recorded.ParentExternalID = "5"
	empty := func(c *Candidate) {
		c.ParentID, c.ParentFrom, c.LiveURL = "", "$.issue_url", "https://example.test/p_9"
	}
	_, to := Window(i)
	ev := d.ConcludeSearch(i, capProfiles["search+marker"], i.UpdatedAt, i.UpdatedAt, []Candidate{cand(i, empty)})
	if ev.EventType() != events.CandidateFound {
		t.Fatalf("marker route: %s %+v, want CandidateFound", ev.EventType(), ev)
	}
	rb := d.ConcludeReadback(i, capProfiles["search+marker"], i.UpdatedAt, Readback{Found: true, Object: cand(i, empty), ProbeStatus: 200})
	passed, ok := rb.(*events.ReadbackPassedData)
	if !ok {
		t.Fatalf("readback: %s %+v, want ReadbackPassed", rb.EventType(), rb)
	}
	for _, c := range passed.Receipt.Checks {
		if c.Name == "parent" && !strings.Contains(c.Detail, "parent read as empty from $.issue_url") {
			t.Fatalf("parent check says %q", c.Detail)
		}
	}
	ev = d.ConcludeSearch(i, capProfiles["search"], to.Add(time.Second), to.Add(time.Second), []Candidate{cand(i, empty)})
	m, ok := ev.(*events.ManualActionRequiredData)
	if !ok || m.Reason != events.ReasonNearMatch || !strings.Contains(m.Message, "parent read as empty from $.issue_url") {
		t.Fatalf("no marker: %+v, want a near match saying the parent was read empty", ev)
	}
	if strings.Contains(m.Message, "edited") {
		t.Fatalf("the hand-off names a cause it did not see: %s", m.Message)
	}
}

// Two objects match exactly and settle made one attempt: the hand-off
// never says the write executed more than once, and names each object
// with its creation time against the first attempt.
func TestDuplicatesSayWhatWasSeen(t *testing.T) {
	d := testDecider()
	i := foldAuto(t, capProfiles["search"], "reconciling(mine)")
	two := []Candidate{cand(i, nil), cand(i, func(c *Candidate) { c.ExternalID, c.CreatedAt = "p_8", i.Attempts[0].StartedAt.Add(2*time.Minute) })}
	m := d.ConcludeSearch(i, capProfiles["search"], i.UpdatedAt, i.UpdatedAt, two).(*events.ManualActionRequiredData)
	if m.Reason != events.ReasonDuplicateExactMatches || strings.Contains(m.Message, "more than once") || !strings.Contains(m.Message, "one attempt") {
		t.Fatalf("one attempt, two objects: %s %q", m.Reason, m.Message)
	}
	if c := m.Evidence.Candidates[1]; c.FromFirstAttempt != "+2m0s" || c.Author != i.Recorded.Account {
		t.Fatalf("candidate evidence %+v", c)
	}
}

func TestConcludeStatusAndReads(t *testing.T) {
	d := testDecider()
	caps := capProfiles["status+key"]
	i, err := Fold(histories(caps, policyProfile{"auto", "auto", false})["reconciling(mine)"])
	if err != nil {
		t.Fatal(err)
	}
	now := i.UpdatedAt
	if ev := d.ConcludeStatus(i, caps, now, StatusObservation{Found: true, State: StatusCompleted}); ev.EventType() != events.ManualActionRequired ||
		ev.(*events.ManualActionRequiredData).Reason != events.ReasonNoExternalID {
		t.Fatalf("completed without id: %+v", ev)
	}
	if ev := d.ConcludeStatus(i, caps, now, StatusObservation{Found: true, State: "weird"}); ev.EventType() != events.CheckDeferred {
		t.Fatalf("unknown state: %+v", ev)
	}
	if ev := d.ConcludeStatus(i, caps, i.Attempts[0].StartedAt, StatusObservation{}); ev.EventType() != events.CheckDeferred {
		t.Fatalf("not found inside the reflection delay: %+v", ev)
	}
	if ev := d.ConcludeStatus(i, caps, now.Add(time.Minute), StatusObservation{}); ev.EventType() != events.StatusNotFound {
		t.Fatalf("not found after it: %+v", ev)
	}
	// Failing reads: deferred, then handed off after the bound with the
	// last errors.
	ev := d.ConcludeReadError(i, caps, now, "status", "http_ambiguous (HTTP 500)").(*events.CheckDeferredData)
	if ev.Reason != events.DeferReadFailed || ev.Error == "" {
		t.Fatalf("%+v", ev)
	}
	j := i.Clone()
	j.ReadFailingSince = now.Add(-16 * time.Minute)
	j.ReadErrors = []string{"a", "b", "c"}
	m, ok := d.ConcludeReadError(j, caps, now, "status", "timeout").(*events.ManualActionRequiredData)
	if !ok || m.Reason != events.ReasonReadFailing || len(m.Evidence.Errors) != 4 || m.Evidence.Errors[3] != "status: timeout" {
		t.Fatalf("%+v", m)
	}
}

func TestConcludeReadback(t *testing.T) {
	d := testDecider()
	caps := capProfiles["search"]
	i, err := Fold(histories(caps, policyProfile{"auto", "auto", false})["verifying(found)"])
	if err != nil {
		t.Fatal(err)
	}
	now := i.UpdatedAt
	good := cand(i, func(c *Candidate) { c.LiveURL, c.ExternalID = "https://x/p_1", i.ExternalID })
	if ev := d.ConcludeReadback(i, caps, now, Readback{Found: true, Object: good, ProbeStatus: 200}); ev.EventType() != events.ReadbackPassed {
		t.Fatalf("%+v", ev)
	} else if err := i.Clone().Apply(events.New(i.ID, i.Version+1, now, "me", "", ev)); err != nil {
		t.Fatal(err)
	}
	old := cand(i, func(c *Candidate) {
		c.LiveURL, c.ExternalID, c.CreatedAt = "https://x/p_1", i.ExternalID, t0.Add(-time.Hour)
	})
	if ev, ok := d.ConcludeReadback(i, caps, now, Readback{Found: true, Object: old, ProbeStatus: 200}).(*events.ReadbackFailedData); !ok || !strings.Contains(strings.Join(ev.Failed, ","), "created") {
		t.Fatalf("pre-existing object read back: %+v", ev)
	}
	if ev := d.ConcludeReadback(i, caps, now, Readback{}); ev.EventType() != events.CheckDeferred {
		t.Fatalf("%+v", ev)
	}
}

// The safety rules hold in the guards too: a caller that appended around
// the decision function is refused.
func TestStrictGuards(t *testing.T) {
	search, unmapped, statusNoKey, statusKey := capProfiles["search"], capProfiles["search-unmapped"], capProfiles["status-no-key"], capProfiles["status+key"]
	auto := policyProfile{"auto", "auto", false}
	build := func(caps events.Capabilities, pp policyProfile, base string, extra func(b *sb)) []events.Event {
		h := histories(caps, pp)[base]
		if h == nil {
			t.Fatalf("no history %s", base)
		}
		b := &sb{h: append([]events.Event(nil), h...), at: h[len(h)-1].At}
		extra(b)
		return b.h
	}
	claim := func(lease time.Duration) func(b *sb) {
		return func(b *sb) { b.add(0, &events.RetryClaimedData{Owner: "me", LeaseUntil: b.at.Add(lease), Attempt: 2}) }
	}
	cases := []struct {
		name string
		h    []events.Event
		want string // "" = accepted
	}{
		{"retry after a proven write", build(search, auto, "unknown(proven)", func(b *sb) {
			b.add(0, &events.ReconcileStartedData{Worker: "me", LeaseUntil: b.at.Add(time.Minute), Strategy: "search", Check: 1}).
				add(0, &events.SearchWindowElapsedData{WindowTo: b.at})
		}), "never not_found"},
		{"status not found alone licenses nothing", build(statusNoKey, auto, "not_found(status)", claim(time.Minute)), "dedup proof"},
		{"unmapped search licenses nothing", build(unmapped, auto, "not_found(search)", claim(time.Minute)), "dedup proof"},
		{"authoritative search licenses a retry", build(search, auto, "not_found(search)", claim(time.Minute)), ""},
		{"key inside its retention licenses a retry", build(statusKey, auto, "not_found(status)", claim(time.Minute)), ""},
		{"claim outliving the key", build(capProfiles["status+short-key"], auto, "not_found(status)", claim(time.Hour)), "retention"},
		{"write after expiry", build(search, policyProfile{"auto", "auto", true}, "recorded", func(b *sb) { b.at = b.at.Add(time.Hour); b.start(1, "") }), "expired"},
		{"claim after expiry", build(search, policyProfile{"auto", "auto", true}, "rejected(retryable)", func(b *sb) {
			b.at = b.at.Add(time.Hour)
			claim(time.Minute)(b)
		}), "expired"},
		{"pre-existing candidate", build(search, auto, "reconciling(mine)", func(b *sb) {
			b.add(0, &events.CandidateFoundData{ExternalID: "p_1", Source: "search", CreatedAt: t0.Add(-time.Minute)})
		}), "before the intent's first attempt"},
		{"candidate naming another intent", build(capProfiles["search+marker"], auto, "reconciling(mine)", func(b *sb) {
			b.add(0, &events.CandidateFoundData{ExternalID: "p_1", Source: "search", CorrelationID: "in_other"})
		}), "correlation"},
		{"readback without the declared checks", build(search, auto, "verifying(found)", func(b *sb) {
			b.add(0, &events.ReadbackPassedData{Receipt: events.Receipt{ExternalID: "p_1", Source: "x", PayloadSHA256: b.h[0].Data.(*events.IntentRecordedData).PayloadSHA256}})
		}), "check"},
		{"claim expired exactly at its lease end", build(search, auto, "retry_claimed(mine)", func(b *sb) {
			lease := b.h[len(b.h)-1].Data.(*events.RetryClaimedData).LeaseUntil
			b.at = lease.Add(-time.Second)
			b.add(0, &events.ClaimExpiredData{Owner: "me", LeaseUntil: lease})
		}), ""},
		{"write at its claim's lease end", build(search, auto, "retry_claimed(mine)", func(b *sb) {
			lease := b.h[len(b.h)-1].Data.(*events.RetryClaimedData).LeaseUntil
			b.at = lease.Add(-time.Second)
			b.start(2, "me")
		}), "lease expired"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Fold(c.h)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want a refusal containing %q, got %v", c.want, err)
			}
		})
	}
}

// A WriteRejected saying the key was already used (an adapter that
// classified it Rejected by mistake, or a log written before the rule) is
// never a proven rejection: the attempt stays risky, no resend follows,
// and the intent is handed off with the evidence.
func TestKeyReusedRejectionIsNeverProvenNotExecuted(t *testing.T) {
	d := testDecider()
	for _, capName := range []string{"search", "status-no-key", "status+key"} {
		caps := capProfiles[capName]
		b := newStrict(caps, policyProfile{"auto", "auto", false}).start(1, "")
		b.add(1, &events.WriteRejectedData{Code: events.CodeKeyReused, StatusCode: 400, Retryable: true, Message: "key reused"})
		i, err := Fold(b.h)
		if err != nil {
			t.Fatal(err)
		}
		if !i.RiskyAttempts() || !i.AnyEffectPossible() {
			t.Fatalf("%s: a key-reused answer left the attempt proven not executed", capName)
		}
		for _, after := range []time.Duration{0, time.Hour, 48 * time.Hour} {
			s := d.Next(i, caps, i.UpdatedAt.Add(after))
			m, ok := s.Event.(*events.ManualActionRequiredData)
			if s.Kind != StepAppend || !ok || m.Reason != events.ReasonKeyReused || len(m.Evidence.Attempts) != 1 {
				t.Fatalf("%s +%s: %s %+v, want a hand-off %s", capName, after, s.Kind, s.Event, events.ReasonKeyReused)
			}
			checkStepSafe(t, capName, i, i.UpdatedAt.Add(after), s)
		}
		// Appending around the decision: a claim is a retry after an
		// attempt that may have executed and needs a dedup proof.
		b.add(0, &events.RetryClaimedData{Owner: "me", LeaseUntil: b.at.Add(time.Minute), Attempt: 2})
		_, err = Fold(b.h)
		if caps.IdempotencyKey && err != nil {
			t.Fatalf("%s: a claim inside the key's retention refused: %v", capName, err)
		}
		if !caps.IdempotencyKey && !caps.SearchAuthoritative && (err == nil || !strings.Contains(err.Error(), "dedup proof")) {
			t.Fatalf("%s: a resend without a dedup proof accepted: %v", capName, err)
		}
	}
}

// A retry's claim needs the key valid for the attempt that follows it, not
// only for the claim: its lease plus the attempt deadline plus the clock
// skew allowance ends before the key's validity (otherwise a retry
// claimed near the key's end could reach the API after the key expired).
func TestRetryClaimCoversTheAttempt(t *testing.T) {
	d := testDecider()
	caps := capProfiles["status+short-key"] // 10 minutes, no margin
	h := histories(caps, policyProfile{"auto", "auto", false})["not_found(status)"]
	i, err := Fold(h)
	if err != nil {
		t.Fatal(err)
	}
	p := i.Recorded.Policy
	kv := i.KeyValidUntil()
	attempt := p.AttemptDeadline.D() + p.ClockSkew.D()
	// Early enough: a claim whose lease leaves room for the attempt.
	s := d.Next(i, caps, kv.Add(-attempt-10*time.Second))
	c, ok := s.Event.(*events.RetryClaimedData)
	if !ok || c.LeaseUntil.Add(attempt).After(kv) {
		t.Fatalf("claim %+v: its attempt may reach the API after the key's validity %s", s.Event, kv)
	}
	// Too late for an attempt, though the key is still valid: hand off.
	for _, before := range []time.Duration{attempt, attempt / 2, time.Second} {
		s := d.Next(i, caps, kv.Add(-before))
		m, ok := s.Event.(*events.ManualActionRequiredData)
		if !ok || m.Reason != events.ReasonKeyRetentionExpired {
			t.Fatalf("%s before the key's end: %s %+v, want a hand-off %s", before, s.Kind, s.Event, events.ReasonKeyRetentionExpired)
		}
	}
	// The guard holds the rule too.
	hh := append([]events.Event(nil), h...)
	hh = append(hh, events.New(hh[0].IntentID, uint64(len(hh)+1), kv.Add(-attempt), "me", "",
		&events.RetryClaimedData{Owner: "me", LeaseUntil: kv.Add(-time.Second), Attempt: 2}))
	if _, err := Fold(hh); err == nil || !strings.Contains(err.Error(), "attempt") {
		t.Fatalf("a claim whose attempt outlives the key: %v", err)
	}
}

// A candidate whose correlation marker names this intent (by the intent's
// account) is an effect of ours: never a retry, whatever its payload, its
// creation time or the pre-existing rule says. A
// drifted payload is handed off as written_modified with the candidate,
// on the search path and on the readback path alike.
func TestMarkerNamesThisIntent(t *testing.T) {
	d := testDecider()
	caps := capProfiles["search+marker"]
	auto := policyProfile{"auto", "auto", false}
	i := foldAuto(t, caps, "reconciling(mine)")
	_, to := Window(i)
	open, closed := i.UpdatedAt, to.Add(time.Second)
	edited := func(c *Candidate) { c.PayloadSHA256 = "x" }
	early := func(c *Candidate) { c.CreatedAt = i.Attempts[0].StartedAt.Add(-10 * time.Second) }
	both := func(c *Candidate) { edited(c); early(c) }
	cases := []struct {
		name   string
		now    time.Time
		cands  []Candidate
		want   events.Type
		reason events.ManualReason
	}{
		{"edited, window open", open, []Candidate{cand(i, edited)}, events.ManualActionRequired, events.ReasonWrittenModified},
		{"edited, window closed", closed, []Candidate{cand(i, edited)}, events.ManualActionRequired, events.ReasonWrittenModified},
		{"edited and early", closed, []Candidate{cand(i, both)}, events.ManualActionRequired, events.ReasonWrittenModified},
		{"moved to another parent", closed, []Candidate{cand(i, func(c *Candidate) { c.ParentID = "p_other" })}, events.ManualActionRequired, events.ReasonWrittenModified},
		{"API clock behind: looks pre-existing", open, []Candidate{cand(i, early)}, events.CandidateFound, ""},
		{"API clock behind, window closed", closed, []Candidate{cand(i, early)}, events.CandidateFound, ""},
		{"ours twice", open, []Candidate{cand(i, nil), cand(i, func(c *Candidate) { edited(c); c.ExternalID = "p_8" })}, events.ManualActionRequired, events.ReasonDuplicateExactMatches},
		{"our marker quoted by another author", closed, []Candidate{cand(i, func(c *Candidate) { c.AuthorID = "u_other" })}, events.ManualActionRequired, events.ReasonNearMatch},
		{"ours beside a quote by another author", open, []Candidate{cand(i, nil), cand(i, func(c *Candidate) { c.AuthorID, c.ExternalID = "u_other", "p_8" })}, events.CandidateFound, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := d.ConcludeSearch(i, caps, c.now, c.now, c.cands)
			if ev.EventType() != c.want {
				t.Fatalf("got %s %+v, want %s", ev.EventType(), ev, c.want)
			}
			if m, ok := ev.(*events.ManualActionRequiredData); ok {
				if m.Reason != c.reason || len(m.Evidence.Candidates) == 0 {
					t.Fatalf("reason %q, evidence %+v", m.Reason, m.Evidence)
				}
			}
			if err := i.Clone().Apply(events.New(i.ID, i.Version+1, c.now, "me", "", ev)); err != nil {
				t.Fatalf("guards refuse the conclusion: %v", err)
			}
		})
	}
	// The readback path agrees with the search path.
	v, err := Fold(histories(caps, auto)["verifying(found)"])
	if err != nil {
		t.Fatal(err)
	}
	obj := func(mod func(*Candidate)) Readback {
		c := cand(v, func(c *Candidate) { c.LiveURL, c.ExternalID = "https://x/p_1", v.ExternalID })
		if mod != nil {
			mod(&c)
		}
		return Readback{Found: true, Object: c, ProbeStatus: 200}
	}
	now := v.UpdatedAt
	if ev := d.ConcludeReadback(v, caps, now, obj(func(c *Candidate) { c.CreatedAt = v.Attempts[0].StartedAt.Add(-10 * time.Second) })); ev.EventType() != events.ReadbackPassed {
		t.Fatalf("our object, API clock behind: %+v", ev)
	} else if err := v.Clone().Apply(events.New(v.ID, v.Version+1, now, "me", "", ev)); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Candidate){"edited": func(c *Candidate) { c.PayloadSHA256 = "x" }, "moved": func(c *Candidate) { c.ParentID = "p_other" }} {
		ev := d.ConcludeReadback(v, caps, now, obj(mod))
		m, ok := ev.(*events.ManualActionRequiredData)
		if !ok || m.Reason != events.ReasonWrittenModified || len(m.Evidence.Candidates) != 1 || len(m.Evidence.Checks) == 0 {
			t.Fatalf("%s: %T %+v, want a hand-off %s", name, ev, ev, events.ReasonWrittenModified)
		}
		if err := v.Clone().Apply(events.New(v.ID, v.Version+1, now, "me", "", ev)); err != nil {
			t.Fatal(err)
		}
	}
	// An object whose marker names another intent, or none, fails its
	// check as before.
	if ev, ok := d.ConcludeReadback(v, caps, now, obj(func(c *Candidate) { c.CorrelationID = "in_other"; c.PayloadSHA256 = "x" })).(*events.ReadbackFailedData); !ok || !slices.Contains(ev.Failed, "correlation") {
		t.Fatalf("a foreign marker read back: %+v", ev)
	}
	// The guard accepts our marked candidate however early it looks.
	b := newStrict(caps, auto)
	h := histories(caps, auto)["reconciling(mine)"]
	b.h, b.at = append([]events.Event(nil), h...), h[len(h)-1].At
	b.add(0, &events.CandidateFoundData{ExternalID: "p_1", Source: "search", CreatedAt: t0.Add(-time.Minute), CorrelationID: b.id()})
	if _, err := Fold(b.h); err != nil {
		t.Fatalf("our marked candidate refused: %v", err)
	}
}

// A status answer naming another account is not this intent's effect (a
// booking status looked up by a bare request id can answer another
// account's change): handed off, never confirmed, and the guard refuses a
// CandidateFound of another account.
func TestStatusScopedByAccount(t *testing.T) {
	d := testDecider()
	caps := capProfiles["status+key"]
	i := foldAuto(t, caps, "reconciling(mine)")
	now := i.UpdatedAt.Add(time.Minute)
	for _, state := range []string{StatusCompleted, StatusProcessing, StatusFailed} {
		ev := d.ConcludeStatus(i, caps, now, StatusObservation{Found: true, State: state, ExternalID: "B-1@v9", Account: "acct_other"})
		m, ok := ev.(*events.ManualActionRequiredData)
		if !ok || m.Reason != events.ReasonStatusNotOurs || len(m.Evidence.Candidates) != 1 {
			t.Fatalf("%s by another account: %T %+v, want a hand-off %s", state, ev, ev, events.ReasonStatusNotOurs)
		}
		if err := i.Clone().Apply(events.New(i.ID, i.Version+1, now, "me", "", ev)); err != nil {
			t.Fatal(err)
		}
	}
	// Our account (or an API that does not say): as before.
	for _, acct := range []string{"", i.Recorded.Account} {
		ev := d.ConcludeStatus(i, caps, now, StatusObservation{Found: true, State: StatusCompleted, ExternalID: "B-1@v9", Account: acct})
		if f, ok := ev.(*events.CandidateFoundData); !ok || f.Account != acct {
			t.Fatalf("account %q: %+v", acct, ev)
		}
	}
	// Appending around the decision.
	j := i.Clone()
	if err := j.Apply(events.New(i.ID, i.Version+1, now, "me", "", &events.CandidateFoundData{ExternalID: "B-1@v9", Source: "status", Account: "acct_other"})); err == nil || !strings.Contains(err.Error(), "account") {
		t.Fatalf("a CandidateFound of another account: %v", err)
	}
	// The status readback checks the account too.
	v, err := Fold(histories(caps, policyProfile{"auto", "auto", false})["verifying(found)"])
	if err != nil {
		t.Fatal(err)
	}
	rb := d.ConcludeStatusReadback(v, caps, now, StatusObservation{Found: true, State: StatusCompleted, ExternalID: "p_1",
		PayloadSHA256: v.Recorded.PayloadSHA256, Account: "acct_other"})
	if f, ok := rb.(*events.ReadbackFailedData); !ok || !slices.Contains(f.Failed, "account") {
		t.Fatalf("status readback of another account: %+v", rb)
	}
}

// A status answer that cannot be checked — no marker where the route
// writes one — is a hand-off, never a conclusion the guard refuses (which
// would fail every step and grow the log by two events per check). A
// marker naming another intent is not ours either.
func TestStatusWithoutMarkerIsHandedOff(t *testing.T) {
	d := testDecider()
	caps := capProfiles["status+key"]
	caps.Correlation = true
	h := histories(caps, policyProfile{"auto", "auto", false})["reconciling(mine)"]
	i, err := Fold(h)
	if err != nil {
		t.Fatal(err)
	}
	now := i.UpdatedAt.Add(time.Minute)
	for marker, reason := range map[string]events.ManualReason{"": events.ReasonStatusUnverifiable, "in_other": events.ReasonStatusNotOurs} {
		ev := d.ConcludeStatus(i, caps, now, StatusObservation{Found: true, State: StatusCompleted, ExternalID: "B-1@v9", CorrelationID: marker})
		m, ok := ev.(*events.ManualActionRequiredData)
		if !ok || m.Reason != reason {
			t.Fatalf("marker %q: %T %+v, want a hand-off %s", marker, ev, ev, reason)
		}
		if err := i.Clone().Apply(events.New(i.ID, i.Version+1, now, "me", "", ev)); err != nil {
			t.Fatalf("marker %q: the guards refuse the hand-off: %v", marker, err)
		}
	}
	ev := d.ConcludeStatus(i, caps, now, StatusObservation{Found: true, State: StatusCompleted, ExternalID: "B-1@v9", CorrelationID: i.ID})
	if err := i.Clone().Apply(events.New(i.ID, i.Version+1, now, "me", "", ev)); err != nil || ev.EventType() != events.CandidateFound {
		t.Fatalf("our marker: %+v %v", ev, err)
	}
}

// The window counts as closed only for a listing started after it closed
// (a 20 s listing that straddled the window's end, judged by the clock
// when it returned, would miss a write made inside the window).
func TestWindowClosedOnlyForListingsStartedAfterIt(t *testing.T) {
	d := testDecider()
	caps := capProfiles["search"]
	i := foldAuto(t, caps, "reconciling(mine)")
	_, to := Window(i)
	returned := to.Add(10 * time.Second)
	straddling := d.ConcludeSearch(i, caps, returned, to.Add(-10*time.Second), nil)
	c, ok := straddling.(*events.CheckDeferredData)
	if !ok || !c.NextCheckAt.Equal(returned) {
		t.Fatalf("a listing started 10 s before the window's end: %T %+v, want CheckDeferred at once", straddling, straddling)
	}
	near := []Candidate{cand(i, func(c *Candidate) { c.AuthorID = "u_other" })}
	if ev := d.ConcludeSearch(i, caps, returned, to.Add(-time.Second), near); ev.EventType() != events.CheckDeferred {
		t.Fatalf("a near match seen by a straddling listing: %+v", ev)
	}
	if ev := d.ConcludeSearch(i, caps, returned, to, nil); ev.EventType() != events.SearchWindowElapsed {
		t.Fatalf("a listing started at the window's end: %+v", ev)
	}
	if ev := d.ConcludeSearch(i, caps, returned, to, near); ev.EventType() != events.ManualActionRequired {
		t.Fatalf("a near match seen by a listing started after the end: %+v", ev)
	}
}

// A listing whose end was not proven can prove our write present, never
// absent: a listing cut short is not "searched, found nothing".
func TestIncompleteListingProvesPresenceOnly(t *testing.T) {
	d := testDecider()
	caps := capProfiles["search"]
	i := foldAuto(t, caps, "reconciling(mine)")
	_, to := Window(i)
	closed := to.Add(time.Second)
	if ev := d.ConcludeIncompleteSearch(i, caps, closed, closed, []Candidate{cand(i, nil)}, "listing_incomplete"); ev.EventType() != events.CandidateFound {
		t.Fatalf("an exact match on a page read: %+v", ev)
	}
	for name, cands := range map[string][]Candidate{
		"nothing":    nil,
		"near match": {cand(i, func(c *Candidate) { c.AuthorID = "u_other" })},
		"look-alike": {cand(i, func(c *Candidate) { c.PayloadSHA256 = "x" })},
	} {
		ev, ok := d.ConcludeIncompleteSearch(i, caps, closed, closed, cands, "listing_incomplete").(*events.CheckDeferredData)
		if !ok || ev.Reason != events.DeferReadFailed || ev.Error != "search: listing_incomplete" {
			t.Fatalf("%s after the window, listing cut short: %+v, want a failed read", name, ev)
		}
	}
}

// foldAuto folds the history name of the auto/auto policy profile.
func foldAuto(t *testing.T, caps events.Capabilities, name string) *Intent {
	t.Helper()
	h, ok := histories(caps, policyProfile{"auto", "auto", false})[name]
	if !ok {
		t.Fatalf("no history %s", name)
	}
	i, err := Fold(h)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// Retry-After on the decider's side: a rejection's
// wait holds off the resend (and an approved retry), capped at
// MaxRetryAfter and by the intent's expiry; a failed read's wait holds off
// the next check; the guard refuses a claim before it.
func TestRetryAfterIsHonoured(t *testing.T) {
	d := testDecider()
	caps := capProfiles["search"]
	rejected := func(pp policyProfile, wait time.Duration) *sb {
		b := newStrict(caps, pp).start(1, "")
		return b.add(1, &events.WriteRejectedData{Code: "http_retryable", StatusCode: 429, Retryable: true, RetryAfter: events.Duration(wait)})
	}
	b := rejected(policyProfile{"auto", "auto", false}, 10*time.Minute)
	i, err := Fold(b.h)
	if err != nil {
		t.Fatal(err)
	}
	at := i.UpdatedAt
	if s := d.Next(i, caps, at.Add(time.Minute)); s.Kind != StepWait || !s.At.Equal(at.Add(10*time.Minute)) {
		t.Fatalf("a minute after a 429 asking for 10: %s until %s", s.Kind, s.At)
	}
	if s := d.Next(i, caps, at.Add(10*time.Minute)); s.Event == nil || s.Event.EventType() != events.RetryClaimed {
		t.Fatalf("after the wait: %+v", s)
	}
	b.at = at.Add(time.Minute)
	b.add(0, &events.RetryClaimedData{Owner: "me", LeaseUntil: b.at.Add(time.Minute), Attempt: 2})
	if _, err := Fold(b.h); err == nil || !strings.Contains(err.Error(), "Retry-After") {
		t.Fatalf("a claim inside the wait: %v", err)
	}
	// Capped at MaxRetryAfter.
	j, err := Fold(rejected(policyProfile{"auto", "auto", false}, 30*24*time.Hour).h)
	if err != nil {
		t.Fatal(err)
	}
	if s := d.Next(j, caps, j.UpdatedAt.Add(time.Minute)); s.Kind != StepWait || !s.At.Equal(j.UpdatedAt.Add(MaxRetryAfter)) {
		t.Fatalf("a 30-day Retry-After: waits until %s", s.At)
	}
	// An expiry inside the wait: abandoned then, never written.
	k, err := Fold(rejected(policyProfile{"auto", "auto", true}, 30*time.Minute).h)
	if err != nil {
		t.Fatal(err)
	}
	if s := d.Next(k, caps, k.UpdatedAt.Add(time.Minute)); s.Kind != StepWait || !s.At.Equal(k.Recorded.ExpiresAt) {
		t.Fatalf("expiry inside the wait: %s until %s", s.Kind, s.At)
	}
	if s := d.Next(k, caps, k.Recorded.ExpiresAt); s.Event == nil || s.Event.EventType() != events.Abandoned {
		t.Fatalf("at expiry: %+v", s)
	}
	// An approved retry waits too.
	a := rejected(policyProfile{"auto", "approval", false}, 10*time.Minute)
	a.add(0, &events.ApprovalRequiredData{For: "retry", Reason: "r"}).add(0, &events.ApprovedData{Operator: "op"})
	ai, err := Fold(a.h)
	if err != nil {
		t.Fatal(err)
	}
	if s := d.Next(ai, caps, ai.UpdatedAt); s.Kind != StepWait || !s.At.Equal(at.Add(10*time.Minute)) {
		t.Fatalf("an approved retry inside the wait: %s until %s", s.Kind, s.At)
	}
	// A failed read.
	r := foldAuto(t, caps, "reconciling(mine)")
	now := r.UpdatedAt
	c := d.ConcludeReadFailure(r, caps, now, "search", "rejected: http_retryable (HTTP 429)", 7*time.Minute).(*events.CheckDeferredData)
	if c.RetryAfter.D() != 7*time.Minute || !c.NextCheckAt.Equal(now.Add(7*time.Minute)) {
		t.Fatalf("a read asking for 7 minutes: %+v", c)
	}
	c = d.ConcludeReadFailure(r, caps, now, "search", "x", 48*time.Hour).(*events.CheckDeferredData)
	if !c.NextCheckAt.Equal(now.Add(MaxRetryAfter)) {
		t.Fatalf("a read asking for 2 days: %+v", c)
	}
}

// A retry sends the request its first attempt recorded:
// the decider's retry step carries it, and the guard refuses a retry that
// records another. A history without recorded requests folds as before.
func TestRetryCarriesTheRecordedRequest(t *testing.T) {
	d := testDecider()
	caps := capProfiles["status+key"]
	first := &events.SentRequest{Method: "POST", Path: "/v1/payment_intents", ContentType: "application/x-www-form-urlencoded", Body: "amount=4200"}
	b := newStrict(caps, policyProfile{"auto", "auto", false})
	b.add(1, &events.WriteStartedData{Attempt: 1, IdempotencyKey: events.IdempotencyKey(b.id()), Deadline: b.at.Add(time.Minute), Request: first}).
		add(1, &events.OutcomeUnknownData{Code: "timeout_after_send"}).
		add(0, &events.ReconcileStartedData{Worker: "me", LeaseUntil: b.at.Add(30 * time.Second), Strategy: StrategyStatus, Check: 1}).
		add(0, &events.StatusNotFoundData{Queried: "status"}).
		add(0, &events.RetryClaimedData{Owner: "me", LeaseUntil: b.at.Add(time.Minute), Attempt: 2})
	i, err := Fold(b.h)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Next(i, caps, i.UpdatedAt)
	ws, ok := s.Event.(*events.WriteStartedData)
	if s.Kind != StepWrite || !ok || !ws.Request.Equal(first) {
		t.Fatalf("the retry step: %s %+v, want the first attempt's request", s.Kind, s.Event)
	}
	edited := *first
	edited.Body = "amount=4200&metadata%5Bv%5D=2"
	for name, req := range map[string]*events.SentRequest{"the same": first, "none recorded": nil, "another": &edited} {
		c := &sb{h: append([]events.Event(nil), b.h...), at: b.at}
		c.add(2, &events.WriteStartedData{Attempt: 2, IdempotencyKey: events.IdempotencyKey(b.id()), Deadline: c.at.Add(time.Minute), ClaimOwner: "me", Request: req})
		_, err := Fold(c.h)
		if (name == "another") != (err != nil) {
			t.Fatalf("a retry recording %s request: %v", name, err)
		}
	}
}

// A readback whose object names another id than the one found (an API
// that normalises its ids, a read answered with another object) is a
// failed check, never a ReadbackPassed the guard refuses: that failed
// every step of the intent, again at each recheck, with no hand-off.
func TestReadbackOfAnotherIDIsAFailedCheck(t *testing.T) {
	d := testDecider()
	apply := func(t *testing.T, i *Intent, ev events.Data) {
		t.Helper()
		if err := i.Clone().Apply(events.New(i.ID, i.Version+1, i.UpdatedAt, "me", "", ev)); err != nil {
			t.Fatalf("guards refuse the conclusion: %v", err)
		}
	}
	t.Run("search", func(t *testing.T) {
		caps := capProfiles["search"]
		i, err := Fold(histories(caps, policyProfile{"auto", "auto", false})["verifying(found)"])
		if err != nil {
			t.Fatal(err)
		}
		other := cand(i, func(c *Candidate) { c.LiveURL, c.ExternalID = "https://x/p_1", "00"+i.ExternalID })
		ev := d.ConcludeReadback(i, caps, i.UpdatedAt, Readback{Found: true, Object: other, ProbeStatus: 200})
		if f, ok := ev.(*events.ReadbackFailedData); !ok || !slices.Contains(f.Failed, "id") {
			t.Fatalf("readback of %q after finding %q: %+v", other.ExternalID, i.ExternalID, ev)
		}
		apply(t, i, ev)
	})
	t.Run("status", func(t *testing.T) {
		caps := capProfiles["status+key"]
		v, err := Fold(histories(caps, policyProfile{"auto", "auto", false})["verifying(found)"])
		if err != nil {
			t.Fatal(err)
		}
		ev := d.ConcludeStatusReadback(v, caps, v.UpdatedAt, StatusObservation{Found: true, State: StatusCompleted, ExternalID: "00" + v.ExternalID,
			PayloadSHA256: v.Recorded.PayloadSHA256, Account: v.Recorded.Account})
		if f, ok := ev.(*events.ReadbackFailedData); !ok || !slices.Contains(f.Failed, "id") {
			t.Fatalf("status readback of another id: %+v", ev)
		}
		apply(t, v, ev)
	})
}
