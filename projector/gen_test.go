package projector

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

// The generator walks fsm.Transitions from IntentRecorded with a seeded
// math/rand, building for each step an event body that satisfies the fsm's
// guards, and keeps only steps that fsm.Apply accepts: every generated
// history is legal by construction and checked by fsm.Fold.

var t0 = time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)

var (
	genTenants  = []string{"acme", "globex"}
	genRoutes   = []string{"social_post", "payment_create", "booking_update"}
	genAccounts = []string{"acct_1", "acct_2", "acct_3"}
)

// genIntent is one generated intent: its route and legal history.
type genIntent struct {
	Route   string
	History []events.Event
}

func (g genIntent) ID() string { return g.History[0].IntentID }

type generator struct {
	r *rand.Rand
	// used counts the event types generated so far: half of the steps
	// prefer the least used type, so rare transitions are covered too.
	used map[events.Type]int
}

func newGenerator(seed int64) *generator {
	return &generator{r: rand.New(rand.NewSource(seed)), used: map[events.Type]int{}}
}

// choose picks one of es: the least used type half of the time, else the
// first (es is in random order).
func (g *generator) choose(es []events.Event) events.Event {
	best := es[0]
	if g.r.Intn(2) == 0 {
		for _, e := range es[1:] {
			if g.used[e.Type] < g.used[best.Type] {
				best = e
			}
		}
	}
	return best
}

func (g *generator) pick(xs []string) string { return xs[g.r.Intn(len(xs))] }

func (g *generator) policy() events.Policy {
	p := events.Policy{
		FirstWrite:      []string{events.PolicyAuto, events.PolicyAuto, events.PolicyApproval}[g.r.Intn(3)],
		Retry:           []string{events.PolicyAuto, events.PolicyAuto, events.PolicyApproval, events.PolicyNever}[g.r.Intn(4)],
		RetryBudget:     g.r.Intn(4),
		AttemptDeadline: events.Duration(time.Minute),
		SearchBefore:    events.Duration(5 * time.Minute),
		SearchAfter:     events.Duration(30 * time.Minute),
	}
	if g.r.Intn(2) == 0 {
		p.KeyRetention = events.Duration(24 * time.Hour)
		p.RetentionMargin = events.Duration(time.Hour)
	}
	return p
}

// recorded builds the IntentRecorded of intent number k.
func (g *generator) recorded(k int) (string, events.Event) {
	tenant, route := g.pick(genTenants), g.pick(genRoutes)
	requestID := fmt.Sprintf("task-%d:step-%d", k, g.r.Intn(3))
	account := g.pick(genAccounts)
	id := events.ScopedIntentID(tenant, route, account, requestID)
	payload := []byte(fmt.Sprintf(`{"body":"post number %d","tags":["t%d"]}`, k, g.r.Intn(10)))
	sum, err := events.PayloadSHA256(payload)
	if err != nil {
		panic(err)
	}
	// Creation times collide now and then, so paging must break ties.
	at := t0.Add(time.Duration(k/3) * time.Minute)
	return route, events.New(id, 1, at, "gen", "", &events.IntentRecordedData{
		Tenant: tenant, Route: route, Account: account, RequestID: requestID,
		IdempotencyKey: events.IdempotencyKey(id), Payload: payload, PayloadSHA256: sum,
		Canon: events.CanonV1, PlannedAt: at, Policy: g.policy(), Caps: &testharness.HandCaps,
	})
}

func (g *generator) externalID(k, attempt int) string {
	if g.r.Intn(10) == 0 {
		return fmt.Sprintf("ext-shared-%d", g.r.Intn(4)) // two intents, one object
	}
	return fmt.Sprintf("ext-%d-%d", k, attempt)
}

func (g *generator) evidence(i *fsm.Intent) events.Evidence {
	ev := events.Evidence{CurrentState: string(i.State), Queried: []string{"search"}}
	for _, a := range i.Attempts {
		ev.Attempts = append(ev.Attempts, events.AttemptRef{AttemptID: a.ID, StartedAt: a.StartedAt, Outcome: string(a.Outcome)})
	}
	if g.r.Intn(2) == 0 {
		ev.Candidates = []events.CandidateRef{{ExternalID: "cand-a", Match: true}, {ExternalID: "cand-b", Match: true}}
	}
	return ev
}

