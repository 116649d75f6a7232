package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/internal/telemetry"
)

// The reads a decision needs (search, status query, readback), handed to
// the decider's Conclude functions. Nothing here decides: a failed read
// is a read failure (ConcludeReadError), never "not found".

// safeErr renders an adapter error as its class and code only.
func safeErr(err error) string {
	var ce *adapter.CallError
	if errors.As(err, &ce) {
		return ce.Error()
	}
	if errors.Is(err, adapter.ErrListingIncomplete) {
		return "listing_incomplete"
	}
	if errors.Is(err, adapter.ErrNotFound) {
		return "not found"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "read_error"
}

// readScope is the intent a read is made for.
func readScope(i *fsm.Intent) adapter.ReadScope {
	return adapter.ReadScope{IntentID: i.ID, RequestID: i.Recorded.RequestID, IdempotencyKey: i.Recorded.IdempotencyKey,
		Account: i.Recorded.Account, ParentExternalID: i.Recorded.ParentExternalID, Payload: i.Recorded.Payload}
}

// reader is the adapter to make an intent's reads with (a route whose read
// templates use the intent's values reads per intent).
func reader(route adapter.Route, i *fsm.Intent) adapter.Adapter {
	return adapter.ForIntent(route.Adapter, readScope(i))
}

// candidate reduces an adapter record to what the decision compares
// (sums: the digests of the fetch's records, or nil).
func candidate(route adapter.Route, i *fsm.Intent, rec adapter.Record, sums *payloadSums) fsm.Candidate {
	c := fsm.Candidate{ExternalID: rec.ExternalID, LiveURL: rec.LiveURL, AuthorID: rec.AuthorID, ParentID: rec.ParentID, ParentFrom: rec.ParentFrom,
		Visibility: rec.Visibility, CreatedAt: rec.CreatedAt, CorrelationID: rec.CorrelationID}
	if len(rec.Payload) > 0 {
		c.PayloadSHA256 = sums.sum(rec.Payload)
	}
	if c.PayloadSHA256 != i.Recorded.PayloadSHA256 && len(rec.Payload) > 0 {
		if r, ok := route.Adapter.(adapter.PayloadComparer); ok {
			c.Normalised = r.EquivalentPayload(i.Recorded.Payload, rec.Payload)
		}
		if r, ok := route.Adapter.(adapter.Resembler); ok && c.Normalised == nil {
			c.Resembles = r.Resembles(i.Recorded.Payload, rec.Payload)
		}
	}
	return c
}

// reconcile runs the strategy's read-only query once and returns the
// event that concludes the ReconcileStarted step.
func (r *Reconciler) reconcile(ctx context.Context, i *fsm.Intent, route adapter.Route, caps events.Capabilities, strategy string, sc *searchCache) (events.Data, error) {
	switch strategy {
	case fsm.StrategyStatus:
		st, err := r.status(ctx, i, route)
		if err != nil && !errors.Is(err, adapter.ErrNotFound) {
			if errors.Is(err, ErrRouteMissing) {
				return nil, err
			}
			return r.readFailure(i, caps, "status", err), nil
		}
		return r.dec.ConcludeStatus(i, caps, r.cfg.Now(), st), nil
	case fsm.StrategySearch:
		sctx, span := telemetry.Start(ctx, "settle.reconcile.search")
		recs, listedAt, err := r.candidates(sctx, i, route, sc)
		span.Int(telemetry.AttrCount, len(recs))
		span.End(err)
		incomplete := errors.Is(err, adapter.ErrListingIncomplete)
		if err != nil && !incomplete {
			return r.readFailure(i, caps, "search", err), nil
		}
		var sums *payloadSums
		if sc != nil {
			sums = &sc.sums
		}
		cands := make([]fsm.Candidate, len(recs))
		for k, rec := range recs {
			cands[k] = candidate(route, i, rec, sums)
		}
		if incomplete {
			// What was read can prove our write present, never absent.
			r.logRead(i, "search", err)
			return r.dec.ConcludeIncompleteSearch(i, caps, r.cfg.Now(), listedAt, cands, safeErr(err)), nil
		}
		// The window is judged by when the listing started, not by when it
		// returned: a listing that straddled the window's end may have
		// read its pages before a write inside the window showed.
		return r.dec.ConcludeSearch(i, caps, r.cfg.Now(), listedAt, cands), nil
	}
	return nil, errors.Errorf("step %s: %w: strategy %q", i.ID, ErrRouteMissing, strategy)
}

// readFailure concludes a failed read, honouring the wait the API asked
// for (CallError.RetryAfter).
func (r *Reconciler) readFailure(i *fsm.Intent, caps events.Capabilities, what string, err error) events.Data {
	r.logRead(i, what, err)
	var wait time.Duration
	var ce *adapter.CallError
	if errors.As(err, &ce) {
		wait = ce.RetryAfter
	}
	return r.dec.ConcludeReadFailure(i, caps, r.cfg.Now(), what, safeErr(err), wait)
}

func (r *Reconciler) logRead(i *fsm.Intent, what string, err error) {
	r.cfg.Logger.Warn("reconciler: external read failed; will look again", "intent", i.ID, "read", what, "err", safeErr(err))
}

// status asks the external system for its own record of the write
// (Found false: it has none).
func (r *Reconciler) status(ctx context.Context, i *fsm.Intent, route adapter.Route) (obs fsm.StatusObservation, err error) {
	ctx, span := telemetry.Start(ctx, "settle.reconcile.status")
	if span.On() {
		defer func() { span.End(err) }()
	}
	sq, ok := reader(route, i).(adapter.StatusQuerier)
	if !ok {
		return fsm.StatusObservation{}, errors.Errorf("route %s: %w: its adapter has no status query", route.Name, ErrRouteMissing)
	}
	r.readCalls.Add(1)
	st, err := sq.Status(adapter.Calling(ctx, route, adapter.KindStatus), adapter.StatusQuery{RequestID: i.Recorded.RequestID, IdempotencyKey: i.Recorded.IdempotencyKey, Account: i.Recorded.Account})
	if errors.Is(err, adapter.ErrNotFound) {
		return fsm.StatusObservation{}, nil
	}
	if err != nil {
		return fsm.StatusObservation{}, err
	}
	obs = fsm.StatusObservation{Found: true, State: st.State, ExternalID: st.ExternalID, LiveURL: st.LiveURL,
		Code: st.Code, PartialEffects: st.PartialEffects, Version: st.Version, AppliedVersion: st.AppliedVersion, CorrelationID: st.CorrelationID, Account: st.Account}
	if len(st.Payload) > 0 {
		if sum, err := events.PayloadSHA256(st.Payload); err == nil {
			obs.PayloadSHA256 = sum
		}
	}
	return obs, nil
}

// candidates returns the route's records in the intent's window (full
// records: a listing that omits bodies is completed with Get) and when
// the listing they come from started (a shared listing's start, when the
// intent's window was listed with others'). A listing whose end was not
// proven returns what it read with its error (adapter.ErrListingIncomplete).
func (r *Reconciler) candidates(ctx context.Context, i *fsm.Intent, route adapter.Route, sc *searchCache) ([]adapter.Record, time.Time, error) {
	from, to := fsm.Window(i)
	ad := reader(route, i)
	var recs []adapter.Record
	var listedAt time.Time
	var listErr error
	searchCtx, readCtx := adapter.Calling(ctx, route, adapter.KindSearch), adapter.Calling(ctx, route, adapter.KindReadback)
	if sc != nil {
		recs, listedAt, listErr = sc.get(searchCtx, r, route.Name, ad, searchKey(route, i), i.Recorded.Account, from, to)
	} else {
		r.readCalls.Add(1)
		listedAt = r.cfg.Now()
		recs, listErr = ad.Search(searchCtx, adapter.SearchQuery{Account: i.Recorded.Account, From: from, To: to})
	}
	if listErr != nil && !errors.Is(listErr, adapter.ErrListingIncomplete) {
		return nil, time.Time{}, listErr
	}
	out := make([]adapter.Record, 0, len(recs))
	for _, rec := range recs {
		// A record whose marker names this intent is ours whatever its
		// creation time says (the API's clock may be off): never dropped.
		ours := rec.CorrelationID != "" && rec.CorrelationID == i.ID
		if !ours && !rec.CreatedAt.IsZero() && (rec.CreatedAt.Before(from) || rec.CreatedAt.After(to)) {
			continue
		}
		if rec.Partial {
			r.readCalls.Add(1)
			full, err := ad.Get(readCtx, rec.ExternalID)
			if errors.Is(err, adapter.ErrNotFound) {
				if ours {
					// Listed with our marker, gone since: still proof that
					// our write landed (its payload unread: handed off).
					rec.Payload = nil
					out = append(out, rec)
				}
				continue
			}
			if err != nil {
				return nil, time.Time{}, err
			}
			rec = full
		}
		out = append(out, rec)
	}
	return out, listedAt, listErr // an incomplete listing: what it read, and why it is not all
}

// verify reads the found (or answered) object back; the decider checks
// every identity field, and all must hold for a receipt.
func (r *Reconciler) verify(ctx context.Context, i *fsm.Intent, route adapter.Route, caps events.Capabilities) (events.Data, error) {
	if caps.StatusQuery {
		st, err := r.status(ctx, i, route)
		if err != nil {
			if errors.Is(err, ErrRouteMissing) {
				return nil, err
			}
			return r.readFailure(i, caps, "status", err), nil
		}
		return r.dec.ConcludeStatusReadback(i, caps, r.cfg.Now(), st), nil
	}
	ctx, span := telemetry.Start(ctx, "settle.reconcile.readback")
	defer span.End(nil)
	ad := reader(route, i)
	ctx = adapter.Calling(ctx, route, adapter.KindReadback)
	r.readCalls.Add(1)
	rec, err := ad.Get(ctx, i.ExternalID)
	if errors.Is(err, adapter.ErrNotFound) {
		return r.dec.ConcludeReadback(i, caps, r.cfg.Now(), fsm.Readback{Found: false}), nil
	}
	if err != nil {
		return r.readFailure(i, caps, "get", err), nil
	}
	liveURL := rec.LiveURL
	if liveURL == "" {
		liveURL = i.LiveURL
	}
	// The page is fetched only for a route whose readback checks its url
	// (a route may declare that it does not: a private repository's
	// pages answer 404 to a visitor, and a failing web site would make
	// every readback a failed read).
	probe := 0
	if liveURL != "" && slices.Contains(fsm.RequiredChecks(caps), "url") {
		r.readCalls.Add(1)
		code, err := ad.Probe(ctx, liveURL)
		if err != nil {
			// A probe that failed is a failed read, not a failed check.
			return r.readFailure(i, caps, "probe", err), nil
		}
		if code >= 500 || code == http.StatusTooManyRequests {
			// The page's server is in trouble: that proves nothing about
			// the object; look again.
			return r.dec.ConcludeReadError(i, caps, r.cfg.Now(), "probe", fmt.Sprintf("HTTP %d", code)), nil
		}
		probe = code
	}
	return r.dec.ConcludeReadback(i, caps, r.cfg.Now(), fsm.Readback{Found: true, Object: candidate(route, i, rec, nil), ProbeStatus: probe}), nil
}

// searchCache lets the intents of one fetched batch that search the same
// route and account share list calls: windows that overlap are merged and
// listed once. One key lists one span at a time (the next caller then
// finds it done); different keys list concurrently.
type searchCache struct {
	mu      sync.Mutex
	planned map[string][]span // route|account → merged windows to list
	done    map[string][]spanRecords
	listing map[string]*sync.Mutex // held by the one listing of a key
	// sums are the payload digests of the listed records: every intent
	// that shares a listing compares each of its records.
	sums payloadSums
}

// payloadSums memoises events.PayloadSHA256 by payload: the intents that
// share a listing each compare every record of it.
type payloadSums struct {
	mu sync.Mutex
	m  map[string]string // payload → digest ("" when it has none)
}

// sum is the payload's digest, "" when it cannot be canonicalised; on a
// nil memo it is computed.
func (p *payloadSums) sum(payload json.RawMessage) string {
	if p == nil {
		return payloadSum(payload)
	}
	p.mu.Lock()
	s, ok := p.m[string(payload)]
	p.mu.Unlock()
	if ok {
		return s
	}
	s = payloadSum(payload)
	p.mu.Lock()
	if p.m == nil {
		p.m = map[string]string{}
	}
	p.m[string(payload)] = s
	p.mu.Unlock()
	return s
}

func payloadSum(payload json.RawMessage) string {
	sum, err := events.PayloadSHA256(payload)
	if err != nil {
		return ""
	}
	return sum
}

type span struct{ from, to time.Time }

type spanRecords struct {
	span
	recs []adapter.Record
	err  error
	// listedAt is when the listing started: what every intent that uses
	// it judges its window by.
	listedAt time.Time
}

func newSearchCache() *searchCache {
	return &searchCache{planned: map[string][]span{}, done: map[string][]spanRecords{}, listing: map[string]*sync.Mutex{}}
}

// searchKey tells which intents of one account may share a listing.
func searchKey(route adapter.Route, i *fsm.Intent) string {
	return adapter.SearchKey(route.Adapter, readScope(i))
}

// plan registers a window; overlapping windows of one key are merged.
func (c *searchCache) plan(route, key, account string, from, to time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := route + "|" + key + "|" + account
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
// it on first use, and when that listing started; an unplanned window is
// listed on its own. Callers of one key wait for each other (the first
// lists, the next find it done); the cache's own lock is never held
// across a listing.
func (c *searchCache) get(ctx context.Context, r *Reconciler, route string, ad adapter.Adapter, key, account string, from, to time.Time) ([]adapter.Record, time.Time, error) {
	k := route + "|" + key + "|" + account
	c.mu.Lock()
	l := c.listing[k]
	if l == nil {
		l = &sync.Mutex{}
		c.listing[k] = l
	}
	c.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	c.mu.Lock()
	for _, d := range c.done[k] {
		if !d.from.After(from) && !d.to.Before(to) {
			c.mu.Unlock()
			return d.recs, d.listedAt, d.err
		}
	}
	want := span{from, to}
	for _, s := range c.planned[k] {
		if !s.from.After(from) && !s.to.Before(to) {
			want = s
			break
		}
	}
	c.mu.Unlock()
	r.readCalls.Add(1)
	listedAt := r.cfg.Now()
	recs, err := ad.Search(ctx, adapter.SearchQuery{Account: account, From: want.from, To: want.to})
	c.mu.Lock()
	c.done[k] = append(c.done[k], spanRecords{span: want, recs: recs, err: err, listedAt: listedAt})
	c.mu.Unlock()
	return recs, listedAt, err
}
