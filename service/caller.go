package service

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
)

// Scopes a Caller may hold.
const (
	// ScopeSubmit: submit intents (POST /v1/intents, the submit_<route>
	// tools).
	ScopeSubmit = "submit"
	// ScopeRead: read intents, lists, pending ones and (unrestricted) the
	// figures (GET /v1/intents, /metrics, the status and pending tools).
	ScopeRead = "read"
	// ScopeOperate: the operator actions (approve, resolve, abandon).
	ScopeOperate = "operate"
)

// Scopes lists every scope.
func Scopes() []string { return []string{ScopeSubmit, ScopeRead, ScopeOperate} }

// DefaultTenant is the tenant of a token that names none, of dev mode,
// and of settle mcp without --tenant.
const DefaultTenant = "default"

// ErrUnauthenticated is matched by an authentication error when the
// request carries no valid credential (HTTP 401); a transport answers any
// other authentication error 403.
var ErrUnauthenticated = errors.New("unauthenticated")

// Caller is who asks: a bearer token of the API (its /v1 endpoints and
// /mcp), or the user who started settle mcp (stdio). Tenant scopes
// everything it does: its request ids and task/step ids name intents of
// that tenant only, and it sees no other tenant's intents. Routes and
// Accounts, when not empty, limit what it may submit, read and operate
// on. Dev is dev mode's unauthenticated caller: every scope, no limit,
// the default tenant.
type Caller struct {
	Name     string
	Tenant   string
	Scopes   []string
	Routes   []string
	Accounts []string
	Dev      bool
}

// Has reports whether the caller holds scope.
func (c Caller) Has(scope string) bool { return c.Dev || slices.Contains(c.Scopes, scope) }

// RouteAllowed reports whether the caller may use route.
func (c Caller) RouteAllowed(route string) bool {
	return len(c.Routes) == 0 || slices.Contains(c.Routes, route)
}

// checkRoute refuses a route ("": none named) outside the caller's limits.
func (c Caller) checkRoute(route string) error {
	if route != "" && !c.RouteAllowed(route) {
		return forbidden("route", "the caller may not use route "+route)
	}
	return nil
}

// AccountAllowed reports whether the caller may use account.
func (c Caller) AccountAllowed(account string) bool {
	return len(c.Accounts) == 0 || slices.Contains(c.Accounts, account)
}

// MayRead reports whether the caller may see an intent of tenant, route
// and account: the read scope, its tenant, and its limits.
func (c Caller) MayRead(tenant, route, account string) bool {
	return c.Has(ScopeRead) && c.Tenant == tenant && c.RouteAllowed(route) && c.AccountAllowed(account)
}

// Unrestricted reports whether the caller may see figures over every
// intent: no route or account limit, and the default tenant (the
// operator's).
func (c Caller) Unrestricted() bool {
	return len(c.Routes) == 0 && len(c.Accounts) == 0 && c.Tenant == DefaultTenant
}

// DefaultAccount is the account a tool call uses when it names none: the
// caller's only account, or "".
func (c Caller) DefaultAccount() string {
	if len(c.Accounts) == 1 {
		return c.Accounts[0]
	}
	return ""
}

// Validate checks a caller and reports every problem, naming the field.
func (c Caller) Validate() error {
	var errs []error
	bad := func(field string, err error) {
		errs = append(errs, errors.Errorf("caller: %s: %s", field, FieldReason(err)))
	}
	if err := ValidateName(c.Name); err != nil {
		bad("Name", err)
	}
	if err := events.ValidateToken("tenant", c.Tenant); err != nil {
		bad("Tenant", err)
	}
	for i, s := range c.Scopes {
		if !slices.Contains(Scopes(), s) {
			bad(fmt.Sprintf("Scopes[%d]", i), errors.Newf("%q is not %s", s, strings.Join(Scopes(), ", ")))
		}
	}
	for i, r := range c.Routes {
		if err := events.ValidateToken("route", r); err != nil {
			bad(fmt.Sprintf("Routes[%d]", i), err)
		}
	}
	for i, a := range c.Accounts {
		if err := events.ValidateFreeform("account", a); err != nil {
			bad(fmt.Sprintf("Accounts[%d]", i), err)
		}
	}
	return errors.Join(errs...)
}

// FieldReason is an *events.FieldError's reason (the field is named by
// the caller), or err's text.
func FieldReason(err error) string {
	var fe *events.FieldError
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return err.Error()
}

// ValidateName checks a caller's or an operator's name, which is recorded
// with operator decisions: 1..64 bytes of printable UTF-8, no surrounding
// space.
func ValidateName(v string) error {
	switch {
	case v == "":
		return errors.New("is required")
	case len(v) > 64:
		return errors.Errorf("is %d bytes, the limit is 64", len(v))
	case !utf8.ValidString(v):
		return errors.New("is not valid UTF-8")
	case strings.TrimSpace(v) != v:
		return errors.New("has leading or trailing white space")
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return errors.New("has a control character")
		}
	}
	return nil
}