// body builds a guard-satisfying event of type typ for intent i (number
// k), or returns nil when typ cannot follow i's history.
func (g *generator) body(k int, i *fsm.Intent, typ events.Type, at time.Time) (events.Data, string, time.Time) {
	n := len(i.Attempts)
	open := ""
	if a := i.LastAttempt(); a != nil {
		open = a.ID
	}
	sha := i.Recorded.PayloadSHA256
	receipt := func(src, ext, attempt string) events.Receipt {
		r := events.Receipt{ExternalID: ext, LiveURL: "https://x.example/p/" + ext, PayloadSHA256: sha, Source: events.Source(src), AttemptID: attempt}
		if src == "readback" {
			r.Checks = []events.Check{{Name: "url", OK: true}, {Name: "author", OK: true}, {Name: "payload", OK: true, Detail: "sha256 equal"}, {Name: "parent", OK: true}}
			r.ReadbackAt = at
		}
		if g.r.Intn(2) == 0 {
			r.RequestID = i.Recorded.RequestID
		}
		return r
	}
	switch typ {
	case events.ApprovalRequired:
		f := "first_write"
		if n > 0 {
			f = "retry"
		}
		return &events.ApprovalRequiredData{For: f, Reason: "route policy"}, "", at
	case events.Approved:
		return &events.ApprovedData{Operator: g.pick([]string{"ops-ann", "ops-bob"}), Reason: "looks right"}, "", at
	case events.WriteStarted:
		owner := ""
		if i.State == fsm.RetryClaimed && i.Claim != nil {
			owner = i.Claim.Owner
		}
		return &events.WriteStartedData{Attempt: n + 1, IdempotencyKey: i.Recorded.IdempotencyKey, Deadline: at.Add(time.Minute), ClaimOwner: owner},
			events.AttemptID(i.ID, n+1), at
	case events.WriteSucceeded:
		ext := g.externalID(k, n)
		return &events.WriteSucceededData{ExternalID: ext, LiveURL: "https://x.example/p/" + ext, StatusCode: 201}, open, at
	case events.WriteConfirmed:
		return &events.WriteConfirmedData{StatusCode: 201, Receipt: receipt("response", g.externalID(k, n), open)}, open, at
	case events.WriteRejected:
		return &events.WriteRejectedData{Code: g.pick([]string{"dns_failure", "http_rejected"}), StatusCode: 400, Retryable: g.r.Intn(3) > 0}, open, at
	case events.OutcomeUnknown:
		return &events.OutcomeUnknownData{Code: g.pick([]string{"timeout_after_send", "connection_reset", "http_504"})}, open, at
	case events.ReconcileStarted:
		return &events.ReconcileStartedData{Worker: g.pick([]string{"w1", "w2"}), LeaseUntil: at.Add(time.Minute), Strategy: "search", Check: i.Checks + 1}, "", at
	case events.CheckDeferred:
		return &events.CheckDeferredData{Reason: "eventual_consistency", NextCheckAt: at.Add(time.Duration(1+g.r.Intn(5)) * time.Minute)}, "", at
	case events.CandidateFound:
		return &events.CandidateFoundData{ExternalID: g.externalID(k, n), Source: "search"}, "", at
	case events.ReadbackPassed:
		ext := i.ExternalID
		if ext == "" {
			ext = g.externalID(k, n)
		}
		return &events.ReadbackPassedData{Receipt: receipt("readback", ext, "")}, "", at
	case events.ReadbackFailed:
		return &events.ReadbackFailedData{ExternalID: i.ExternalID, Checks: []events.Check{{Name: "visibility", OK: false, Detail: "private"}}, Failed: []string{"visibility"}}, "", at
	case events.TargetProcessing:
		return &events.TargetProcessingData{Poll: i.Polls + 1, NextCheckAt: at.Add(30 * time.Second), Deadline: at.Add(time.Hour)}, "", at
	case events.SearchWindowElapsed:
		return &events.SearchWindowElapsedData{WindowFrom: at.Add(-time.Hour), WindowTo: at, Searches: 1 + g.r.Intn(3)}, "", at
	case events.StatusNotFound:
		return &events.StatusNotFoundData{ReflectionDelay: events.Duration(time.Minute), Queried: "request_id"}, "", at
	case events.TargetFailed:
		d := &events.TargetFailedData{Code: "declined"}
		if g.r.Intn(2) == 0 {
			d.PartialEffects = []string{"draft created"}
		}
		return d, "", at
	case events.RetryClaimed:
		if n == 0 {
			return nil, "", at // a retry is attempt 2 or later
		}
		approvedBy := ""
		if i.State == fsm.ApprovedState {
			approvedBy = i.ApprovedBy
		}
		return &events.RetryClaimedData{Owner: g.pick([]string{"w1", "w2"}), LeaseUntil: at.Add(10 * time.Minute), Attempt: n + 1,
			BudgetLeft: i.BudgetLeft() - 1, ApprovedBy: approvedBy}, "", at
	case events.ClaimExpired:
		if i.Claim == nil {
			return nil, "", at
		}
		if !at.After(i.Claim.LeaseUntil) {
			at = i.Claim.LeaseUntil.Add(time.Second)
		}
		return &events.ClaimExpiredData{Owner: i.Claim.Owner, LeaseUntil: i.Claim.LeaseUntil}, "", at
	case events.ManualActionRequired:
		reasons := []events.ManualReason{events.ReasonDuplicateExactMatches, events.ReasonKeyRetentionExpired, events.ReasonNoQueryNoDedup,
			events.ReasonRetryBudgetSpent, events.ReasonPartialEffects}
		reason := reasons[g.r.Intn(len(reasons))]
		owner := ""
		if g.r.Intn(2) == 0 {
			owner = "team-payments"
		}
		return &events.ManualActionRequiredData{Reason: reason, Message: "needs a human", Owner: owner, Evidence: g.evidence(i)}, "", at
	case events.OperatorConfirmed:
		ext := i.ExternalID
		if ext == "" {
			ext = g.externalID(k, n)
		}
		return &events.OperatorConfirmedData{Operator: "ops-ann", Reason: "seen live", Receipt: receipt("operator", ext, "")}, "", at
	case events.OperatorReleased:
		if i.Version > 12 {
			return nil, "", at // bound the manual_action -> recorded loop
		}
		return &events.OperatorReleasedData{Operator: "ops-bob", Reason: "proven absent"}, "", at
	case events.Abandoned:
		return &events.AbandonedData{By: "caller", Reason: "cancelled"}, "", at
	}
	return nil, "", at
}

