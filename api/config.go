package api

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/service"
)

// Scopes a Token may hold: the service's (service.Scopes).
const (
	// ScopeSubmit: POST /v1/intents.
	ScopeSubmit = service.ScopeSubmit
	// ScopeRead: GET /v1/intents, GET /v1/intents/{id}, GET /metrics.
	ScopeRead = service.ScopeRead
	// ScopeOperate: approve, resolve, abandon.
	ScopeOperate = service.ScopeOperate
)

// MinSecretLen is the shortest token secret Validate accepts.
const MinSecretLen = 16

// MaxMaxWait bounds Config.MaxWait.
const MaxMaxWait = 10 * time.Minute

// DefaultTenant is the tenant of a token that names none, and of dev mode.
const DefaultTenant = service.DefaultTenant

// Token is one API credential. The secret is sent as
// "Authorization: Bearer <secret>"; Name identifies the caller in logs and
// is the operator recorded in operator events. Tenant (DefaultTenant when
// empty) scopes everything the token does: its request ids name intents
// of that tenant only, and it sees no other tenant's intents. Routes and
// Accounts, when not empty, limit the intents the token may submit, read
// or operate on.
type Token struct {
	Name     string
	Secret   string
	Tenant   string
	Scopes   []string
	Routes   []string
	Accounts []string
}

// TokenError is a problem with one token of Config.Tokens. Field is the
// Go field ("Secret", "Scopes[1]"); callers that read tokens from a file
// map it to the file's names.
type TokenError struct {
	Index  int
	Field  string
	Reason string
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("api config: Tokens[%d].%s: %s", e.Index, e.Field, e.Reason)
}

// Service is what the API asks of settle, as the caller;
// *service.Service is one.
type Service interface {
	RouteNames() []string
	Submit(ctx context.Context, c service.Caller, sub service.Submission) (*service.Submitted, error)
	Get(ctx context.Context, c service.Caller, id string, wait time.Duration) (*ledger.History, *fsm.Intent, error)
	List(ctx context.Context, c service.Caller, f projector.Filter) (projector.Page, error)
	Act(ctx context.Context, c service.Caller, id string, a service.Action) (*ledger.History, *fsm.Intent, error)
	Figures(ctx context.Context, c service.Caller) (*service.Figures, error)
	Flow(ctx context.Context, c service.Caller, route, account string, window time.Duration) (*projector.Flow, error)
	Checkpoint(ctx context.Context) (uint64, error)
}

// Log is what /readyz asks of the log; *ledger.Store is one.
type Log interface {
	// Connected reports whether the connection to NATS is up.
	Connected() bool
	// CheckStream asks the server for the stream's info.
	CheckStream(ctx context.Context) error
}

var (
	_ Service = (*service.Service)(nil)
	_ Log     = (*ledger.Store)(nil)
)

// Config configures a Server.
type Config struct {
	// Service carries out what callers ask (required): the same one as
	// the MCP endpoint's, so that single-flight spans both.
	Service Service
	// Log is checked by /readyz (required).
	Log Log
	// Tokens are the accepted credentials. At least one is required unless
	// Dev is set.
	Tokens []Token
	// Dev serves requests without a token (operator from the request body,
	// or "dev"). It is refused unless Addr is a loopback address, and in
	// dev mode requests from non-loopback peers or with a non-loopback Host
	// header (DNS rebinding) are refused. A request that does send a
	// bearer token is authenticated as usual.
	Dev bool
	// Addr is the address the server listens on ("127.0.0.1:8080"). It is
	// required with Dev, which needs it to be loopback (see CheckDevAddr).
	Addr string
	// Now is the clock of the metrics (unknown age).
	Now func() time.Time
	// MaxWait bounds ?wait= on submits.
	MaxWait time.Duration
	// Logger receives the server's warnings and errors, and with
	// AccessLog one line per request at INFO (never a header or a secret).
	Logger *slog.Logger
	// AccessLog logs every request (method, path, status, caller,
	// duration); off, requests are only counted (/metrics).
	AccessLog bool
	// Metrics collects counters fed by the server and by the caller
	// (CountCall, ObserveWrite, ObserveSettle). Nil: New creates one.
	Metrics *Metrics
	// ReadTimeout, ReadHeaderTimeout, IdleTimeout and MaxHeaderBytes are
	// applied by HTTPServer.
	ReadTimeout       time.Duration
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// MaxInFlight bounds the token-scoped requests served at once; more
	// are answered 503 with Retry-After (0: no bound).
	MaxInFlight int
	// ReadyChecks are more checks of /readyz (the projector running, the
	// appends, the disk, the clock), each reported under its name.
	ReadyChecks []ReadyCheck
}

// DefaultConfig returns a config with the defaults; Service, Log
// and Tokens (or Dev with a loopback Addr) must still be set.
func DefaultConfig() Config {
	return Config{Now: time.Now, MaxWait: 30 * time.Second, Logger: slog.Default(),
		ReadTimeout: 60 * time.Second, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
		MaxHeaderBytes: 64 << 10, MaxInFlight: DefaultMaxInFlight}
}

