package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/node"
	"github.com/settle-dev/settle/service"
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

// serve runs, in one process, a settle node (node.Open: the embedded
// nats-server or --nats-url, the producer, reconcilers, the projector,
// each supervised) behind the HTTP API and /mcp. Everything that can be
// checked is checked before anything starts. SIGTERM: the HTTP server
// stops taking requests and lets the in-flight ones finish (each write
// ends with its outcome on the log, or stays write_started and becomes
// unknown at its deadline), then the node's loops stop, then NATS.
func (m *Main) serve(ctx context.Context, args []string) error {
	fs := m.flagSet("serve", "--routes FILE [--dev] [--addr HOST:PORT] [--data DIR] [flags]")
	var f serveFlags
	f.register(fs)
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 || f.node.routes == "" {
		fmt.Fprintln(m.Stderr, "settle serve: --routes FILE is required, and no argument")
		return errUsage
	}
	su, err := m.serveSetup(&f)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	stopTracing, err := startTracing(ctx, su.logger, su.secrets)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	defer stopTracing()
	n, err := node.Open(ctx, su.cfg)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	defer n.Close()
	svc, err := newService(n)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	handler, err := mountAPI(n, svc, su.tokens, &f, su.logger)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	withMCP, err := mountMCP(handler, svc, n.Routes(), f.node.routes, su.tokens, su.logger)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return errors.Errorf("serve: listen: %w", err)
	}
	// The node's loops live on their own context: they stop after the
	// HTTP server has let its in-flight writes finish.
	wctx, stopNode := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNode()
	ran := make(chan error, 1)
	go func() { ran <- n.Run(wctx) }()
	hs := handler.HTTPServer()
	hs.Handler = withMCP
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	m.announce(n, ln.Addr().String(), su.cfg, f.dev)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	su.logger.Info("shutting down: finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	stopNode()
	<-ran
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return errors.Errorf("serve: %w", serveErr)
	}
	su.logger.Info("stopped")
	return nil
}

// announce prints where serve listens.
func (m *Main) announce(n *node.Node, addr string, cfg node.Config, dev bool) {
	fmt.Fprintf(m.Stdout, "settle serving http://%s (%s; %d route(s), %d worker(s)%s; pid %d)\n", addr, n.Where(), len(cfg.Routes), cfg.Workers,
		map[bool]string{true: ", dev mode", false: ""}[dev], os.Getpid())
	if cfg.Listen != nil {
		fmt.Fprintf(m.Stdout, "settle NATS for downstream readers: %s (user %s, %s; read-only: stream %s, subjects %s; settle's own consumers are settle's)\n",
			n.ReaderURL(), node.ReaderUser, cfg.Listen.AuthNote(), ledger.DefaultStoreConfig().Stream, events.AllSubjects)
	}
}

// mountAPI is the HTTP API over the service and the node's log.
func mountAPI(n *node.Node, svc *service.Service, tokens []api.Token, f *serveFlags, logger *slog.Logger) (*api.Server, error) {
	acfg := api.DefaultConfig()
	acfg.Service, acfg.Log, acfg.Tokens, acfg.Dev, acfg.Addr = svc, n.Store(), tokens, f.dev, f.addr
	acfg.Logger, acfg.Metrics, acfg.AccessLog = logger, n.Metrics(), f.accessLog
	acfg.ReadTimeout, acfg.IdleTimeout = f.readTimeout, f.idleTimeout
	acfg.Now, acfg.MaxInFlight, acfg.ReadyChecks = n.Now(), f.maxInFlight, n.ReadyChecks()
	return api.New(acfg)
}

func routeNames(cfg node.Config) []string {
	out := make([]string, len(cfg.Routes))
	for i, r := range cfg.Routes {
		out[i] = r.Name
	}
	return out
}