// distances returns, for every state, the fewest transitions to target
// (ignoring guards); states that cannot reach it are absent.
func distances(target fsm.State) map[fsm.State]int {
	d := map[fsm.State]int{target: 0}
	for changed := true; changed; {
		changed = false
		for _, tr := range fsm.Transitions {
			to, ok := d[tr.To]
			if !ok {
				continue
			}
			for _, f := range tr.From {
				if cur, ok := d[f]; !ok || to+1 < cur {
					d[f] = to + 1
					changed = true
				}
			}
		}
	}
	return d
}

// step returns a random legal next event for i, or false when none. It
// prefers steps towards target (dist), and never leaves the states that
// can still reach it while another step is legal.
func (g *generator) step(k int, i *fsm.Intent, at time.Time, dist map[fsm.State]int) (events.Event, bool) {
	var cands []events.Type
	for _, tr := range fsm.Transitions {
		for _, f := range tr.From {
			if f == i.State {
				cands = append(cands, tr.Type)
			}
		}
	}
	g.r.Shuffle(len(cands), func(a, b int) { cands[a], cands[b] = cands[b], cands[a] })
	var closer, reachable, other []events.Event
	here, _ := dist[i.State]
	for _, typ := range cands {
		d, attempt, eat := g.body(k, i, typ, at)
		if d == nil {
			continue
		}
		e := events.New(i.ID, i.Version+1, eat, g.pick([]string{"producer", "reconciler", "console"}), attempt, d)
		if err := e.Validate(); err != nil {
			panic(fmt.Sprintf("generator built an invalid %s: %v", typ, err))
		}
		next := i.Clone()
		if err := next.Apply(e); err != nil {
			continue // a guard refuses it here
		}
		switch nd, ok := dist[next.State]; {
		case ok && nd < here:
			closer = append(closer, e)
		case ok:
			reachable = append(reachable, e)
		default:
			other = append(other, e)
		}
	}
	var e events.Event
	switch {
	case len(closer) > 0 && (len(reachable) == 0 || g.r.Intn(10) < 6):
		e = g.choose(closer)
	case len(reachable) > 0:
		e = g.choose(reachable)
	case len(closer) > 0:
		e = g.choose(closer)
	case len(other) > 0:
		e = g.choose(other)
	default:
		return events.Event{}, false
	}
	g.used[e.Type]++
	return e, true
}

