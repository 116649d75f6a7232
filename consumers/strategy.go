package consumers

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
)

// ReasonNearMatch: no exact match, but a candidate by the same account
// differs in exactly one identity field (payload or parent): possibly our
// write, altered. Retrying could post twice, so a human decides.
const ReasonNearMatch = "near_match"

// Window is the candidate search window of an intent: from the earliest of
// planned_at and its attempts minus SearchBefore, to the latest plus
// SearchAfter, widened by the clock-skew allowance. Times come from the log.
func Window(i *fsm.Intent) (from, to time.Time) {
	p := i.Recorded.Policy
	start, end := i.Recorded.PlannedAt, i.Recorded.PlannedAt
	for _, a := range i.Attempts {
		if a.StartedAt.Before(start) {
			start = a.StartedAt
		}
		if a.StartedAt.After(end) {
			end = a.StartedAt
		}
	}
	skew := p.ClockSkew.D()
	return start.Add(-p.SearchBefore.D() - skew), end.Add(p.SearchAfter.D() + skew)
}

// Match compares a candidate with the intent's identity: author (immutable
// account id), canonical payload hash (body and asset hashes), parent.
func Match(i *fsm.Intent, rec adapter.Record) events.CandidateRef {
	ref := events.CandidateRef{ExternalID: rec.ExternalID, LiveURL: rec.LiveURL}
	if rec.AuthorID != i.Recorded.Account {
		ref.Mismatch = append(ref.Mismatch, "author")
	}
	sum, err := events.PayloadSHA256(rec.Payload)
	if err != nil || len(rec.Payload) == 0 || sum != i.Recorded.PayloadSHA256 {
		ref.Mismatch = append(ref.Mismatch, "payload")
	}
	if rec.ParentID != i.Recorded.ParentExternalID {
		ref.Mismatch = append(ref.Mismatch, "parent")
	}
	ref.Match = len(ref.Mismatch) == 0
	return ref
}

// nearMatch: by our account, and either our payload under another parent,
// or (per the route's Resembler) a damaged copy of our payload.
func nearMatch(route producer.Route, i *fsm.Intent, rec adapter.Record, ref events.CandidateRef) bool {
	if len(ref.Mismatch) != 1 {
		return false
	}
	switch ref.Mismatch[0] {
	case "parent":
		return true
	case "payload":
		r, ok := route.Adapter.(adapter.Resembler)
		return ok && r.Resembles(i.Recorded.Payload, rec.Payload)
	}
	return false
}

// reconcile runs the route's strategy once and returns the event that
// concludes the ReconcileStarted step.
func (r *Reconciler) reconcile(ctx context.Context, i *fsm.Intent, route producer.Route, caps adapter.Capabilities, sc *searchCache) (events.Data, error) {
	if caps.StatusQuery {
		return r.byStatus(ctx, i, route, caps)
	}
	return r.bySearch(ctx, i, route, caps, sc)
}

func (r *Reconciler) deferRead(i *fsm.Intent, what string, err error) events.Data {
	r.cfg.Logger.Warn("reconciler: external read failed; will look again", "intent", i.ID, "read", what, "err", safeErr(err))
	return &events.CheckDeferredData{Reason: "read_failed", NextCheckAt: r.cfg.Now().Add(r.backoff(i.Checks))}
}

// safeErr renders an adapter error without anything but its class and code.
func safeErr(err error) string {
	var ce *adapter.CallError
	if errors.As(err, &ce) {
		return ce.Error()
	}
	if errors.Is(err, adapter.ErrNotFound) {
		return "not found"
	}
	return "read error"
}

