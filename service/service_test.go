package service

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/producer"
)

// TestCallerValidateNamesEveryProblem: a caller is checked whole, and
// every problem names its field.
func TestCallerValidateNamesEveryProblem(t *testing.T) {
	ok := Caller{Name: "agent-7", Tenant: "acme", Scopes: []string{ScopeSubmit, ScopeRead}, Routes: []string{"social_post"}, Accounts: []string{"acct_1"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid caller refused: %v", err)
	}
	bad := Caller{Name: " padded", Tenant: "", Scopes: []string{"read", "admin"}, Routes: []string{"Bad Route"}, Accounts: []string{"a\x01"}}
	err := bad.Validate()
	if err == nil {
		t.Fatal("an invalid caller was accepted")
	}
	for _, field := range []string{"Name", "Tenant", "Scopes[1]", "Routes[0]", "Accounts[0]"} {
		if !strings.Contains(err.Error(), "caller: "+field+": ") {
			t.Errorf("the error does not name %s: %v", field, err)
		}
	}
	if strings.Contains(err.Error(), "Scopes[0]") {
		t.Errorf("a valid scope is named: %v", err)
	}
}

// TestCallerScopesAndLimits: a caller may read only its tenant's intents
// within its limits; figures are for the default tenant's unrestricted
// callers; dev holds every scope.
func TestCallerScopesAndLimits(t *testing.T) {
	c := Caller{Name: "a", Tenant: "acme", Scopes: []string{ScopeRead}, Accounts: []string{"acct_1"}}
	switch {
	case !c.MayRead("acme", "social_post", "acct_1"):
		t.Error("its own intent")
	case c.MayRead("globex", "social_post", "acct_1"):
		t.Error("another tenant's intent")
	case c.MayRead("acme", "social_post", "acct_2"):
		t.Error("another account's intent")
	case c.Has(ScopeSubmit), c.Unrestricted():
		t.Error("scopes or figures beyond the token")
	case c.DefaultAccount() != "acct_1":
		t.Error("its only account is not the default")
	}
	dev := Caller{Name: "dev", Tenant: DefaultTenant, Dev: true}
	if !dev.Has(ScopeOperate) || !dev.Unrestricted() || dev.MayRead("acme", "r", "a") {
		t.Errorf("dev: %+v", dev)
	}
}

// TestActionsAreCheckedBeforeTheLog: an operator action's fields are
// refused naming the field, by the same rules for every transport.
func TestActionsAreCheckedBeforeTheLog(t *testing.T) {
	c := Caller{Name: "ops", Tenant: DefaultTenant, Scopes: []string{ScopeOperate}}
	for _, tc := range []struct {
		a     Action
		field string
	}{
		{Action{Kind: ActionApprove, Reason: " "}, "reason"},
		{Action{Kind: ActionApprove, Reason: strings.Repeat("x", MaxReason+1)}, "reason"},
		{Action{Kind: ActionApprove, Reason: "a\x07b"}, "reason"},
		{Action{Kind: ActionApprove, Reason: "\xff"}, "reason"},
		{Action{Kind: ActionResolveConfirmed, Reason: "found"}, "external_id"},
		{Action{Kind: ActionResolveConfirmed, Reason: "found", ExternalID: "p_1", LiveURL: "https://u:p@x.example/p"}, "live_url"},
		{Action{Kind: ActionResolveConfirmed, Reason: "found", ExternalID: "p_1", LiveURL: "ftp://x.example/p"}, "live_url"},
		{Action{Kind: ActionAbandon, Reason: "stop", ExternalID: "p_1"}, "external_id"},
		{Action{Kind: "delete", Reason: "stop"}, "action"},
	} {
		_, err := tc.a.check(c)
		var fe *events.FieldError
		if !errors.Is(err, producer.ErrInvalidRequest) || !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: %v, want a refusal naming %s", tc.a, err, tc.field)
		}
	}
	if op, err := (Action{Kind: ActionApprove, Reason: "line one\n\tline two", Operator: "someone else"}).check(c); err != nil || op != "ops" {
		t.Errorf("a token's decision is the token's: %q %v", op, err)
	}
	dev := Caller{Name: "dev", Tenant: DefaultTenant, Dev: true}
	if op, err := (Action{Kind: ActionApprove, Reason: "ok", Operator: "alice"}).check(dev); err != nil || op != "alice" {
		t.Errorf("dev names its operator: %q %v", op, err)
	}
	if _, err := (Action{Kind: ActionApprove, Reason: "ok", Operator: " alice"}).check(dev); err == nil {
		t.Error("a padded operator name was accepted")
	}
}

// TestResolutions: one vocabulary of resolutions and actions.
func TestResolutions(t *testing.T) {
	want := map[string]string{ResolutionConfirmed: ActionResolveConfirmed, ResolutionNotExecuted: ActionResolveNotExecuted, ResolutionAbandoned: ActionAbandon}
	for _, r := range Resolutions() {
		if got, err := ResolutionAction(r); err != nil || got != want[r] {
			t.Errorf("%s: %s %v", r, got, err)
		}
	}
	for _, r := range []string{"", "abandon", "maybe"} {
		var fe *events.FieldError
		if _, err := ResolutionAction(r); !errors.As(err, &fe) || fe.Field != "resolution" {
			t.Errorf("%q: %v", r, err)
		}
	}
}

// TestFlightsRunOneSubmitOfARequestAtATime: a second acquire of a key is
// refused at once without waiting, waits for the release with it, and
// gives up when its context ends.
func TestFlightsRunOneSubmitOfARequestAtATime(t *testing.T) {
	var f flights
	release, err := f.acquire(context.Background(), "k", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.acquire(context.Background(), "k", false); !errors.Is(err, ErrInFlight) {
		t.Fatalf("second acquire without waiting: %v", err)
	}
	if r, err := f.acquire(context.Background(), "other", false); err != nil {
		t.Fatalf("another key: %v", err)
	} else {
		r()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := f.acquire(ctx, "k", true); !errors.Is(err, ErrInFlight) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting past the deadline: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := f.acquire(context.Background(), "k", true)
		if err == nil {
			r()
		}
		got <- err
	}()
	release()
	release() // twice is harmless
	if err := <-got; err != nil {
		t.Fatalf("waiting for the release: %v", err)
	}
}
