package service

import (
	"context"
	"slices"
	"time"

	"github.com/settle-dev/settle/projector"
)

// FlowWindow is the default window of Flow: the last hour.
const FlowWindow = time.Hour

// Flow computes, for the caller's tenant, the per-route figures of the
// window that ends now (projector.Flow): intents created per state and
// time slot, and how long unknown outcomes took to settle. route "" covers
// every route the caller may use (each configured route appears, with or
// without intents); a caller limited to accounts must name one of them in
// account unless it has exactly one.
func (s *Service) Flow(ctx context.Context, c Caller, route, account string, window time.Duration) (*projector.Flow, error) {
	if err := needScope(c, ScopeRead); err != nil {
		return nil, err
	}
	if window <= 0 {
		window = FlowWindow
	}
	account, err := limited("account", account, c.Accounts)
	if err != nil {
		return nil, err
	}
	if err := c.checkRoute(route); err != nil {
		return nil, err
	}
	routes := []string{route}
	if route == "" {
		routes = nil
		for _, r := range s.RouteNames() {
			if c.RouteAllowed(r) {
				routes = append(routes, r)
			}
		}
		slices.Sort(routes)
		if len(routes) == 0 {
			return nil, forbidden("route", "the caller may use none of the configured routes")
		}
	}
	now := s.cfg.Now().UTC()
	return s.cfg.Views.Flow(ctx, projector.FlowFilter{Tenant: c.Tenant, Routes: routes, Account: account,
		From: now.Add(-window), To: now})
}
