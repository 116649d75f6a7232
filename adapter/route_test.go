package adapter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// capsOnly is an adapter that only states capabilities (ValidateRoute
// reads nothing else).
type capsOnly struct{ c adapter.Capabilities }

func (a capsOnly) Capabilities() adapter.Capabilities { return a.c }
func (capsOnly) Write(context.Context, adapter.WriteRequest) (adapter.WriteResult, error) {
	return adapter.WriteResult{}, nil
}
func (capsOnly) Search(context.Context, adapter.SearchQuery) ([]adapter.Record, error) {
	return nil, nil
}
func (capsOnly) Get(context.Context, string) (adapter.Record, error) { return adapter.Record{}, nil }
func (capsOnly) Probe(context.Context, string) (int, error)          { return 200, nil }

// A route whose key cannot stay valid through one retry's attempt is
// refused, naming the field (retention_margin may be 0 and need not cover
// attempt_deadline).
func TestValidateRouteKeyMustCoverAnAttempt(t *testing.T) {
	keyed := capsOnly{adapter.Capabilities{IdempotencyKey: true, KeyRetention: time.Minute, StatusQuery: true}}
	pol := adapter.DefaultPolicy() // attempt_deadline 1m, clock_skew 5s
	err := adapter.ValidateRoute(adapter.Route{Name: "r", Adapter: keyed, Policy: pol})
	if err == nil || !strings.Contains(err.Error(), "key_retention") || !strings.Contains(err.Error(), "attempt_deadline") {
		t.Fatalf("a 1m key with a 1m attempt deadline: %v", err)
	}
	// The policy's own retention (shorter than the API's) counts too.
	long := capsOnly{adapter.Capabilities{IdempotencyKey: true, KeyRetention: 24 * time.Hour, StatusQuery: true}}
	p2 := pol
	p2.KeyRetention = events.Duration(2 * time.Minute)
	p2.RetentionMargin = events.Duration(time.Minute)
	if err := adapter.ValidateRoute(adapter.Route{Name: "r", Adapter: long, Policy: p2}); err == nil || !strings.Contains(err.Error(), "policy.key_retention") {
		t.Fatalf("2m retention, 1m margin, 1m attempt: %v", err)
	}
	// Room for an attempt: accepted.
	if err := adapter.ValidateRoute(adapter.Route{Name: "r", Adapter: long, Policy: pol}); err != nil {
		t.Fatal(err)
	}
	// Never retried: nothing to cover.
	never := pol
	never.Retry = events.PolicyNever
	if err := adapter.ValidateRoute(adapter.Route{Name: "r", Adapter: keyed, Policy: never}); err != nil {
		t.Fatal(err)
	}
	// A short key beside an authoritative search: the search is the
	// route's proof, the key only a bonus.
	both := capsOnly{adapter.Capabilities{IdempotencyKey: true, KeyRetention: time.Minute, Search: true, SearchAuthoritative: true}}
	if err := adapter.ValidateRoute(adapter.Route{Name: "r", Adapter: both, Policy: pol}); err != nil {
		t.Fatal(err)
	}
}