// Validate checks the config. Errors name the field (Tokens[1].Secret,
// MaxWait, ...) and never contain a secret.
func (c Config) Validate() error {
	bad := func(field, reason string) error { return errors.Errorf("api config: %s: %s", field, reason) }
	switch {
	case c.Service == nil:
		return bad("Service", "is required")
	case c.Log == nil:
		return bad("Log", "is required")
	case c.Now == nil:
		return bad("Now", "is required")
	case c.Logger == nil:
		return bad("Logger", "is required")
	case c.MaxWait <= 0 || c.MaxWait > MaxMaxWait:
		return bad("MaxWait", fmt.Sprintf("%s is outside (0, %s]", c.MaxWait, MaxMaxWait))
	case c.MaxInFlight < 0:
		return bad("MaxInFlight", fmt.Sprintf("%d is negative", c.MaxInFlight))
	}
	for i, rc := range c.ReadyChecks {
		if rc.Name == "" || rc.Check == nil {
			return bad(fmt.Sprintf("ReadyChecks[%d]", i), "needs a Name and a Check")
		}
	}
	if c.Dev {
		if err := CheckDevAddr(c.Addr); err != nil {
			return bad("Addr", err.Error())
		}
	} else if len(c.Tokens) == 0 {
		return bad("Tokens", "at least one token is required unless Dev is set")
	}
	if c.ReadTimeout <= 0 || c.ReadHeaderTimeout <= 0 || c.IdleTimeout <= 0 {
		return bad("ReadTimeout", "ReadTimeout, ReadHeaderTimeout and IdleTimeout must be positive")
	}
	if c.MaxHeaderBytes < 4096 {
		return bad("MaxHeaderBytes", "must be at least 4096")
	}
	return ValidateTokens(c.Tokens, c.Service.RouteNames())
}

// ValidateTokens checks tokens: names, secrets, tenant, scopes and limits.
// A route limit must name one of routes (nil: routes are not checked).
// The error is a *TokenError naming token and field; it never contains a
// secret.
func ValidateTokens(tokens []Token, routes []string) error {
	names := map[string]bool{}
	digests := map[[32]byte]bool{}
	for i, t := range tokens {
		bad := func(field, reason string) error { return &TokenError{Index: i, Field: field, Reason: reason} }
		if err := service.ValidateName(t.Name); err != nil {
			return bad("Name", err.Error())
		}
		if names[t.Name] {
			return bad("Name", fmt.Sprintf("%q is used by two tokens", t.Name))
		}
		names[t.Name] = true
		switch {
		case len(t.Secret) < MinSecretLen:
			return bad("Secret", fmt.Sprintf("is shorter than %d bytes", MinSecretLen))
		case !printableASCII(t.Secret):
			return bad("Secret", "must be printable ASCII without white space")
		case strings.Contains(t.Name, t.Secret):
			// The name is written to logs and events: it must not reveal the secret.
			return bad("Name", "must not contain the secret")
		}
		d := sha256.Sum256([]byte(t.Secret))
		if digests[d] {
			return bad("Secret", "is the secret of another token")
		}
		digests[d] = true
		if t.Tenant != "" {
			if err := events.ValidateToken("tenant", t.Tenant); err != nil {
				return bad("Tenant", service.FieldReason(err))
			}
		}
		if len(t.Scopes) == 0 {
			return bad("Scopes", "at least one scope is required")
		}
		for j, s := range t.Scopes {
			if !slices.Contains(service.Scopes(), s) {
				return bad(fmt.Sprintf("Scopes[%d]", j), fmt.Sprintf("%q is not submit, read or operate", s))
			}
		}
		for j, r := range t.Routes {
			if err := events.ValidateToken("route", r); err != nil {
				return bad(fmt.Sprintf("Routes[%d]", j), service.FieldReason(err))
			}
			if routes != nil && !slices.Contains(routes, r) {
				return bad(fmt.Sprintf("Routes[%d]", j), fmt.Sprintf("route %q is not configured (configured: %s)", r, strings.Join(routes, ", ")))
			}
		}
		for j, a := range t.Accounts {
			if err := events.ValidateFreeform("account", a); err != nil {
				return bad(fmt.Sprintf("Accounts[%d]", j), service.FieldReason(err))
			}
		}
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// CheckDevAddr reports whether addr ("host:port") is a loopback listener,
// the only kind dev mode (no authentication) may serve on. "localhost",
// 127.0.0.0/8 and ::1 are loopback; an empty host (every interface),
// 0.0.0.0, :: and any other name or address are not.
func CheckDevAddr(addr string) error {
	if addr == "" {
		return errors.New("dev mode needs the listen address, and it must be loopback")
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.Errorf("%q is not host:port", addr)
	}
	if !isLoopbackHost(host) {
		return errors.Errorf("dev mode serves without authentication and may only listen on loopback (127.0.0.1, ::1, localhost), not %q", addr)
	}
	return nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return err == nil && ip.Unmap().IsLoopback()
}
