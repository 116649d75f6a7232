package projector

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
)

// The console's charts: per route, the intents created in a window by the
// state they are in now, and how long unknown outcomes took to settle.

// FlowFilter selects what Flow covers.
type FlowFilter struct {
	// Tenant, when set, covers only that tenant's intents.
	Tenant string
	// Routes each get a RouteFlow, in this order, even without intents;
	// routes not named are left out. Empty: every route with intents in
	// the window, sorted.
	Routes []string
	// Account, when set, covers only that account's intents.
	Account string
	// From and To (both inclusive: To is usually now) are the window.
	From, To time.Time
	// Buckets divides the window into equal slots (default 12).
	Buckets int
}

// MaxFlowScan bounds the intents Flow folds for settle times: the
// most recently changed ones (RouteFlow.Truncated says when more were
// left out).
const MaxFlowScan = 2000

// Flow is the answer of Flow.
type Flow struct {
	From          time.Time   `json:"from"`
	To            time.Time   `json:"to"`
	BucketSeconds float64     `json:"bucket_seconds"`
	Routes        []RouteFlow `json:"routes"`
}

// RouteFlow are one route's figures over the window.
type RouteFlow struct {
	Route string `json:"route"`
	// ByState counts the intents created in the window by their state now
	// (every state but none is present).
	ByState map[fsm.State]int `json:"by_state"`
	// Buckets are the same counts per slot of the window, oldest first.
	Buckets []StateBucket `json:"buckets"`
	// Settles are the unknown outcomes that settled in the window, in the
	// order they settled: from the event that made the intent unknown to
	// the first event after which it was settled (fsm.Settled).
	Settles []SettleTime `json:"settles"`
	// Unsettled are the intents whose outcome is unknown now, with the
	// time they have waited so far (to the window's end).
	Unsettled []SettleTime `json:"unsettled"`
	// Truncated: more than MaxFlowScan intents changed in the window,
	// and only the most recent were looked at for settle times.
	Truncated bool `json:"truncated,omitempty"`
}

// StateBucket counts the intents created in one slot of the window by
// their state now (states without intents are left out).
type StateBucket struct {
	From   time.Time         `json:"from"`
	Counts map[fsm.State]int `json:"counts"`
}

// SettleTime is one unknown outcome's wait: from UnknownAt to SettledAt
// (zero while unsettled), settling in State.
type SettleTime struct {
	IntentID  string    `json:"intent_id"`
	UnknownAt time.Time `json:"unknown_at"`
	SettledAt time.Time `json:"settled_at,omitzero"`
	State     fsm.State `json:"state"`
	Seconds   float64   `json:"seconds"`
}

// Flow computes the per-route figures of f's window from the views.
func (p *Projector) Flow(ctx context.Context, f FlowFilter) (*Flow, error) {
	if f.Buckets <= 0 {
		f.Buckets = 12
	}
	if !f.From.Before(f.To) {
		return nil, errors.Errorf("flow: the window %s..%s is empty", f.From, f.To)
	}
	f.From, f.To = f.From.UTC(), f.To.UTC()
	width := f.To.Sub(f.From) / time.Duration(f.Buckets)
	if width <= 0 {
		return nil, errors.Errorf("flow: %d buckets in %s", f.Buckets, f.To.Sub(f.From))
	}
	st := &Flow{From: f.From, To: f.To, BucketSeconds: width.Seconds()}
	byRoute := map[string]*RouteFlow{}
	get := func(route string) *RouteFlow {
		if r, ok := byRoute[route]; ok {
			return r
		}
		if len(f.Routes) > 0 && !slices.Contains(f.Routes, route) {
			return nil
		}
		r := &RouteFlow{Route: route, ByState: ZeroStates(), Buckets: make([]StateBucket, f.Buckets),
			Settles: []SettleTime{}, Unsettled: []SettleTime{}}
		for k := range r.Buckets {
			r.Buckets[k] = StateBucket{From: f.From.Add(time.Duration(k) * width), Counts: map[fsm.State]int{}}
		}
		byRoute[route] = r
		return r
	}
	for _, r := range f.Routes {
		get(r)
	}
	scope, scopeArgs := f.scope()
	if err := p.countCreated(ctx, f, width, scope, scopeArgs, get); err != nil {
		return nil, errors.Errorf("flow: %w", err)
	}
	if err := p.settleTimes(ctx, f, scope, scopeArgs, get); err != nil {
		return nil, errors.Errorf("flow: %w", err)
	}
	names := f.Routes
	if len(names) == 0 {
		for r := range byRoute {
			names = append(names, r)
		}
		slices.Sort(names)
	}
	st.Routes = make([]RouteFlow, 0, len(names))
	for _, name := range names {
		r := byRoute[name]
		slices.SortFunc(r.Settles, func(a, b SettleTime) int { return a.SettledAt.Compare(b.SettledAt) })
		slices.SortFunc(r.Unsettled, func(a, b SettleTime) int { return a.UnknownAt.Compare(b.UnknownAt) })
		st.Routes = append(st.Routes, *r)
	}
	return st, nil
}

// scope is the tenant and account condition of f.
func (f FlowFilter) scope() (string, []any) {
	var w sqlConds
	w.eq("i.tenant", f.Tenant)
	w.eq("i.account", f.Account)
	if len(w.conds) == 0 {
		return "", nil
	}
	return " AND " + strings.Join(w.conds, " AND "), w.args
}

