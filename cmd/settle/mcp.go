package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/internal/buildinfo"
	"github.com/settle-dev/settle/mcp"
	"github.com/settle-dev/settle/node"
	"github.com/settle-dev/settle/service"
)

// mcpSecrets are the secrets a tool result is scrubbed of: the routes'
// credentials and the API token secrets (at least 4 bytes each).
func mcpSecrets(routesPath string, tokens []api.Token, logger *slog.Logger) []string {
	out := node.RouteSecrets(routesPath)
	for _, t := range tokens {
		out = append(out, t.Secret)
	}
	kept := out[:0]
	for _, s := range out {
		if len(s) < 4 {
			logger.Warn("mcp: a route credential shorter than 4 bytes cannot be scrubbed from tool results")
			continue
		}
		kept = append(kept, s)
	}
	return kept
}

// newService is the service both transports of a process share (one
// single-flight): the node's producer writes, its projector's views read.
func newService(n *node.Node) (*service.Service, error) {
	sc := service.DefaultConfig()
	sc.Intents, sc.Views, sc.Now = n.Producer(), n.Projector(), n.Now()
	return service.New(sc)
}

// mountMCP serves the API and, at /mcp, the MCP endpoint over the same
// service, behind the same bearer tokens: api.Server.Authenticate gives
// the token's caller (name, tenant, scopes, limits) to every tool call.
func mountMCP(apiSrv *api.Server, svc *service.Service, routes []adapter.Route,
	routesPath string, tokens []api.Token, logger *slog.Logger) (http.Handler, error) {
	cfg := mcp.DefaultConfig()
	cfg.Service, cfg.Routes, cfg.Logger, cfg.Version = svc, routes, logger, buildinfo.Read().Version
	cfg.Secrets = mcpSecrets(routesPath, tokens, logger)
	srv, err := mcp.New(cfg)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", apiSrv.Instrument("/mcp", srv.Handler(apiSrv.Authenticate)))
	mux.Handle("/", apiSrv)
	return mux, nil
}

// mcpFlags are mcp's own options (nodeFlags are shared with serve).
type mcpFlags struct {
	node                           nodeFlags
	scopes, accounts, name, tenant string
	keyPayload                     bool
	maxWait                        time.Duration
}

func (f *mcpFlags) register(fs *flag.FlagSet) {
	f.node.register(fs, "", 1)
	fs.StringVar(&f.scopes, "scopes", "submit,read", "what the agent may do: submit, read, operate (operate lets it approve and resolve its own writes)")
	fs.StringVar(&f.accounts, "accounts", "", "comma-separated accounts the agent may write as (with exactly one, it is the default; with more, each call names its account); empty: any")
	fs.StringVar(&f.name, "name", "mcp-stdio", "the caller's name (recorded as operator of its approvals)")
	fs.StringVar(&f.tenant, "tenant", service.DefaultTenant, "the `TENANT` the agent acts for: its task and step ids name that tenant's intents, and it sees no other tenant's")
	fs.BoolVar(&f.keyPayload, "key-includes-payload", false, "derive keys from task, step and the payload's hash (another payload is another write)")
	fs.DurationVar(&f.maxWait, "max-wait", 30*time.Second, "bound of wait_seconds")
}

// mcpStdio runs settle as an MCP server on stdin/stdout for a desktop agent
// host: a settle node exactly as serve runs it (node.Open: the embedded
// nats-server in --data or --nats-url, the start-up check and sweep, the
// producer, reconcilers and the projector, each supervised), and one MCP
// session on stdio. Stdout carries protocol messages only; every log line
// goes to stderr.
func (m *Main) mcpStdio(ctx context.Context, args []string) error {
	fs := m.flagSet("mcp", "--routes FILE (--data DIR | --nats-url URL) [flags]")
	var f mcpFlags
	f.register(fs)
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if f.node.routes == "" || (f.node.cfg.Data == "" && f.node.cfg.NATSURL == "") || fs.NArg() > 0 {
		fmt.Fprintln(m.Stderr, "settle mcp: --routes FILE and --data DIR (or --nats-url URL) are required, and no argument")
		return errUsage
	}
	caller := service.Caller{Name: f.name, Tenant: f.tenant, Scopes: splitList(f.scopes), Accounts: splitList(f.accounts)}
	if err := caller.Validate(); err != nil {
		return errors.Errorf("mcp: --tenant/--scopes/--accounts/--name: %w", err)
	}
	cfg, err := m.mcpConfig(&f)
	if err != nil {
		return errors.Errorf("mcp: %w", err)
	}
	stopTracing, err := startTracing(ctx, cfg.Logger, node.RouteSecrets(f.node.routes))
	if err != nil {
		return errors.Errorf("mcp: %w", err)
	}
	defer stopTracing()
	// Stdout is the protocol. Anything else that would print to the
	// process's stdout is sent to stderr while the session runs.
	out := m.Stdout
	if f, ok := out.(*os.File); ok && f == os.Stdout {
		saved := os.Stdout
		os.Stdout = os.Stderr
		defer func() { os.Stdout = saved }()
	}
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return errors.Errorf("mcp: %w", err)
	}
	defer n.Close()
	wctx, stopNode := context.WithCancel(context.WithoutCancel(ctx))
	ran := make(chan error, 1)
	go func() { ran <- n.Run(wctx) }()
	defer func() { stopNode(); <-ran }()
	return m.runStdio(ctx, n, &f, caller)
}

// mcpConfig is mcp's node.Config: the flags it shares with serve, the
// routes, the logger (the routes' credentials scrubbed) and the clock.
func (m *Main) mcpConfig(f *mcpFlags) (node.Config, error) {
	cfg, err := f.node.config("settle mcp", "settle-mcp")
	if err != nil {
		return cfg, err
	}
	if cfg.Routes, err = loadRoutes(f.node.routes); err != nil {
		return cfg, err
	}
	cfg.Logger = f.node.logger(m.Stderr, node.RouteSecrets(f.node.routes)...)
	cfg.Now, err = node.ProcessClock(cfg.Logger)
	return cfg, err
}

// runStdio serves one MCP session on stdio over the node.
func (m *Main) runStdio(ctx context.Context, n *node.Node, f *mcpFlags, caller service.Caller) error {
	logger := n.Logger()
	svc, err := newService(n)
	if err != nil {
		return errors.Errorf("mcp: %w", err)
	}
	cfg := mcp.DefaultConfig()
	cfg.Service, cfg.Routes, cfg.Logger, cfg.Version = svc, n.Routes(), logger, buildinfo.Read().Version
	cfg.KeyIncludesPayload, cfg.MaxWait = f.keyPayload, f.maxWait
	cfg.Secrets = mcpSecrets(f.node.routes, nil, logger)
	srv, err := mcp.New(cfg)
	if err != nil {
		return errors.Errorf("mcp: %w", err)
	}
	in := m.Stdin
	if in == nil {
		in = os.Stdin
	}
	logger.Info("settle mcp: serving on stdio", "routes", len(n.Routes()), "where", n.Where(), "workers", f.node.cfg.Workers, "caller", caller.Name, "tenant", caller.Tenant, "scopes", caller.Scopes)
	err = srv.RunStdio(ctx, caller, in, m.Stdout)
	logger.Info("settle mcp: session ended")
	if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		return errors.Errorf("mcp: %w", err)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
