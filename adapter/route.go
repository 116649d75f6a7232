package adapter

import (
	"fmt"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
)

// Route is a configured external operation.
type Route struct {
	Name    string
	Adapter Adapter
	Policy  events.Policy
	// Observer, if set, is told of every HTTP request made for the route
	// on a context marked with Calling (metrics).
	Observer CallObserver
}

// DefaultPolicy is a sane route policy: automatic first write, one retry
// after a proven not_found, up to 5 resends after proven rejections (never
// sent, 429), 1 minute attempt deadline, search window planned_at −5m …
// +30m, reads failing for 15 minutes handed off.
func DefaultPolicy() events.Policy {
	return events.Policy{
		FirstWrite:      events.PolicyAuto,
		Retry:           events.PolicyAuto,
		RetryBudget:     1,
		ResendBudget:    5,
		AttemptDeadline: events.Duration(time.Minute),
		SearchBefore:    events.Duration(5 * time.Minute),
		SearchAfter:     events.Duration(30 * time.Minute),
		ClockSkew:       events.Duration(5 * time.Second),
	}
}

// ValidateRoute checks that a route's policy is safe with its API's
// capabilities: a route that may retry must have a dedup proof (an
// idempotency key with a known retention, or an authoritative search), or
// its retries could duplicate a write. Errors name the route and field and
// say what to add.
func ValidateRoute(r Route) error {
	if err := events.ValidateToken("route.name", r.Name); err != nil {
		return err
	}
	if r.Adapter == nil {
		return errors.Errorf("route %s: adapter: is required", r.Name)
	}
	if err := r.Policy.Validate("route " + r.Name + ": policy."); err != nil {
		return err
	}
	if r.Policy.Retry == events.PolicyNever {
		return nil
	}
	c := r.Adapter.Capabilities()
	keyProof := c.IdempotencyKey && (c.KeyRetention > 0 || r.Policy.KeyRetention > 0)
	searchProof := c.Search && c.SearchAuthoritative
	if !keyProof && !searchProof {
		return errors.WithHint(errors.Errorf("route %s: policy.retry: %q needs a dedup proof, and the route has none (no idempotency key with a known retention, no search that maps author and parent)", r.Name, r.Policy.Retry),
			"set policy.retry to never, or declare the API's idempotency key and its retention, or a search that maps author_id and parent")
	}
	// A key that is the only dedup proof must stay valid through one retry.
	if field, reason := RetentionShortfall(r.Policy, c); !searchProof && field != "" {
		what := "the API's key retention (capabilities.key_retention)"
		if field == "policy.key_retention" {
			what = field
		}
		return errors.WithHint(errors.Errorf("route %s: %s: %s", r.Name, what, reason),
			"declare the API's real key retention, or shorten policy.attempt_deadline or policy.retention_margin, or set policy.retry to never")
	}
	return nil
}

// RetentionShortfall says why an idempotency key whose retention is a
// route's only dedup proof cannot stay valid through one retry: a claim
// is taken after the first attempt started and its attempt may reach the
// API until its deadline plus the clock-skew allowance, all inside the
// key's retention less the margin and the skew (fsm.ClaimBy). field is
// the one that sets the retention (capabilities.key_retention or
// policy.key_retention), "" when the key covers a retry.
func RetentionShortfall(p events.Policy, c Capabilities) (field, reason string) {
	retention, field := c.KeyRetention, "capabilities.key_retention"
	if p.KeyRetention > 0 && (retention == 0 || p.KeyRetention.D() < retention) {
		retention, field = p.KeyRetention.D(), "policy.key_retention"
	}
	need := p.RetentionMargin.D() + p.AttemptDeadline.D() + 2*p.ClockSkew.D()
	if retention > need {
		return "", ""
	}
	return field, fmt.Sprintf("%s cannot cover one retry: it must exceed retention_margin (%s) + attempt_deadline (%s) + 2 × clock_skew (%s), or a retry's attempt could reach the API after its key expired",
		retention, p.RetentionMargin.D(), p.AttemptDeadline.D(), p.ClockSkew.D())
}