// candidates returns the route's records in the intent's window (full
// records: a listing that omits bodies is completed with Get).
func (r *Reconciler) candidates(ctx context.Context, i *fsm.Intent, route producer.Route, sc *searchCache) ([]adapter.Record, error) {
	from, to := Window(i)
	var recs []adapter.Record
	var err error
	if sc != nil {
		recs, err = sc.get(ctx, r, route, i.Recorded.Account, from, to)
	} else {
		r.readCalls.add(1)
		recs, err = route.Adapter.Search(ctx, adapter.SearchQuery{Account: i.Recorded.Account, From: from, To: to})
	}
	if err != nil {
		return nil, err
	}
	out := make([]adapter.Record, 0, len(recs))
	for _, rec := range recs {
		if !rec.CreatedAt.IsZero() && (rec.CreatedAt.Before(from) || rec.CreatedAt.After(to)) {
			continue
		}
		if rec.Partial {
			r.readCalls.add(1)
			full, err := route.Adapter.Get(ctx, rec.ExternalID)
			if errors.Is(err, adapter.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			rec = full
		}
		out = append(out, rec)
	}
	return out, nil
}

// bySearch: read-only search, exact match on identity; 0 → wait until the
// window closes, then not_found; 1 → verify; 2+ → manual_action.
func (r *Reconciler) bySearch(ctx context.Context, i *fsm.Intent, route producer.Route, caps adapter.Capabilities, sc *searchCache) (events.Data, error) {
	now := r.cfg.Now()
	recs, err := r.candidates(ctx, i, route, sc)
	if err != nil {
		return r.deferRead(i, "search", err), nil
	}
	var refs []events.CandidateRef
	var exact []events.CandidateRef
	for _, rec := range recs {
		ref := Match(i, rec)
		refs = append(refs, ref)
		if ref.Match {
			exact = append(exact, ref)
		}
	}
	switch {
	case len(exact) == 1:
		return &events.CandidateFoundData{ExternalID: exact[0].ExternalID, LiveURL: exact[0].LiveURL, Source: "search", Candidates: refs}, nil
	case len(exact) > 1:
		return &events.ManualActionRequiredData{Reason: events.ReasonDuplicateExactMatches, Owner: "operators",
			Message:  fmt.Sprintf("%d exact matches: the write executed more than once; nothing was picked or deleted", len(exact)),
			Evidence: events.Evidence{Candidates: refs, Attempts: attemptRefs(i), Queried: []string{"search by account and window"}}}, nil
	}
	from, to := Window(i)
	if now.Before(to) {
		next := now.Add(r.backoff(i.Checks))
		if next.After(to) {
			next = to
		}
		return &events.CheckDeferredData{Reason: "eventual_consistency", NextCheckAt: next, Candidates: refs}, nil
	}
	near := false // only worth computing once no exact match can come
	for k, rec := range recs {
		near = near || nearMatch(route, i, rec, refs[k])
	}
	if near {
		return &events.ManualActionRequiredData{Reason: ReasonNearMatch, Owner: "operators",
			Message:  "no exact match, but a candidate by this account differs in one identity field; a retry could duplicate it",
			Evidence: events.Evidence{Candidates: refs, Attempts: attemptRefs(i), Queried: []string{"search by account and window"}}}, nil
	}
	return &events.SearchWindowElapsedData{WindowFrom: from, WindowTo: to, Searches: i.Checks, Candidates: refs}, nil
}

// byStatus asks the external system for its own record of the write.
func (r *Reconciler) byStatus(ctx context.Context, i *fsm.Intent, route producer.Route, caps adapter.Capabilities) (events.Data, error) {
	now := r.cfg.Now()
	sq, ok := route.Adapter.(adapter.StatusQuerier)
	if !ok {
		return nil, fmt.Errorf("route %s claims a status query but its adapter has none", route.Name)
	}
	r.readCalls.add(1)
	st, err := sq.Status(ctx, adapter.StatusQuery{RequestID: i.Recorded.RequestID, IdempotencyKey: i.Recorded.IdempotencyKey, Account: i.Recorded.Account})
	if errors.Is(err, adapter.ErrNotFound) {
		visibleBy := i.LastAttempt().StartedAt.Add(caps.ReflectionDelay + i.Recorded.Policy.ClockSkew.D())
		if now.Before(visibleBy) {
			return &events.CheckDeferredData{Reason: "reflection_delay", NextCheckAt: visibleBy}, nil
		}
		return &events.StatusNotFoundData{ReflectionDelay: events.Duration(caps.ReflectionDelay), Queried: "status by request id"}, nil
	}
	if err != nil {
		return r.deferRead(i, "status", err), nil
	}
	switch st.State {
	case adapter.StatusCompleted:
		return &events.CandidateFoundData{ExternalID: st.ExternalID, LiveURL: st.LiveURL, Source: "status"}, nil
	case adapter.StatusProcessing:
		deadline := i.ProcessingDeadline
		if deadline.IsZero() {
			deadline = now.Add(r.cfg.ProcessingDeadline)
		}
		if !now.Before(deadline) {
			ev := r.handoff(i, events.ReasonProcessingDeadline, "the target still says processing after the polling deadline; stays unverified, handed off", caps)
			ev.Evidence.CurrentState = "processing"
			return ev, nil
		}
		wait := r.jitter(r.pollCap(i.Polls + 1))
		next := now.Add(wait)
		if next.After(deadline) {
			next = deadline
		}
		return &events.TargetProcessingData{Poll: i.Polls + 1, NextCheckAt: next, Deadline: deadline}, nil
	case adapter.StatusFailed:
		return &events.TargetFailedData{Code: nonEmpty(st.Code, "target_failed"), PartialEffects: st.PartialEffects}, nil
	}
	return r.deferRead(i, "status", fmt.Errorf("unknown status state %q", st.State)), nil
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// pollCap is the exponential cap of poll n: PollBase·2^(n-1), bounded.
func (r *Reconciler) pollCap(n int) time.Duration {
	d := r.cfg.PollBase
	for k := 1; k < n && d < r.cfg.MaxRecheck; k++ {
		d *= 2
	}
	return min(d, r.cfg.MaxRecheck)
}

// verify reads the found (or answered) object back and checks every
// identity field; all must hold for a receipt.
func (r *Reconciler) verify(ctx context.Context, i *fsm.Intent, route producer.Route, caps adapter.Capabilities) (events.Data, error) {
	now := r.cfg.Now()
	if caps.StatusQuery {
		return r.verifyStatus(ctx, i, route)
	}
	r.readCalls.add(1)
	rec, err := route.Adapter.Get(ctx, i.ExternalID)
	if errors.Is(err, adapter.ErrNotFound) {
		return &events.CheckDeferredData{Reason: "readback_not_visible", NextCheckAt: now.Add(r.backoff(i.Checks + 1))}, nil
	}
	if err != nil {
		return r.deferRead(i, "get", err), nil
	}
	liveURL := rec.LiveURL
	if liveURL == "" {
		liveURL = i.LiveURL
	}
	urlCheck := events.Check{Name: "url", Detail: "no live URL"}
	if liveURL != "" {
		r.readCalls.add(1)
		code, err := route.Adapter.Probe(ctx, liveURL)
		switch {
		case err != nil:
			urlCheck.Detail = "probe failed: " + safeErr(err)
		default:
			urlCheck.OK = code == http.StatusOK
			urlCheck.Detail = fmt.Sprintf("HTTP %d", code)
		}
	}
	ref := Match(i, rec)
	checks := []events.Check{
		urlCheck,
		{Name: "author", OK: !contains(ref.Mismatch, "author"), Detail: "author_id " + rec.AuthorID},
		{Name: "payload", OK: !contains(ref.Mismatch, "payload"), Detail: "canon/v1 sha256 of body and assets"},
		{Name: "parent", OK: !contains(ref.Mismatch, "parent"), Detail: "parent " + quoteOrNone(rec.ParentID)},
		{Name: "visibility", OK: rec.Visibility == "public", Detail: "visibility " + quoteOrNone(rec.Visibility)},
	}
	return concludeReadback(i, rec.ExternalID, liveURL, checks, now), nil
}

func (r *Reconciler) verifyStatus(ctx context.Context, i *fsm.Intent, route producer.Route) (events.Data, error) {
	now := r.cfg.Now()
	sq := route.Adapter.(adapter.StatusQuerier)
	r.readCalls.add(1)
	st, err := sq.Status(ctx, adapter.StatusQuery{RequestID: i.Recorded.RequestID, IdempotencyKey: i.Recorded.IdempotencyKey, Account: i.Recorded.Account})
	if err != nil {
		return &events.CheckDeferredData{Reason: "readback_not_visible", NextCheckAt: now.Add(r.backoff(i.Checks + 1))}, nil
	}
	sum, herr := events.PayloadSHA256(st.Payload)
	checks := []events.Check{
		{Name: "status", OK: st.State == adapter.StatusCompleted, Detail: "state " + st.State},
		{Name: "payload", OK: herr == nil && len(st.Payload) > 0 && sum == i.Recorded.PayloadSHA256, Detail: "the applied change equals the approved change"},
	}
	if st.AppliedVersion != "" {
		detail := "applied version " + st.AppliedVersion
		if st.Version != "" && st.Version != st.AppliedVersion {
			// A later change by someone else: our past success and the
			// current state are recorded apart; nothing is re-applied.
			detail += "; current version " + st.Version + " (changed later by another writer, not re-applied)"
		}
		checks = append(checks, events.Check{Name: "version", OK: true, Detail: detail})
	}
	extID := st.ExternalID
	if extID == "" {
		extID = i.ExternalID
	}
	return concludeReadback(i, extID, st.LiveURL, checks, now), nil
}

func concludeReadback(i *fsm.Intent, extID, liveURL string, checks []events.Check, now time.Time) events.Data {
	var failed []string
	for _, c := range checks {
		if !c.OK {
			failed = append(failed, c.Name)
		}
	}
	if len(failed) > 0 {
		return &events.ReadbackFailedData{ExternalID: extID, Checks: checks, Failed: failed}
	}
	return &events.ReadbackPassedData{Receipt: events.Receipt{
		ExternalID: extID, LiveURL: liveURL, Checks: checks, ReadbackAt: now.UTC(),
		PayloadSHA256: i.Recorded.PayloadSHA256, Source: "readback",
		IdempotencyKey: i.Recorded.IdempotencyKey, RequestID: i.Recorded.RequestID, AttemptID: lastAttemptID(i),
	}}
}

func lastAttemptID(i *fsm.Intent) string {
	if a := i.LastAttempt(); a != nil {
		return a.ID
	}
	return ""
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func quoteOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", s)
}

// searchCache lets the intents of one fetched batch that search the same
// route and account share list calls: windows that overlap are merged and
// listed once.
type searchCache struct {
	mu      sync.Mutex
	planned map[string][]span // route|account → merged windows to list
	done    map[string][]spanRecords
}

type span struct{ from, to time.Time }

type spanRecords struct {
	span
	recs []adapter.Record
	err  error
}

func newSearchCache() *searchCache {
	return &searchCache{planned: map[string][]span{}, done: map[string][]spanRecords{}}
}

// plan registers a window; overlapping windows of one key are merged.
func (c *searchCache) plan(route, account string, from, to time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := route + "|" + account
	spans := c.planned[k]
	merged := span{from, to}
	var keep []span
	for _, s := range spans {
		if s.from.After(merged.to) || s.to.Before(merged.from) {
			keep = append(keep, s)
			continue
		}
		if s.from.Before(merged.from) {
			merged.from = s.from
		}
		if s.to.After(merged.to) {
			merged.to = s.to
		}
	}
	c.planned[k] = append(keep, merged)
}

// get returns the records of a planned span covering [from, to], listing
// it on first use; an unplanned window is listed on its own.
func (c *searchCache) get(ctx context.Context, r *Reconciler, route producer.Route, account string, from, to time.Time) ([]adapter.Record, error) {
	k := route.Name + "|" + account
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.done[k] {
		if !d.from.After(from) && !d.to.Before(to) {
			return d.recs, d.err
		}
	}
	want := span{from, to}
	for _, s := range c.planned[k] {
		if !s.from.After(from) && !s.to.Before(to) {
			want = s
			break
		}
	}
	r.readCalls.add(1)
	recs, err := route.Adapter.Search(ctx, adapter.SearchQuery{Account: account, From: want.from, To: want.to})
	c.done[k] = append(c.done[k], spanRecords{span: want, recs: recs, err: err})
	return recs, err
}
