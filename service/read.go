package service

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
)

// load reads the intent id from the log (one read, folded once) and
// checks that the caller may see it: another tenant's intent is
// ErrNotFound, one outside the caller's limits ErrForbidden. ours says
// that id derives from the caller's tenant (a tool call's task and step):
// otherwise a history that cannot be folded (producer.HeldError), which
// does not say whose intent it is, is shown only when the views know the
// intent as the caller's tenant's, and is ErrNotFound when they do not.
func (s *Service) load(ctx context.Context, c Caller, id string, ours bool) (*ledger.History, *fsm.Intent, error) {
	if err := events.ValidateIntentID(id); err != nil {
		return nil, nil, invalid("intent_id", "is not an intent id (in_ + 32 base32 characters)")
	}
	h, i, err := s.cfg.Intents.Load(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil, ErrNotFound
	}
	var he *producer.HeldError
	if errors.As(err, &he) && !ours {
		if oerr := s.heldOwner(ctx, c, id); oerr != nil {
			return nil, nil, oerr
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if i.Recorded.Tenant != c.Tenant {
		// Another tenant's intent: not even its existence is shown.
		return nil, nil, ErrNotFound
	}
	if !c.RouteAllowed(i.Route()) || !c.AccountAllowed(i.Account()) {
		return nil, nil, forbidden("", "the caller may not see this intent's route or account")
	}
	return h, i, nil
}

// heldOwner checks, from the views, that the intent id whose history
// cannot be folded is the caller's tenant's and within its limits:
// another tenant's held intent, or one the views do not know (nothing
// then says whose it is), is ErrNotFound — a caller that names an id
// learns nothing of an intent it cannot be shown to own.
func (s *Service) heldOwner(ctx context.Context, c Caller, id string) error {
	page, err := s.cfg.Views.List(ctx, projector.Filter{Tenant: c.Tenant, Search: id, Limit: projector.MaxLimit})
	if err != nil {
		return err
	}
	for _, v := range page.Items {
		if v.IntentID != id {
			continue // a request id that reads like the intent id
		}
		if !c.RouteAllowed(v.Route) || !c.AccountAllowed(v.Account) {
			return forbidden("", "the caller may not see this intent's route or account")
		}
		return nil
	}
	return ErrNotFound
}

// Get reads one intent from the log, waiting up to wait for it to settle.
func (s *Service) Get(ctx context.Context, c Caller, id string, wait time.Duration) (*ledger.History, *fsm.Intent, error) {
	if err := needScope(c, ScopeRead); err != nil {
		return nil, nil, err
	}
	h, i, err := s.load(ctx, c, id, false)
	if err != nil || wait <= 0 || Settled(i.State) {
		return h, i, err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return s.await(wctx, id)
}

// Step names a tool call's intent: route, task and step, the account (""
// for the caller's, or the one it was submitted for), and the payload
// when keys include it.
type Step struct {
	Route, Account, Task, Step string
	Payload                    json.RawMessage
	KeyIncludesPayload         bool
}

// FindStep reads the intent of a tool call (the caller's tenant's),
// waiting up to wait for it to settle. Without an account it is the
// caller's only ones, or the account the step was submitted for (from
// the views; several are refused, naming the account).
func (s *Service) FindStep(ctx context.Context, c Caller, st Step, wait time.Duration) (*ledger.History, *fsm.Intent, error) {
	if err := needScope(c, ScopeRead); err != nil {
		return nil, nil, err
	}
	if err := c.checkRoute(st.Route); err != nil {
		return nil, nil, err
	}
	key, err := s.cfg.Intents.ToolRequestID(producer.ToolCall{Tenant: c.Tenant, Task: st.Task, Step: st.Step,
		KeyIncludesPayload: st.KeyIncludesPayload, Route: st.Route, Account: st.Account, Payload: st.Payload})
	if err != nil {
		return nil, nil, err
	}
	accounts := []string{st.Account}
	switch {
	case st.Account != "":
	case len(c.Accounts) > 0:
		accounts = c.Accounts
	default:
		if accounts, err = s.stepAccounts(ctx, c, st.Route, key); err != nil {
			return nil, nil, err
		}
		if len(accounts) > 1 {
			return nil, nil, invalid("account", fmt.Sprintf("this task and step were submitted for several accounts (%v); name one", accounts))
		}
	}
	for _, acct := range accounts {
		id := events.ScopedIntentID(c.Tenant, st.Route, acct, key)
		h, i, err := s.load(ctx, c, id, true) // ids of the caller's tenant
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrForbidden):
			continue
		case err != nil:
			return nil, nil, err
		case wait > 0 && !Settled(i.State):
			wctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			return s.await(wctx, id)
		}
		return h, i, nil
	}
	return nil, nil, ErrNotFound
}

// stepAccounts lists the accounts (within the caller's limits) a request
// id was submitted for on route, from the views, which may lag a submit
// just made: they catch up once, bounded, when they know none.
func (s *Service) stepAccounts(ctx context.Context, c Caller, route, key string) ([]string, error) {
	vs, err := s.cfg.Views.ByRequest(ctx, c.Tenant, route, key)
	if err == nil && len(vs) == 0 {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if s.cfg.Views.CatchUp(cctx) == nil {
			vs, err = s.cfg.Views.ByRequest(ctx, c.Tenant, route, key)
		}
		cancel()
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range vs {
		if c.AccountAllowed(v.Account) && !slices.Contains(out, v.Account) {
			out = append(out, v.Account)
		}
	}
	return out, nil
}

// List lists the caller's tenant's intents from the views. A caller
// limited to routes or accounts must name one of them in f unless it has
// exactly one.
func (s *Service) List(ctx context.Context, c Caller, f projector.Filter) (projector.Page, error) {
	if err := needScope(c, ScopeRead); err != nil {
		return projector.Page{}, err
	}
	f.Tenant = c.Tenant
	var err error
	if f.Route, err = limited("route", f.Route, c.Routes); err != nil {
		return projector.Page{}, err
	}
	if f.Account, err = limited("account", f.Account, c.Accounts); err != nil {
		return projector.Page{}, err
	}
	page, err := s.cfg.Views.List(ctx, f)
	if err != nil && f.After != "" && strings.Contains(err.Error(), "After:") {
		return projector.Page{}, invalid("after", "is not a cursor from a previous page")
	}
	return page, err
}

// Pending lists, newest first, at most limit of the caller's intents that
// wait for a human (awaiting_approval, manual_action) on route ("" for
// every route it may use): found in the views, each read again from the
// log, which the views may lag. An intent whose history cannot be folded
// (producer.HeldError) is left out rather than failing the list: reading
// it (status, GET) names it held, and settle audit reports it.
func (s *Service) Pending(ctx context.Context, c Caller, route string, limit int) ([]*fsm.Intent, error) {
	if err := needScope(c, ScopeRead); err != nil {
		return nil, err
	}
	routes := []string{route}
	if err := c.checkRoute(route); err != nil {
		return nil, err
	}
	if route == "" && len(c.Routes) > 0 {
		routes = c.Routes
	}
	accounts := []string{""}
	if len(c.Accounts) > 0 {
		accounts = c.Accounts
	}
	seen := map[string]bool{}
	var views []projector.IntentView
	for _, st := range []fsm.State{fsm.AwaitingApproval, fsm.ManualAction} {
		for _, r := range routes {
			for _, acct := range accounts {
				page, err := s.cfg.Views.List(ctx, projector.Filter{Tenant: c.Tenant, State: st, Route: r, Account: acct, Limit: limit})
				if err != nil {
					return nil, err
				}
				for _, v := range page.Items {
					if !seen[v.IntentID] {
						seen[v.IntentID] = true
						views = append(views, v)
					}
				}
			}
		}
	}
	sort.Slice(views, func(x, y int) bool { return views[x].CreatedAt.After(views[y].CreatedAt) })
	var out []*fsm.Intent
	for _, v := range views {
		if len(out) == limit {
			break
		}
		_, i, err := s.load(ctx, c, v.IntentID, true) // listed for the caller's tenant
		var he *producer.HeldError
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrForbidden), errors.As(err, &he):
			continue
		case err != nil:
			return nil, err
		}
		if i.State == fsm.AwaitingApproval || i.State == fsm.ManualAction {
			out = append(out, i)
		}
	}
	return out, nil
}