// sqlConds is a WHERE clause in the making: its conditions, joined by
// AND, and their arguments.
type sqlConds struct {
	conds []string
	args  []any
}

// add adds cond with its arguments.
func (w *sqlConds) add(cond string, args ...any) {
	w.conds, w.args = append(w.conds, cond), append(w.args, args...)
}

// eq adds "col = v" unless v is empty.
func (w *sqlConds) eq(col, v string) {
	if v != "" {
		w.add(col+" = ?", v)
	}
}

// countCreated counts the intents created in the window by route, state
// and second (one row per group, however many intents).
func (p *Projector) countCreated(ctx context.Context, f FlowFilter, width time.Duration, scope string, scopeArgs []any,
	get func(string) *RouteFlow) error {
	args := append([]any{fmtTimeNN(f.From), fmtTimeNN(f.To)}, scopeArgs...)
	type group struct {
		route, sec string
		state      fsm.State
		n          int
	}
	groups, err := queryAll(ctx, p.r, func(s scanner) (g group, err error) {
		err = s.Scan(&g.route, &g.state, &g.sec, &g.n)
		return
	}, `SELECT i.route, i.state, substr(i.created_at, 1, 19), count(*) FROM intents i
		WHERE i.created_at >= ? AND i.created_at <= ?`+scope+` GROUP BY 1, 2, 3`, args...)
	if err != nil {
		return err
	}
	for _, g := range groups {
		r := get(g.route)
		if r == nil {
			continue
		}
		at, err := time.Parse("2006-01-02T15:04:05", g.sec)
		if err != nil {
			return errors.Errorf("created_at %q: %w", g.sec, err)
		}
		k := min(max(int(at.Sub(f.From)/width), 0), len(r.Buckets)-1)
		r.ByState[g.state] += g.n
		r.Buckets[k].Counts[g.state] += g.n
	}
	return nil
}

// settleTimes folds the intents that changed in the window after a write
// (or are unknown now) and records each unknown episode that settled in
// the window or is still open.
func (p *Projector) settleTimes(ctx context.Context, f FlowFilter, scope string, scopeArgs []any,
	get func(string) *RouteFlow) error {
	args := append([]any{fmtTimeNN(f.From)}, scopeArgs...)
	args = append(args, MaxFlowScan+1)
	type pick struct{ id, route string }
	picks, err := queryAll(ctx, p.r, func(s scanner) (pk pick, err error) {
		err = s.Scan(&pk.id, &pk.route)
		return
	}, `SELECT i.intent_id, i.route FROM intents i
		WHERE ((i.last_event_at >= ? AND i.attempts > 0) OR i.unknown_since IS NOT NULL)`+scope+`
		ORDER BY i.last_event_at DESC, i.intent_id LIMIT ?`, args...)
	if err != nil {
		return err
	}
	truncated := len(picks) > MaxFlowScan
	if truncated {
		picks = picks[:MaxFlowScan]
	}
	for _, pk := range picks {
		r := get(pk.route)
		if r == nil {
			continue
		}
		r.Truncated = r.Truncated || truncated
		h, err := p.history(ctx, pk.id)
		if err != nil {
			return err
		}
		settles, open, err := unknownEpisodes(pk.id, h)
		if err != nil {
			return err
		}
		for _, s := range settles {
			if !s.SettledAt.Before(f.From) && !s.SettledAt.After(f.To) {
				r.Settles = append(r.Settles, s)
			}
		}
		if open != nil && !open.UnknownAt.After(f.To) {
			open.Seconds = f.To.Sub(open.UnknownAt).Seconds()
			r.Unsettled = append(r.Unsettled, *open)
		}
	}
	return nil
}

// history reads an intent's applied events in version order.
func (p *Projector) history(ctx context.Context, intentID string) ([]events.Event, error) {
	return queryAll(ctx, p.r, func(s scanner) (events.Event, error) {
		_, e, err := scanEvent(s)
		return e, err
	}, loadEventsSQL, intentID)
}

// scanEvent reads a row (seq, raw) of the events table.
func scanEvent(s scanner) (uint64, events.Event, error) {
	var seq uint64
	var raw []byte
	if err := s.Scan(&seq, &raw); err != nil {
		return 0, events.Event{}, err
	}
	e, err := events.Decode(raw)
	if err != nil {
		return 0, e, errors.Errorf("seq %d: %w", seq, err)
	}
	return seq, e, nil
}

// unknownEpisodes folds h and returns each time the intent became unknown
// and then settled (fsm.Settled), and the episode still open at its end
// (nil when none).
func unknownEpisodes(id string, h []events.Event) (settled []SettleTime, open *SettleTime, err error) {
	i := &fsm.Intent{State: fsm.None}
	for _, e := range h {
		if err := i.Apply(e); err != nil {
			return nil, nil, errors.Errorf("intent %s: %w", id, err)
		}
		switch {
		case open == nil && i.State == fsm.Unknown:
			open = &SettleTime{IntentID: id, UnknownAt: e.At.UTC(), State: i.State}
		case open != nil && fsm.Settled(i.State):
			open.SettledAt, open.State = e.At.UTC(), i.State
			open.Seconds = open.SettledAt.Sub(open.UnknownAt).Seconds()
			settled = append(settled, *open)
			open = nil
		}
	}
	if open != nil {
		open.State = i.State
	}
	return settled, open, nil
}
