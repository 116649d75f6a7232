package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/service"
)

// MaxMaxWait bounds Config.MaxWait.
const MaxMaxWait = 10 * time.Minute

// minSecret is the shortest value Config.Secrets accepts
// (adapter.Scrubber ignores shorter ones: they would redact ordinary
// text).
const minSecret = 4

// Service is what the tools ask of settle, as the caller;
// *service.Service is one.
type Service interface {
	RouteNames() []string
	Submit(ctx context.Context, c service.Caller, sub service.Submission) (*service.Submitted, error)
	Get(ctx context.Context, c service.Caller, id string, wait time.Duration) (*ledger.History, *fsm.Intent, error)
	FindStep(ctx context.Context, c service.Caller, st service.Step, wait time.Duration) (*ledger.History, *fsm.Intent, error)
	Pending(ctx context.Context, c service.Caller, route string, limit int) ([]*fsm.Intent, error)
	Act(ctx context.Context, c service.Caller, id string, a service.Action) (*ledger.History, *fsm.Intent, error)
}

var _ Service = (*service.Service)(nil)

// Config configures a Server.
type Config struct {
	// Service carries out every call, as the caller (required): in settle
	// serve the same one as the API's.
	Service Service
	// Routes are the routes offered as submit tools, one each (required;
	// routes of the service): their adapters describe the payload and
	// whether the write is destructive.
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
	// them and of every 8-byte piece of them, ASCII case-insensitively
	// (adapter.Scrubber).
	Secrets []string
	// Logger receives one line per HTTP request and every internal error
	// (never a secret, never a payload).
	Logger *slog.Logger
	// Version is reported to clients as the server's version.
	Version string
}

// DefaultConfig returns a config with the defaults; Service and Routes
// must still be set.
func DefaultConfig() Config {
	return Config{MaxWait: 30 * time.Second, Logger: slog.Default(), Version: "dev"}
}

// Validate checks the config; errors name the field and hold no secret.
func (c Config) Validate() error {
	bad := func(field, reason string) error { return errors.Errorf("mcp config: %s: %s", field, reason) }
	switch {
	case c.Service == nil:
		return bad("Service", "is required")
	case len(c.Routes) == 0:
		return bad("Routes", "at least one route is required")
	case c.Logger == nil:
		return bad("Logger", "is required")
	case c.MaxWait < 0 || c.MaxWait > MaxMaxWait:
		return bad("MaxWait", fmt.Sprintf("%s is outside [0, %s]", c.MaxWait, MaxMaxWait))
	}
	seen := map[string]bool{}
	for i, r := range c.Routes {
		if !slices.Contains(c.Service.RouteNames(), r.Name) {
			return bad(fmt.Sprintf("Routes[%d]", i), fmt.Sprintf("%q is not a route of the service", r.Name))
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
