package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/cmd/settle/internal/app"
	"github.com/settle-dev/settle/node"
	"github.com/settle-dev/settle/service"
)

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
// host (app.MCPStdio): a settle node exactly as serve runs it and one MCP
// session on stdio. Stdout carries protocol messages only; every log line
// goes to stderr.
func (m *Main) mcpStdio(ctx context.Context, args []string) error {
	var f mcpFlags
	fs, err := m.flags("mcp", "--routes FILE (--data DIR | --nats-url URL) [flags]", f.register, args)
	if err != nil {
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
	if err == nil {
		err = (&app.MCPStdio{Node: cfg, RoutesPath: f.node.routes, Caller: caller,
			KeyIncludesPayload: f.keyPayload, MaxWait: f.maxWait, Stdin: m.Stdin, Stdout: m.Stdout}).Run(ctx)
	}
	if err != nil {
		return errors.Errorf("mcp: %w", err)
	}
	return nil
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

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
