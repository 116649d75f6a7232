package webhook

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
)

// Secret is the endpoint's signing secret. It prints, formats and logs as
// "[redacted]", so a Config in a log line or an error holds no secret.
type Secret []byte

// String hides the secret.
func (Secret) String() string { return "[redacted]" }

// GoString hides the secret from %#v.
func (Secret) GoString() string { return "webhook.Secret([redacted])" }

// LogValue hides the secret from slog.
func (Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// MinSecretBytes is the shortest secret Validate accepts (32 random bytes
// are recommended: `openssl rand -hex 32`).
const MinSecretBytes = 16

// Outcome names a settlement: the intent's state after the event. The
// body's type is "intent." + Outcome.
type Outcome string

// The settlements a deliverer sends.
const (
	OutcomeConfirmed    Outcome = "confirmed"
	OutcomeRejected     Outcome = "rejected"
	OutcomeFailed       Outcome = "failed"
	OutcomeManualAction Outcome = "manual_action"
	OutcomeAbandoned    Outcome = "abandoned"
)

// Settlements maps each event type that settles an intent to its
// outcome: what a deliverer sends by default. A rejection that is
// retryable may be resent by settle and settle again later (another
// event, another id); an abandoned intent may still be confirmed by an
// operator (OperatorConfirmed, another event).
var Settlements = map[events.Type]Outcome{
	events.WriteConfirmed:       OutcomeConfirmed,
	events.ReadbackPassed:       OutcomeConfirmed,
	events.OperatorConfirmed:    OutcomeConfirmed,
	events.WriteRejected:        OutcomeRejected,
	events.TargetFailed:         OutcomeFailed,
	events.ManualActionRequired: OutcomeManualAction,
	events.ReadbackFailed:       OutcomeManualAction,
	events.Abandoned:            OutcomeAbandoned,
}

// Where a new consumer starts.
const (
	FromNew = "new" // events after the last one on the log when the consumer is created (as a new Stripe endpoint)
	FromAll = "all" // every settlement on the log, from its first event
)

// Config configures a Deliverer. Start from DefaultConfig.
type Config struct {
	// URL is the endpoint (http or https; no user info: the receiver
	// authenticates settle by the signature).
	URL string
	// Secret signs every request (required, from the environment; never
	// logged).
	Secret Secret
	// Stream is the intents stream (default SETTLE_INTENTS).
	Stream string
	// Durable names the consumer on the server: every process with the
	// same Durable shares its position, so an event is delivered by one of
	// them and a restarted process resumes where the last one stopped.
	Durable string
	// From is where a consumer created now starts (FromNew, FromAll). An
	// existing consumer keeps its position.
	From string
	// Routes restricts delivery to these routes; empty means every route.
	Routes []string
	// Types are the event types sent (default every key of Settlements;
	// each must be one of them).
	Types []events.Type
	// Timeout bounds one delivery attempt: connect, send, the answer's
	// headers and body. An attempt that takes longer is a failure.
	Timeout time.Duration
	// MaxInFlight bounds the requests to the endpoint at once.
	MaxInFlight int
	// MaxPending bounds the events taken from the log and not yet
	// delivered — in flight or waiting for their next attempt (the
	// consumer's max ack pending). When every one of them keeps failing,
	// delivery waits for them.
	MaxPending int
	// RetryDelay is the first retry's delay; it doubles per attempt up to
	// MaxRetryDelay, and each delay is drawn in [d/2, d) (jitter). An
	// endpoint's Retry-After (seconds) lengthens it, up to MaxRetryDelay.
	RetryDelay    time.Duration
	MaxRetryDelay time.Duration
	// Progress is how often a progress line is logged (0: never).
	Progress time.Duration
	// Client sends the requests (default: an http.Client that follows no
	// redirect: a 3xx is a failed attempt, as with Stripe).
	Client *http.Client
	// Now stamps each attempt's signature.
	Now func() time.Time
	// Rand draws the jitter in [0, 1).
	Rand func() float64
	// Logger receives failures and progress; never the secret, the body
	// or the endpoint's query string.
	Logger *slog.Logger
}

// DefaultConfig is the configuration serve starts from.
func DefaultConfig() Config {
	return Config{
		Stream:        "SETTLE_INTENTS",
		Durable:       "settle-webhook",
		From:          FromNew,
		Timeout:       10 * time.Second,
		MaxInFlight:   8,
		MaxPending:    1024,
		RetryDelay:    time.Second,
		MaxRetryDelay: 10 * time.Minute,
		Progress:      time.Minute,
		Now:           time.Now,
		Logger:        slog.Default(),
	}
}

// Validate reports every problem of the configuration, each naming its
// field. The secret's value never appears in an error.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, errors.Newf("webhook config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.URL == "" {
		bad("URL", "is required")
	} else if u, err := url.Parse(c.URL); err != nil {
		bad("URL", "not a URL")
	} else {
		switch {
		case u.Scheme != "http" && u.Scheme != "https":
			bad("URL", "scheme %q: must be http or https", u.Scheme)
		case u.Host == "" || u.Hostname() == "":
			bad("URL", "has no host")
		case u.User != nil:
			bad("URL", "holds user info: credentials in a URL end up in logs; the receiver authenticates settle by the signature")
		case u.Fragment != "":
			bad("URL", "has a fragment")
		}
	}
	if len(c.Secret) < MinSecretBytes {
		bad("Secret", "%d bytes: at least %d are required (32 random bytes recommended)", len(c.Secret), MinSecretBytes)
	}
	if c.Stream == "" || strings.ContainsAny(c.Stream, ".*> \t\r\n") {
		bad("Stream", "%q is not a stream name", c.Stream)
	}
	if c.Durable == "" || len(c.Durable) > 64 || strings.ContainsAny(c.Durable, ".*>/\\ \t\r\n") {
		bad("Durable", "%q is not a consumer name (1..64 bytes, no . * > / \\ or white space)", c.Durable)
	}
	if c.From != FromNew && c.From != FromAll {
		bad("From", "%q is not %s or %s", c.From, FromNew, FromAll)
	}
	for k, r := range c.Routes {
		if err := events.ValidateToken(fmt.Sprintf("Routes[%d]", k), r); err != nil {
			errs = append(errs, errors.Wrap(err, "webhook config"))
		}
	}
	for k, t := range c.Types {
		if _, ok := Settlements[t]; !ok {
			bad(fmt.Sprintf("Types[%d]", k), "%q is not a settlement event type", t)
		}
	}
	if c.Timeout <= 0 {
		bad("Timeout", "%s must be positive", c.Timeout)
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > 1024 {
		bad("MaxInFlight", "%d is outside 1..1024", c.MaxInFlight)
	}
	if c.MaxPending < max(c.MaxInFlight, 1) || c.MaxPending > 100000 {
		bad("MaxPending", "%d is outside MaxInFlight..100000", c.MaxPending)
	}
	if c.RetryDelay <= 0 || c.MaxRetryDelay < c.RetryDelay {
		bad("RetryDelay", "%s and MaxRetryDelay %s: must be positive, MaxRetryDelay ≥ RetryDelay", c.RetryDelay, c.MaxRetryDelay)
	}
	if c.Progress < 0 {
		bad("Progress", "%s is negative", c.Progress)
	}
	if c.Now == nil {
		bad("Now", "is required")
	}
	if c.Logger == nil {
		bad("Logger", "is required")
	}
	return errors.Join(errs...)
}

// endpoint is the URL as log lines show it: scheme, host and path, no
// query (which may hold a token of the receiver's).
func (c Config) endpoint() string {
	u, err := url.Parse(c.URL)
	if err != nil {
		return "?"
	}
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}
