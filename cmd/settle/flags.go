package main

import (
	"flag"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/node"
)

// nodeFlags are the flags of every command that runs a settle process
// (serve, mcp): one set, one meaning, bound to a node.Config.
type nodeFlags struct {
	cfg               node.Config
	routes, logFormat string
}

// register adds the flags to fs with the command's defaults of --data
// and --workers.
func (f *nodeFlags) register(fs *flag.FlagSet, data string, workers int) {
	f.cfg = node.DefaultConfig()
	c := &f.cfg
	fs.StringVar(&c.Data, "data", data, "data `DIR` (JetStream store, SQLite views, lock); one process owns it")
	fs.StringVar(&f.routes, "routes", "", "route file (YAML), required; see examples/routes")
	fs.StringVar(&c.NATSURL, "nats-url", "", "connect to this NATS server or cluster instead of the embedded one")
	fs.StringVar((*string)(&c.Durability), "durability", string(c.Durability), "embedded server fsync: always | default")
	fs.StringVar(&c.GroupCommit, "group-commit", c.GroupCommit, "appends of concurrent callers in atomic batches: auto (off on an embedded server that does not fsync every write, measured otherwise) | measured (batches or lone publishes by what each has cost) | off (every append alone)")
	fs.StringVar(&f.logFormat, "log-format", node.LogText, "log lines as text | json")
	fs.IntVar(&c.Workers, "workers", workers, "reconciler workers in this process (0 only with --nats-url: another process settles)")
	fs.IntVar(&c.Replicas, "replicas", c.Replicas, "stream replicas (3 on a cluster)")
	fs.BoolVar(&c.AcceptLogLoss, "accept-log-loss", false, "start although the log lost events settle knew of (the views are moved aside and rebuilt; the lost intents are listed and must be checked by hand)")
	fs.IntVar(&c.MinFreeMB, "min-free-mb", c.MinFreeMB, "after the embedded server's disk was full, resume when its file system has this many `MiB` free")
	fs.DurationVar(&c.MaxClockOffset, "max-clock-offset", 0, "refuse every append while this process's clock is off the log's by more than this `duration` (0: half the smallest clock_skew of the routes)")
	fs.DurationVar(&c.Lease, "lease", c.Lease, "how long a reconciler's claim on an intent holds it: a process cut from NATS loses its intents to the others after this `duration`")
	fs.IntVar(&c.CacheMB, "cache-mb", c.CacheMB, "the reconcilers keep histories in LRUs of at most this many `MiB` in all, shared by the workers (an estimate)")
	fs.IntVar(&c.Steps, "steps", c.Steps, "intents each reconciler worker steps at once: also its concurrent calls to an external API")
	fs.DurationVar(&c.ProjectorStall, "projector-stall", c.ProjectorStall, "restart the projector when its views have not moved for this `duration` while the stream holds more")
	fs.Uint64Var(&c.ProjectorMaxLag, "projector-max-lag", c.ProjectorMaxLag, "/readyz fails while the views are more than this many `events` behind the stream for --projector-stall")
}

// flagOf names node.Config's fields as the flags spell them.
var flagOf = map[string]string{
	"Data": "--data", "Routes": "--routes", "NATSURL": "--nats-url", "Listen": "--nats-listen",
	"Durability": "--durability", "Replicas": "--replicas", "GroupCommit": "--group-commit",
	"Workers": "--workers", "MinFreeMB": "--min-free-mb", "MaxClockOffset": "--max-clock-offset",
	"Lease": "--lease", "CacheMB": "--cache-mb", "Steps": "--steps",
	"ProjectorStall": "--projector-stall", "ProjectorMaxLag": "--projector-max-lag",
}

// config is the node.Config of the flags (routes not loaded yet), checked:
// every problem at once, each naming its flag.
func (f *nodeFlags) config(command, actor string) (node.Config, error) {
	c := f.cfg
	c.Command, c.Actor = command, actor
	var problems []string
	if err := node.CheckLogFormat(f.logFormat); err != nil {
		problems = append(problems, "--log-format: "+err.Error())
	}
	var ce *node.ConfigError
	if err := c.Validate(); errors.As(err, &ce) {
		for _, p := range ce.Problems {
			if p.Field != "Routes" && p.Field != "Logger" {
				problems = append(problems, flagName(p.Field)+": "+p.Reason)
			}
		}
	}
	if len(problems) > 0 {
		return c, errors.Newf("%s", strings.Join(problems, "; "))
	}
	return c, nil
}

func flagName(field string) string {
	if f, ok := flagOf[field]; ok {
		return f
	}
	return field
}

// logger is the process's logger (--log-format) on w: every secret the
// process knows is scrubbed from every line.
func (f *nodeFlags) logger(w io.Writer, secrets ...string) *slog.Logger {
	return node.NewLogger(w, f.logFormat, adapter.NewScrubber(secrets...))
}

// loadRoutes reads the route file; every error names route and field.
func loadRoutes(path string) ([]adapter.Route, error) {
	return httproute.Load(path, os.LookupEnv)
}
