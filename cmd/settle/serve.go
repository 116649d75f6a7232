package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/cmd/settle/internal/app"
	"github.com/settle-dev/settle/node"
)

// serveFlags are serve's own options (nodeFlags are shared with mcp).
type serveFlags struct {
	node                                      nodeFlags
	addr, tokens, natsListen, natsPasswordEnv string
	dev, accessLog                            bool
	maxInFlight                               int
	readTimeout, idleTimeout                  time.Duration
	webhook                                   *webhookFlags
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	f.node.register(fs, "settle-data", 2)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen on `HOST:PORT`")
	fs.BoolVar(&f.dev, "dev", false, "development mode: no tokens, loopback only")
	fs.BoolVar(&f.accessLog, "access-log", false, "log every HTTP request at INFO (method, path, status, caller, duration); off, requests are only counted in /metrics")
	fs.StringVar(&f.tokens, "tokens", "", "token file (JSON; secrets from environment variables)")
	fs.StringVar(&f.natsListen, "nats-listen", "", "let downstream readers reach the embedded server at `ADDR` (PORT or HOST:PORT; loopback when no host is given)")
	fs.StringVar(&f.natsPasswordEnv, "nats-password-env", "SETTLE_NATS_PASSWORD", "environment `VARIABLE` with the password of the NATS user \""+node.ReaderUser+"\" (required off loopback)")
	fs.IntVar(&f.maxInFlight, "max-inflight", api.DefaultMaxInFlight, "API and /mcp requests served at once; more are answered 503 with Retry-After")
	fs.DurationVar(&f.readTimeout, "read-timeout", api.DefaultConfig().ReadTimeout, "a request, body included, must arrive within this `duration`")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", api.DefaultConfig().IdleTimeout, "close kept-alive connections idle this `duration`")
	f.webhook = registerWebhook(fs) // webhook.go
}

// check reports every problem of serve's own flags.
func (f *serveFlags) check() []string {
	var out []string
	if f.maxInFlight < 1 {
		out = append(out, fmt.Sprintf("--max-inflight: %d must be ≥ 1", f.maxInFlight))
	}
	if f.readTimeout <= 0 || f.idleTimeout <= 0 {
		out = append(out, "--read-timeout and --idle-timeout must be positive")
	}
	if f.dev {
		if err := api.CheckDevAddr(f.addr); err != nil {
			out = append(out, "--dev: "+err.Error())
		}
	}
	if f.tokens == "" && !f.dev {
		out = append(out, "--tokens FILE is required unless --dev")
	}
	if err := f.webhook.check(os.LookupEnv); err != nil {
		out = append(out, err.Error())
	}
	return out
}

// serveSetup is what serve checked and loaded before anything starts.
type serveSetup struct {
	cfg    node.Config
	tokens []api.Token
	logger *slog.Logger
	// secrets are every secret the process knows (scrubbed from logs and spans).
	secrets []string
}

// setup checks every flag (all problems at once), the routes and the
// token file, before anything starts.
func (m *Main) serveSetup(f *serveFlags) (*serveSetup, error) {
	cfg, err := f.node.config("settle serve", "settle-api")
	problems := f.check()
	if err != nil {
		problems = append([]string{err.Error()}, problems...)
	}
	if len(problems) > 0 {
		return nil, errors.Newf("%s", strings.Join(problems, "; "))
	}
	if f.natsListen != "" {
		if f.node.cfg.NATSURL != "" {
			return nil, errors.New("--nats-listen exposes the embedded server; with --nats-url readers connect to that server")
		}
		if cfg.Listen, err = node.ParseListen(f.natsListen, f.natsPasswordEnv, os.LookupEnv); err != nil {
			return nil, err
		}
	}
	if cfg.Routes, err = loadRoutes(f.node.routes); err != nil {
		return nil, err
	}
	su := &serveSetup{cfg: cfg}
	su.cfg.Webhook = f.webhook.config()
	if f.tokens != "" {
		if su.tokens, err = node.LoadTokens(f.tokens, routeNames(cfg)); err != nil {
			return nil, err
		}
	}
	secrets := node.RouteSecrets(f.node.routes)
	for _, t := range su.tokens {
		secrets = append(secrets, t.Secret)
	}
	if pw, ok := os.LookupEnv(f.natsPasswordEnv); ok {
		secrets = append(secrets, pw)
	}
	su.logger, su.secrets = f.node.logger(m.Stderr, secrets...), secrets
	if su.cfg.Now, err = node.ProcessClock(su.logger); err != nil {
		return nil, err
	}
	su.cfg.Logger = su.logger
	return su, nil
}

// serve checks everything that can be checked before anything starts,
// then runs the node behind the HTTP API and /mcp (app.Serve) until
// SIGTERM.
func (m *Main) serve(ctx context.Context, args []string) error {
	var f serveFlags
	fs, err := m.flags("serve", "--routes FILE [--dev] [--addr HOST:PORT] [--data DIR] [flags]", f.register, args)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 || f.node.routes == "" {
		fmt.Fprintln(m.Stderr, "settle serve: --routes FILE is required, and no argument")
		return errUsage
	}
	su, err := m.serveSetup(&f)
	if err == nil {
		err = (&app.Serve{Node: su.cfg, RoutesPath: f.node.routes, Tokens: su.tokens, Secrets: su.secrets,
			Addr: f.addr, Dev: f.dev, AccessLog: f.accessLog, MaxInFlight: f.maxInFlight,
			ReadTimeout: f.readTimeout, IdleTimeout: f.idleTimeout, Stdout: m.Stdout}).Run(ctx)
	}
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	return nil
}

func routeNames(cfg node.Config) []string {
	out := make([]string, len(cfg.Routes))
	for i, r := range cfg.Routes {
		out[i] = r.Name
	}
	return out
}
