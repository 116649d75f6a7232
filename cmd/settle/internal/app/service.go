package app

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/internal/buildinfo"
	"github.com/settle-dev/settle/mcp"
	"github.com/settle-dev/settle/node"
	"github.com/settle-dev/settle/service"
)

// runNode runs the node's loops on a context of their own (they outlive
// ctx's end until stop): stop ends them and waits.
func runNode(ctx context.Context, n *node.Node) (stop func()) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ran := make(chan error, 1)
	go func() { ran <- n.Run(wctx) }()
	return func() { cancel(); <-ran }
}

// newMCP is the MCP server over the service, its tool results scrubbed
// of mcpSecrets.
func newMCP(svc *service.Service, routes []adapter.Route, routesPath string, tokens []api.Token, logger *slog.Logger, edit func(*mcp.Config)) (*mcp.Server, error) {
	cfg := mcp.DefaultConfig()
	cfg.Service, cfg.Routes, cfg.Logger, cfg.Version = svc, routes, logger, buildinfo.Read().Version
	cfg.Secrets = mcpSecrets(routesPath, tokens, logger)
	if edit != nil {
		edit(&cfg)
	}
	return mcp.New(cfg)
}

// NewService is the service both transports of a process share (one
// single-flight): the node's producer writes, its projector's views read.
func NewService(n *node.Node) (*service.Service, error) {
	sc := service.DefaultConfig()
	sc.Intents, sc.Views, sc.Now = n.Producer(), n.Projector(), n.Now()
	return service.New(sc)
}

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

// mountMCP serves the API and, at /mcp, the MCP endpoint over the same
// service, behind the same bearer tokens: api.Server.Authenticate gives
// the token's caller (name, tenant, scopes, limits) to every tool call.
func mountMCP(apiSrv *api.Server, svc *service.Service, routes []adapter.Route,
	routesPath string, tokens []api.Token, logger *slog.Logger) (http.Handler, error) {
	srv, err := newMCP(svc, routes, routesPath, tokens, logger, nil)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", apiSrv.Instrument("/mcp", srv.Handler(apiSrv.Authenticate)))
	mux.Handle("/", apiSrv)
	return mux, nil
}
