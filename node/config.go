package node

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/consumers/reconcile"
	"github.com/settle-dev/settle/consumers/webhook"
	"github.com/settle-dev/settle/embedded"
)

// Config is one settle process. DefaultConfig fills every field but
// Command, Data (or NATSURL) and Routes; Validate reports every problem.
type Config struct {
	// Command names the process in the data directory's lock ("settle
	// serve"), so that a second process is told who holds it.
	Command string
	// Actor names the producer on the events it appends (Actor@host) and
	// prefixes the reconcilers' worker names.
	Actor string
	// Data is the data directory: the embedded server's store, the views,
	// the high-water mark and the lock; one process owns it. Empty only
	// with NATSURL: a temporary directory is used and removed by Close.
	Data string
	// Routes are the configured routes (at least one).
	Routes []adapter.Route
	// NATSURL connects to this NATS server or cluster instead of running
	// the embedded server in Data.
	NATSURL string
	// Listen lets downstream readers reach the embedded server
	// (ParseListen; serve --nats-listen). Not with NATSURL.
	Listen *Listener
	// Durability is the embedded server's fsync (always or default).
	Durability embedded.Durability
	// Replicas is the stream's replicas (3 on a cluster).
	Replicas int
	// GroupCommit is how appends are published: GroupCommitAuto,
	// GroupCommitMeasured or GroupCommitOff (StoreConfig).
	GroupCommit string
	// Workers is the reconcilers this process runs (0 only with NATSURL:
	// another process settles the intents).
	Workers int
	// AcceptLogLoss starts although the log lost events settle knew of
	// (the loss is recorded, the views rebuilt, the intents held).
	AcceptLogLoss bool
	// MinFreeMB: after the embedded server's disk was full, it is
	// restarted once its file system has this many MiB free. More than
	// the whole file system is refused by Open.
	MinFreeMB int
	// MaxClockOffset: appends are refused while this process's clock is
	// off the log's by more (0: half the smallest clock_skew of Routes).
	MaxClockOffset time.Duration
	// Lease is how long a reconciler's claim holds an intent.
	Lease time.Duration
	// CacheMB bounds the reconcilers' history caches, all of them: each
	// of the Workers gets its share.
	CacheMB int
	// Steps is the intents each reconciler steps at once.
	Steps int
	// ProjectorStall: a projector whose checkpoint has not moved for this
	// long while the stream holds more is restarted, and /readyz says so.
	ProjectorStall time.Duration
	// ProjectorMaxLag: /readyz fails while the views are more events than
	// this behind the stream for longer than ProjectorStall.
	ProjectorMaxLag uint64
	// Webhook, if set, pushes every settlement to an HTTP endpoint, signed
	// (consumers/webhook; serve --webhook): its deliverer runs with the
	// node's loops.
	Webhook *webhook.Config
	// Logger receives every line (NewLogger); Now is the process's clock.
	Logger *slog.Logger
	Now    func() time.Time
}

// The values of Config.GroupCommit.
const (
	GroupCommitAuto     = "auto"
	GroupCommitMeasured = "measured"
	GroupCommitOff      = "off"
)

// DefaultConfig is serve's defaults.
func DefaultConfig() Config {
	rc := reconcile.DefaultConfig()
	return Config{
		Command: "settle", Actor: "settle",
		Durability: embedded.SyncAlways, Replicas: 1, GroupCommit: GroupCommitAuto, Workers: 2,
		MinFreeMB: 64, Lease: rc.Lease, CacheMB: reconcile.DefaultCacheBytes >> 20, Steps: reconcile.DefaultSteps,
		ProjectorStall: 30 * time.Second, ProjectorMaxLag: 10_000,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), Now: time.Now,
	}
}

// Problem is one thing wrong with a Config: the field and why.
type Problem struct {
	Field, Reason string
}

// ConfigError lists every problem Validate found.
type ConfigError struct {
	Problems []Problem
}

func (e *ConfigError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Field + ": " + p.Reason
	}
	return "node config: " + strings.Join(parts, "; ")
}

// Validate reports every problem of c at once (a *ConfigError), each
// naming its field.
func (c Config) Validate() error {
	var ps []Problem
	check := func(wrong bool, field, format string, args ...any) {
		if wrong {
			ps = append(ps, Problem{Field: field, Reason: fmt.Sprintf(format, args...)})
		}
	}
	check(c.Command == "", "Command", "is required")
	check(c.Actor == "", "Actor", "is required")
	check(c.Data == "" && c.NATSURL == "", "Data", "is required unless NATSURL is set")
	check(len(c.Routes) == 0, "Routes", "at least one route is required")
	check(c.Listen != nil && c.NATSURL != "", "Listen", "exposes the embedded server; with NATSURL readers connect to that server")
	_, err := embedded.ParseDurability(string(c.Durability))
	check(err != nil, "Durability", "%v", err)
	check(c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5, "Replicas", "%d: want 1, 3 or 5", c.Replicas)
	err = CheckGroupCommit(c.GroupCommit)
	check(err != nil, "GroupCommit", "%v", err)
	check(c.Workers < 0 || c.Workers > 64, "Workers", "%d is outside 1..64", c.Workers)
	check(c.Workers == 0 && c.NATSURL == "", "Workers", "0 only with NATSURL (another process must settle the intents)")
	check(c.MinFreeMB < 1, "MinFreeMB", "%d must be ≥ 1", c.MinFreeMB)
	check(c.MaxClockOffset < 0, "MaxClockOffset", "%s is negative", c.MaxClockOffset)
	check(c.Lease < time.Second, "Lease", "%s must be at least 1s", c.Lease)
	check(c.CacheMB < 1, "CacheMB", "%d must be ≥ 1", c.CacheMB)
	check(c.Steps < 1 || c.Steps > 1024, "Steps", "%d is outside 1..1024", c.Steps)
	check(c.ProjectorStall < time.Second, "ProjectorStall", "%s must be at least 1s", c.ProjectorStall)
	check(c.ProjectorMaxLag < 1, "ProjectorMaxLag", "must be ≥ 1")
	check(c.Logger == nil, "Logger", "is required")
	check(c.Now == nil, "Now", "is required")
	if len(ps) > 0 {
		return &ConfigError{Problems: ps}
	}
	return nil
}

// CheckGroupCommit refuses a GroupCommit value that is not one of the
// three.
func CheckGroupCommit(v string) error {
	switch v {
	case GroupCommitAuto, GroupCommitMeasured, GroupCommitOff:
		return nil
	}
	return errors.Errorf("%q: want %s, %s or %s", v, GroupCommitAuto, GroupCommitMeasured, GroupCommitOff)
}

// maxOffset is MaxClockOffset, or half the smallest clock skew the
// routes allow (two processes each within it of the log are within the
// skew of each other).
func maxOffset(set time.Duration, routes []adapter.Route) time.Duration {
	if set > 0 {
		return set
	}
	skew := 5 * time.Second
	for i, r := range routes {
		if d := time.Duration(r.Policy.ClockSkew); d > 0 && (i == 0 || d < skew) {
			skew = d
		}
	}
	return skew / 2
}