// walkTo generates intent k's history, ending in state target and, when
// must is set, containing an event of type must.
func (g *generator) walkTo(k int, target fsm.State, must events.Type) genIntent {
	dist := distances(target)
	for try := 0; ; try++ {
		if try > 5000 {
			panic(fmt.Sprintf("no walk reached %s", target))
		}
		route, rec := g.recorded(k)
		h := []events.Event{rec}
		i, err := fsm.Fold(h)
		if err != nil {
			panic(err)
		}
		at := rec.At
		for len(h) < 40 {
			if i.State == target && g.r.Intn(2) == 0 {
				break
			}
			at = at.Add(time.Duration(1+g.r.Intn(90)) * time.Second)
			e, ok := g.step(k, i, at, dist)
			if !ok {
				break
			}
			if err := i.Apply(e); err != nil {
				panic(err)
			}
			at = e.At
			h = append(h, e)
		}
		if i.State != target || (must != "" && !slices.ContainsFunc(h, func(e events.Event) bool { return e.Type == must })) {
			continue
		}
		if _, err := fsm.Fold(h); err != nil {
			panic(fmt.Sprintf("generated history does not fold: %v", err))
		}
		return genIntent{Route: route, History: h}
	}
}

// generate returns perState intents ending in every state, plus one for
// each event type the walks did not use, shuffled.
func generate(t testing.TB, seed int64, perState int) []genIntent {
	t.Helper()
	// The generator's own consistency checks panic deep in the walk; turn
	// them into a test failure that names the seed.
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("generator (seed %d): %v", seed, r)
		}
	}()
	g := newGenerator(seed)
	var out []genIntent
	k := 0
	for _, s := range fsm.AllStates() {
		if s == fsm.None {
			continue
		}
		for j := 0; j < perState; j++ {
			out = append(out, g.walkTo(k, s, ""))
			k++
		}
	}
	// Every other intent whose first write starts at once is written as
	// this version writes it: one IntentStarted.
	for n := range out {
		if n%2 == 0 {
			if h, ok := joinFirstStart(out[n].History); ok {
				out[n].History = h
				g.used[events.IntentStarted]++
			}
		}
	}
	for _, tr := range fsm.Transitions {
		if tr.Type == events.IntentStarted {
			continue // made by joining, above
		}
		if g.used[tr.Type] == 0 {
			out = append(out, g.walkTo(k, tr.To, tr.Type))
			k++
		}
	}
	g.r.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

// interleave orders the events of all intents into one append sequence,
// keeping each intent's order.
func interleave(seed int64, in []genIntent) []struct {
	Route string
	Event events.Event
} {
	r := rand.New(rand.NewSource(seed ^ 0x5eed))
	next := make([]int, len(in))
	live := make([]int, len(in))
	for i := range in {
		live[i] = i
	}
	var out []struct {
		Route string
		Event events.Event
	}
	for len(live) > 0 {
		j := r.Intn(len(live))
		x := live[j]
		out = append(out, struct {
			Route string
			Event events.Event
		}{in[x].Route, in[x].History[next[x]]})
		next[x]++
		if next[x] == len(in[x].History) {
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		}
	}
	return out
}

// joinFirstStart returns h with its IntentRecorded and the first
// WriteStarted right after it joined into one IntentStarted (at the
// WriteStarted's time, by its actor), every later version one less; ok is
// false when h does not start a write right after recording, or the
// joined history does not fold.
func joinFirstStart(h []events.Event) ([]events.Event, bool) {
	if len(h) < 2 || h[1].Type != events.WriteStarted {
		return nil, false
	}
	rec := h[0]
	rec.At, rec.Actor = h[1].At, h[1].Actor
	start, ok := events.Join(rec, h[1])
	if !ok {
		return nil, false
	}
	out := []events.Event{start}
	for _, e := range h[2:] {
		e.Version--
		e.EventID = events.MsgID(e.IntentID, e.Version)
		out = append(out, e)
	}
	if _, err := fsm.Fold(out); err != nil {
		return nil, false
	}
	return out, true
}
