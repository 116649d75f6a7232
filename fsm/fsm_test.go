package fsm

import (
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	lfsm "github.com/looplab/fsm"

	"github.com/settle-dev/settle/events"
)

var update = flag.Bool("update", false, "rewrite docs/lifecycle.md from the fsm")

var t0 = time.Date(2026, 7, 22, 0, 0, 0, 0, time.UTC)

func recorded(policy events.Policy) events.Event {
	id := events.ScopedIntentID("acme", "social_post", "acct_1", "task-1:step-1")
	payload := []byte(`{"assets":[],"body":"hello"}`)
	sum, _ := events.PayloadSHA256(payload)
	return events.New(id, 1, t0, "test", "", &events.IntentRecordedData{
		Tenant: "acme", Route: "social_post", Account: "acct_1", RequestID: "task-1:step-1",
		IdempotencyKey: events.IdempotencyKey(id), Payload: payload, PayloadSHA256: sum,
		Canon: events.CanonV1, PlannedAt: t0, Policy: policy, Caps: &testCaps,
	})
}

// testCaps are the capabilities recorded: an idempotency key kept a day,
// an authoritative search (a window that closes proves the write absent)
// and the readback checks every route has.
var testCaps = events.Capabilities{IdempotencyKey: true, KeyRetention: events.Duration(24 * time.Hour),
	Search: true, SearchAuthoritative: true, Checks: []string{"author", "payload", "parent"}}

func autoPolicy() events.Policy {
	return events.Policy{FirstWrite: "auto", Retry: "auto", RetryBudget: 1, ResendBudget: 1,
		AttemptDeadline: events.Duration(time.Minute), SearchBefore: events.Duration(5 * time.Minute), SearchAfter: events.Duration(30 * time.Minute)}
}

// builder appends events with consecutive versions.
type builder struct {
	t  *testing.T
	h  []events.Event
	at time.Time
}

func newBuilder(t *testing.T, p events.Policy) *builder {
	return &builder{t: t, h: []events.Event{recorded(p)}, at: t0}
}

func (b *builder) id() string { return b.h[0].IntentID }

func (b *builder) add(attempt int, d events.Data) *builder {
	b.at = b.at.Add(time.Second)
	aid := ""
	if attempt > 0 {
		aid = events.AttemptID(b.id(), attempt)
	}
	b.h = append(b.h, events.New(b.id(), uint64(len(b.h)+1), b.at, "test", aid, d))
	return b
}

func (b *builder) start(n int) *builder {
	return b.add(n, &events.WriteStartedData{Attempt: n, IdempotencyKey: events.IdempotencyKey(b.id()), Deadline: b.at.Add(time.Minute), ClaimOwner: claimOwner(n)})
}

func claimOwner(n int) string {
	if n > 1 {
		return "w1"
	}
	return ""
}

func (b *builder) fold() (*Intent, error) { return Fold(b.h) }

func receipt(i *Intent) events.Receipt {
	return events.Receipt{ExternalID: "p_1", LiveURL: "http://x/p/p_1", PayloadSHA256: i.Recorded.PayloadSHA256, Source: "readback",
		Checks: []events.Check{{Name: "author", OK: true}, {Name: "payload", OK: true}, {Name: "parent", OK: true}}}
}

func TestFoldHappyPathUnknownToConfirmed(t *testing.T) {
	b := newBuilder(t, autoPolicy()).start(1).
		add(1, &events.OutcomeUnknownData{Code: "timeout_after_send"}).
		add(0, &events.ReconcileStartedData{Worker: "w1", LeaseUntil: t0.Add(time.Hour), Strategy: "search", Check: 1}).
		add(0, &events.CandidateFoundData{ExternalID: "p_1", Source: "search"})
	i, err := b.fold()
	if err != nil {
		t.Fatal(err)
	}
	b.add(0, &events.ReadbackPassedData{Receipt: receipt(i)})
	i, err = b.fold()
	if err != nil {
		t.Fatal(err)
	}
	if i.State != Confirmed || i.ExternalID != "p_1" || len(i.Attempts) != 1 || i.Attempts[0].Outcome != events.OutcomeUnknown {
		t.Fatalf("got state %s ext %q attempts %+v", i.State, i.ExternalID, i.Attempts)
	}
	if i.Version != 6 || i.Receipt == nil || len(i.ConfirmedExternalIDs) != 1 {
		t.Fatalf("version %d receipt %v", i.Version, i.Receipt)
	}
}

