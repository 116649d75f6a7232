package app

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/mcp"
	"github.com/settle-dev/settle/node"
	"github.com/settle-dev/settle/service"
)

// MCPStdio is settle mcp, checked: a node and one MCP session on stdio.
type MCPStdio struct {
	// Node is the node's configuration, routes loaded, logger (on
	// stderr) and clock set.
	Node node.Config
	// RoutesPath is the route file the routes came from (its credentials
	// are scrubbed from tool results and spans).
	RoutesPath string
	// Caller is who the agent acts as.
	Caller service.Caller
	// KeyIncludesPayload and MaxWait are mcp.Config's.
	KeyIncludesPayload bool
	MaxWait            time.Duration
	// Stdin and Stdout carry the protocol (Stdin nil: os.Stdin).
	Stdin  io.Reader
	Stdout io.Writer
}

// Run runs settle as an MCP server on stdio for a desktop agent host: a
// settle node exactly as Serve runs it (node.Open: the embedded
// nats-server or Node.NATSURL, the start-up check and sweep, the
// producer, reconcilers and the projector, each supervised), and one MCP
// session until the input ends or ctx does. Stdout carries protocol
// messages only; every log line goes to the node's logger.
func (s *MCPStdio) Run(ctx context.Context) error {
	stopTracing, err := StartTracing(ctx, s.Node.Logger, node.RouteSecrets(s.RoutesPath))
	if err != nil {
		return err
	}
	defer stopTracing()
	// Stdout is the protocol. Anything else that would print to the
	// process's stdout is sent to stderr while the session runs.
	if f, ok := s.Stdout.(*os.File); ok && f == os.Stdout {
		saved := os.Stdout
		os.Stdout = os.Stderr
		defer func() { os.Stdout = saved }()
	}
	n, err := node.Open(ctx, s.Node)
	if err != nil {
		return err
	}
	defer n.Close()
	defer runNode(ctx, n)()
	return s.session(ctx, n)
}

// session serves one MCP session on stdio over the node.
func (s *MCPStdio) session(ctx context.Context, n *node.Node) error {
	logger := n.Logger()
	svc, err := NewService(n)
	if err != nil {
		return err
	}
	srv, err := newMCP(svc, n.Routes(), s.RoutesPath, nil, logger, func(cfg *mcp.Config) {
		cfg.KeyIncludesPayload, cfg.MaxWait = s.KeyIncludesPayload, s.MaxWait
	})
	if err != nil {
		return err
	}
	in := s.Stdin
	if in == nil {
		in = os.Stdin
	}
	c := s.Caller
	logger.Info("settle mcp: serving on stdio", "routes", len(n.Routes()), "where", n.Where(), "workers", s.Node.Workers, "caller", c.Name, "tenant", c.Tenant, "scopes", c.Scopes)
	err = srv.RunStdio(ctx, c, in, s.Stdout)
	logger.Info("settle mcp: session ended")
	if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		return err
	}
	return nil
}
