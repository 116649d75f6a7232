package service

import (
	"context"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/internal/errkind"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
)

// Errors of the service. Refusals of a request's fields are
// producer.ErrInvalidRequest wrapping an *events.FieldError that names
// the field; the producer's and the log's own errors pass through.
var (
	// ErrForbidden: the caller lacks the scope, or the route or account is
	// outside its limits. It wraps an *events.FieldError naming what
	// ("route", "account"; "" for a scope) and why.
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound: no such intent — or one of another tenant, which does
	// not exist for the caller.
	ErrNotFound = errors.New("no such intent")
	// ErrInFlight: a submit of the same request executes in this process
	// and did not end within the submission's Queue.
	ErrInFlight = errors.New("a submit of this request is executing")
)

// forbidden is ErrForbidden naming field (may be "") and why.
func forbidden(field, reason string) error {
	return errkind.Wrap(ErrForbidden, &events.FieldError{Field: field, Reason: reason})
}

// invalid is producer.ErrInvalidRequest naming field and why.
func invalid(field, reason string) error {
	return errkind.Wrap(producer.ErrInvalidRequest, &events.FieldError{Field: field, Reason: reason})
}

func needScope(c Caller, scope string) error {
	if !c.Has(scope) {
		return forbidden("", "the caller lacks the "+scope+" scope")
	}
	return nil
}

// Intents is the write path and the log as the service uses them;
// *producer.Producer is one. Execute validates the request and returns
// the intent as the log holds it; Load reads one intent by id and folds
// it once; the operator actions append to the intent as loaded and leave
// the result in h and i; ToolRequestID derives a tool call's request id.
type Intents interface {
	Execute(ctx context.Context, req producer.Request) (*producer.Result, error)
	Load(ctx context.Context, intentID string) (*ledger.History, *fsm.Intent, error)
	Approve(ctx context.Context, h *ledger.History, i *fsm.Intent, operator, reason string) error
	Abandon(ctx context.Context, h *ledger.History, i *fsm.Intent, by, reason string) error
	ResolveConfirmed(ctx context.Context, h *ledger.History, i *fsm.Intent, operator, reason, externalID, liveURL string) error
	ResolveReleased(ctx context.Context, h *ledger.History, i *fsm.Intent, operator, reason string) error
	ToolRequestID(c producer.ToolCall) (string, error)
	RouteNames() []string
}

// Views are the projected read model; *projector.Projector is one.
// ByRequest finds the intents of a request id on a route (any account);
// CatchUp waits until the views hold everything on the log; Flow computes
// the console's per-route charts.
type Views interface {
	List(ctx context.Context, f projector.Filter) (projector.Page, error)
	ByRequest(ctx context.Context, tenant, route, requestID string) ([]projector.IntentView, error)
	CountByState(ctx context.Context) (map[fsm.State]int, error)
	CountByRouteState(ctx context.Context) (map[string]map[fsm.State]int, error)
	OldestUnknownAge(ctx context.Context, now time.Time) (time.Duration, bool, error)
	Checkpoint(ctx context.Context) (uint64, error)
	CatchUp(ctx context.Context) error
	Flow(ctx context.Context, f projector.FlowFilter) (*projector.Flow, error)
}

var (
	_ Intents = (*producer.Producer)(nil)
	_ Views   = (*projector.Projector)(nil)
)

// Config configures a Service.
type Config struct {
	// Intents makes the writes and operator decisions and reads single
	// intents (required).
	Intents Intents
	// Views serve lists, pending intents and figures (required).
	Views Views
	// Now is the clock of the figures (the oldest unknown's age).
	Now func() time.Time
}

// DefaultConfig returns a config with the defaults; Intents and Views
// must still be set.
func DefaultConfig() Config { return Config{Now: time.Now} }

// Validate checks the config and reports every problem.
func (c Config) Validate() error {
	var errs []error
	if c.Intents == nil {
		errs = append(errs, errors.New("service config: Intents: is required"))
	}
	if c.Views == nil {
		errs = append(errs, errors.New("service config: Views: is required"))
	}
	if c.Now == nil {
		errs = append(errs, errors.New("service config: Now: is required"))
	}
	return errors.Join(errs...)
}

// Service carries out what callers ask, over any transport. One Service
// serves every transport of a process, so that single-flight spans them.
type Service struct {
	cfg     Config
	flights flights
}

// New validates cfg and returns the service.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Service{cfg: cfg}, nil
}

// RouteNames lists the configured routes.
func (s *Service) RouteNames() []string { return s.cfg.Intents.RouteNames() }

// Checkpoint is the stream sequence the views have applied (readiness).
func (s *Service) Checkpoint(ctx context.Context) (uint64, error) { return s.cfg.Views.Checkpoint(ctx) }

// Settled reports whether an intent in state st waits for nothing
// automatic (fsm.Settled): its outcome is known or a human must act.
// Waits (?wait=, wait_seconds) wait for it.
func Settled(st fsm.State) bool { return fsm.Settled(st) }