// limited is v of a caller limited to allowed (none: any): v itself when
// allowed, the only one when "" and there is one; otherwise ErrForbidden
// naming field.
func limited(field, v string, allowed []string) (string, error) {
	if v == "" && len(allowed) == 1 {
		v = allowed[0]
	}
	if len(allowed) > 0 && !slices.Contains(allowed, v) {
		return "", forbidden(field, "the caller is limited to some "+field+"s: name one of them")
	}
	return v, nil
}

// Figures are the counts over every intent (/metrics).
type Figures struct {
	ByState map[fsm.State]int
	// ByRouteState counts per route (every configured route, and any
	// other the views hold) and state (every state).
	ByRouteState  map[string]map[fsm.State]int
	OldestUnknown time.Duration
	HaveUnknown   bool
	Checkpoint    uint64
}

// Figures reads the counts over every intent, of every tenant, route and
// account: for an unrestricted caller with the read scope only.
func (s *Service) Figures(ctx context.Context, c Caller) (*Figures, error) {
	if err := needScope(c, ScopeRead); err != nil {
		return nil, err
	}
	if !c.Unrestricted() {
		return nil, forbidden("", "the figures cover every tenant, route and account; the caller is limited to some")
	}
	var f Figures
	var err error
	if f.ByState, err = s.cfg.Views.CountByState(ctx); err != nil {
		return nil, err
	}
	if f.ByRouteState, err = s.cfg.Views.CountByRouteState(ctx); err != nil {
		return nil, err
	}
	for _, r := range s.RouteNames() {
		if f.ByRouteState[r] == nil {
			f.ByRouteState[r] = projector.ZeroStates()
		}
	}
	if f.OldestUnknown, f.HaveUnknown, err = s.cfg.Views.OldestUnknownAge(ctx, s.cfg.Now()); err != nil {
		return nil, err
	}
	if f.Checkpoint, err = s.cfg.Views.Checkpoint(ctx); err != nil {
		return nil, err
	}
	return &f, nil
}