func TestFoldRetryPath(t *testing.T) {
	b := newBuilder(t, autoPolicy()).start(1).
		add(1, &events.OutcomeUnknownData{Code: "connection_reset"}).
		add(0, &events.ReconcileStartedData{Worker: "w1", LeaseUntil: t0.Add(time.Hour), Strategy: "search", Check: 1}).
		add(0, &events.SearchWindowElapsedData{WindowTo: t0.Add(30 * time.Minute)}).
		add(0, &events.RetryClaimedData{Owner: "w1", LeaseUntil: t0.Add(time.Hour), Attempt: 2, BudgetLeft: 0}).
		start(2).
		add(2, &events.WriteSucceededData{ExternalID: "p_2"})
	i, err := b.fold()
	if err != nil {
		t.Fatal(err)
	}
	if i.State != Verifying || len(i.Attempts) != 2 || i.BudgetLeft() != 0 || i.Claim != nil {
		t.Fatalf("state %s attempts %d budget %d claim %v", i.State, len(i.Attempts), i.BudgetLeft(), i.Claim)
	}
	// A second claim: budget spent.
	b2 := newBuilder(t, autoPolicy())
	b2.h = append(b2.h[:0], b.h[:len(b.h)]...)
	b2.add(0, &events.ReconcileStartedData{Worker: "w1", LeaseUntil: t0.Add(time.Hour), Strategy: "search", Check: 2})
	_, err = b2.fold()
	if !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("ReconcileStarted from verifying: %v", err)
	}
}

