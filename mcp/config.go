package mcp

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
)

// Scopes a Caller may hold: the API's (submit, read, operate).
const (
	// ScopeSubmit: the submit_<route> tools.
	ScopeSubmit = "submit"
	// ScopeRead: status and pending.
	ScopeRead = "read"
	// ScopeOperate: approve and resolve.
	ScopeOperate = "operate"
)

// MaxMaxWait bounds Config.MaxWait.
const MaxMaxWait = 10 * time.Minute

// Caller is who calls the tools: a bearer token of the API (settle serve's
// /mcp) or the user who started settle mcp (stdio). Tenant scopes
// everything it does, as the API's tokens: its task and step ids name
// intents of that tenant only, and it sees no other tenant's intents.
// Routes and Accounts,
// when not empty, limit what it may submit, read and operate on; with
// exactly one account, that account is the default of submit. All holds
// every scope and no limit (dev mode).
type Caller struct {
	Name     string
	Tenant   string
	Scopes   []string
	Routes   []string
	Accounts []string
	All      bool
}

// Has reports whether the caller holds scope.
func (c Caller) Has(scope string) bool { return c.All || slices.Contains(c.Scopes, scope) }

// RouteAllowed reports whether the caller may use route.
func (c Caller) RouteAllowed(route string) bool {
	return c.All || len(c.Routes) == 0 || slices.Contains(c.Routes, route)
}

// AccountAllowed reports whether the caller may use account.
func (c Caller) AccountAllowed(account string) bool {
	return c.All || len(c.Accounts) == 0 || slices.Contains(c.Accounts, account)
}

// mayAccess reports whether the caller may see and act on intent i: its
// tenant's, within the route and account limits. Another tenant's intent
// does not exist for the caller.
func (c Caller) mayAccess(i *fsm.Intent) bool {
	return i.Recorded.Tenant == c.Tenant && c.RouteAllowed(i.Route()) && c.AccountAllowed(i.Account())
}

// defaultAccount is the account submit uses when the call names none.
func (c Caller) defaultAccount() string {
	if !c.All && len(c.Accounts) == 1 {
		return c.Accounts[0]
	}
	return ""
}

// key identifies the caller's tool set.
func (c Caller) key() string {
	return fmt.Sprintf("%q %q %v %q %q %q", c.Name, c.Tenant, c.All, c.Scopes, c.Routes, c.Accounts)
}

// Validate checks a caller.
func (c Caller) Validate() error {
	if strings.TrimSpace(c.Name) == "" || len(c.Name) > 64 {
		return errors.New("mcp caller: Name: 1 to 64 bytes are required (it is the operator recorded with approvals)")
	}
	if err := events.ValidateToken("tenant", c.Tenant); err != nil {
		return errors.Errorf("mcp caller: Tenant: %w", err)
	}
	for i, s := range c.Scopes {
		if s != ScopeSubmit && s != ScopeRead && s != ScopeOperate {
			return errors.Errorf("mcp caller: Scopes[%d]: %q is not submit, read or operate", i, s)
		}
	}
	for i, r := range c.Routes {
		if err := events.ValidateToken("route", r); err != nil {
			return errors.Errorf("mcp caller: Routes[%d]: %w", i, err)
		}
	}
	for i, a := range c.Accounts {
		if err := events.ValidateFreeform("account", a); err != nil {
			return errors.Errorf("mcp caller: Accounts[%d]: %w", i, err)
		}
	}
	return nil
}

// Config configures a Server.
type Config struct {
	// Producer makes the writes and operator decisions (required).
	Producer *producer.Producer
	// Projector lists pending intents (required).
	Projector *projector.Projector
	// Routes are the producer's routes: one submit tool each (required).
	Routes []adapter.Route
	// KeyIncludesPayload derives request ids from task, step and the
	// payload's hash: the same step with another payload is another intent.
	// Off (the default), it is refused and nothing is written: an agent
	// that regenerates a slightly different text for a step it retries
	// cannot make a second write.
	KeyIncludesPayload bool
	// MaxWait bounds wait_seconds of submit and status.
	MaxWait time.Duration
	// Destructive overrides the destructive hint of a route's submit tool.
	// Without it: true unless the adapter says its write method is POST
	// (creates, never changes or removes what exists).
	Destructive map[string]bool
	// Secrets are values that never appear in a tool result (route
	// credentials, token secrets): every string of a result is scrubbed of
	// them and of every 8-byte piece of them.
	Secrets []string
	// Logger receives one line per HTTP request and every internal error
	// (never a secret, never a payload).
	Logger *slog.Logger
	// Version is reported to clients as the server's version.
	Version string
}

// DefaultConfig returns a config with the defaults; Producer, Projector
// and Routes must still be set.
func DefaultConfig() Config {
	return Config{MaxWait: 30 * time.Second, Logger: slog.Default(), Version: "dev"}
}

// Validate checks the config; errors name the field and hold no secret.
func (c Config) Validate() error {
	bad := func(field, reason string) error { return errors.Errorf("mcp config: %s: %s", field, reason) }
	switch {
	case c.Producer == nil:
		return bad("Producer", "is required")
	case c.Projector == nil:
		return bad("Projector", "is required")
	case len(c.Routes) == 0:
		return bad("Routes", "at least one route is required")
	case c.Logger == nil:
		return bad("Logger", "is required")
	case c.MaxWait < 0 || c.MaxWait > MaxMaxWait:
		return bad("MaxWait", fmt.Sprintf("%s is outside [0, %s]", c.MaxWait, MaxMaxWait))
	}
	seen := map[string]bool{}
	for i, r := range c.Routes {
		if _, ok := c.Producer.Route(r.Name); !ok {
			return bad(fmt.Sprintf("Routes[%d]", i), fmt.Sprintf("%q is not a route of the producer", r.Name))
		}
		if seen[r.Name] {
			return bad(fmt.Sprintf("Routes[%d]", i), fmt.Sprintf("%q is listed twice", r.Name))
		}
		seen[r.Name] = true
	}
	for name := range c.Destructive {
		if !seen[name] {
			return bad("Destructive", fmt.Sprintf("%q is not one of Routes", name))
		}
	}
	for i, s := range c.Secrets {
		if len(s) < minSecret {
			return bad(fmt.Sprintf("Secrets[%d]", i), fmt.Sprintf("is shorter than %d bytes: scrubbing it would mangle ordinary text", minSecret))
		}
	}
	return nil
}