func TestFoldRejectsIllegalHistoryNamingEventVersionState(t *testing.T) {
	b := newBuilder(t, autoPolicy()).
		add(0, &events.ReadbackPassedData{Receipt: events.Receipt{ExternalID: "p", Source: "response", PayloadSHA256: strings.Repeat("0", 64)}})
	_, err := b.fold()
	var te *TransitionError
	if !errors.As(err, &te) || !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("want TransitionError, got %v", err)
	}
	if te.Type != events.ReadbackPassed || te.Version != 2 || te.State != Recorded {
		t.Fatalf("error names %s v%d %s", te.Type, te.Version, te.State)
	}
	for _, want := range []string{"ReadbackPassed", "version 2", "recorded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func TestFoldGuards(t *testing.T) {
	cases := []struct {
		name string
		b    func() *builder
		want string
	}{
		{"second write without claim", func() *builder {
			return newBuilder(t, autoPolicy()).start(1).add(1, &events.WriteRejectedData{Code: "dns_failure", Retryable: true}).start(2)
		}, "illegal transition"},
		{"different idempotency key", func() *builder {
			b := newBuilder(t, autoPolicy())
			return b.add(1, &events.WriteStartedData{Attempt: 1, IdempotencyKey: "other", Deadline: t0.Add(time.Minute)})
		}, "idempotency key"},
		{"skipped attempt number", func() *builder {
			b := newBuilder(t, autoPolicy())
			return b.add(2, &events.WriteStartedData{Attempt: 2, IdempotencyKey: events.IdempotencyKey(b.id()), Deadline: t0.Add(time.Minute)})
		}, "attempt 2, expected 1"},
		{"budget spent", func() *builder {
			p := autoPolicy()
			p.RetryBudget, p.ResendBudget = 0, 0
			return newBuilder(t, p).start(1).add(1, &events.WriteRejectedData{Code: "dns_failure", Retryable: true}).
				add(0, &events.RetryClaimedData{Owner: "w1", LeaseUntil: t0.Add(time.Hour), Attempt: 2})
		}, "budget"},
		{"retry needs approval", func() *builder {
			p := autoPolicy()
			p.Retry = "approval"
			return newBuilder(t, p).start(1).add(1, &events.WriteRejectedData{Code: "dns_failure", Retryable: true}).
				add(0, &events.RetryClaimedData{Owner: "w1", LeaseUntil: t0.Add(time.Hour), Attempt: 2})
		}, "approval"},
		{"non-retryable rejection", func() *builder {
			return newBuilder(t, autoPolicy()).start(1).add(1, &events.WriteRejectedData{Code: "http_rejected", StatusCode: 400}).
				add(0, &events.RetryClaimedData{Owner: "w1", LeaseUntil: t0.Add(time.Hour), Attempt: 2})
		}, "not retryable"},
		{"first write needs approval", func() *builder {
			p := autoPolicy()
			p.FirstWrite = "approval"
			return newBuilder(t, p).start(1)
		}, "approval"},
		{"write by someone else than the claim owner", func() *builder {
			b := newBuilder(t, autoPolicy()).start(1).add(1, &events.WriteRejectedData{Code: "dns_failure", Retryable: true}).
				add(0, &events.RetryClaimedData{Owner: "w9", LeaseUntil: t0.Add(time.Hour), Attempt: 2})
			return b.start(2)
		}, "claim belongs"},
		{"claim expired before write", func() *builder {
			b := newBuilder(t, autoPolicy()).start(1).add(1, &events.WriteRejectedData{Code: "dns_failure", Retryable: true}).
				add(0, &events.RetryClaimedData{Owner: "w1", LeaseUntil: t0.Add(10 * time.Second), Attempt: 2})
			b.at = b.at.Add(time.Hour)
			return b.start(2)
		}, "lease expired"},
		{"outcome for another attempt", func() *builder {
			return newBuilder(t, autoPolicy()).start(1).add(2, &events.OutcomeUnknownData{Code: "x"})
		}, "open attempt"},
		{"version gap", func() *builder {
			b := newBuilder(t, autoPolicy()).start(1)
			b.h[1].Version = 3
			b.h[1].EventID = events.MsgID(b.id(), 3)
			return b
		}, "expected version 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.b().fold()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want error containing %q, got %v", c.want, err)
			}
		})
	}
}

func TestApplyLeavesIntentUnchangedOnError(t *testing.T) {
	i, err := Fold([]events.Event{recorded(autoPolicy())})
	if err != nil {
		t.Fatal(err)
	}
	before := *i
	bad := events.New(i.ID, 2, t0, "t", "", &events.ApprovedData{Operator: "x"})
	if err := i.Apply(bad); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("got %v", err)
	}
	if i.State != before.State || i.Version != before.Version {
		t.Fatalf("intent changed: %s v%d", i.State, i.Version)
	}
}

func TestMermaidDiagramMatchesDocs(t *testing.T) {
	const path = "../docs/lifecycle.md"
	want := "# Intent lifecycle\n\nGenerated from `fsm.Transitions` by `go test ./fsm -run Mermaid -update`; a test fails when it drifts.\n\n```mermaid\n" + Mermaid() + "```\n"
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./fsm -run Mermaid -update)", err)
	}
	if string(got) != want {
		t.Fatalf("docs/lifecycle.md drifted from fsm.Transitions; run go test ./fsm -run Mermaid -update")
	}
	for _, tr := range Transitions {
		if !strings.Contains(want, string(tr.Type)) {
			t.Errorf("diagram lacks %s", tr.Type)
		}
	}
}

// Mermaid renders the lifecycle as a Mermaid state diagram (generated by
// looplab/fsm from Transitions).
func Mermaid() string {
	out, err := lfsm.VisualizeForMermaidWithGraphType(newMachine(None), lfsm.StateDiagram)
	if err != nil {
		panic(err) // StateDiagram is a constant the library knows
	}
	return out
}
