package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/node"
	"github.com/settle-dev/settle/service"
)

// Serve is settle serve, checked: a node behind the HTTP API and /mcp.
type Serve struct {
	// Node is the node's configuration, routes loaded, logger and clock
	// set.
	Node node.Config
	// RoutesPath is the route file the routes came from (its credentials
	// are scrubbed from tool results).
	RoutesPath string
	Tokens     []api.Token
	// Secrets are every secret the process knows (scrubbed from spans).
	Secrets []string
	// Addr is where the API listens (HOST:PORT); Dev: development mode.
	Addr string
	Dev  bool
	// The API's options.
	AccessLog                bool
	MaxInFlight              int
	ReadTimeout, IdleTimeout time.Duration
	// Stdout is told where the process serves.
	Stdout io.Writer
}

// Run runs, in one process, a settle node (node.Open: the embedded
// nats-server or Node.NATSURL, the producer, reconcilers, the projector,
// each supervised) behind the HTTP API and /mcp, until ctx ends. Then the
// HTTP server stops taking requests and lets the in-flight ones finish
// (each write ends with its outcome on the log, or stays write_started
// and becomes unknown at its deadline), then the node's loops stop, then
// NATS.
func (s *Serve) Run(ctx context.Context) error {
	logger := s.Node.Logger
	stopTracing, err := StartTracing(ctx, logger, s.Secrets)
	if err != nil {
		return err
	}
	defer stopTracing()
	n, err := node.Open(ctx, s.Node)
	if err != nil {
		return err
	}
	defer n.Close()
	svc, err := NewService(n)
	if err != nil {
		return err
	}
	handler, err := s.mountAPI(n, svc)
	if err != nil {
		return err
	}
	withMCP, err := mountMCP(handler, svc, n.Routes(), s.RoutesPath, s.Tokens, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return errors.Errorf("listen: %w", err)
	}
	// The node's loops live on their own context: they stop after the
	// HTTP server has let its in-flight writes finish.
	stopNode := sync.OnceFunc(runNode(ctx, n))
	defer stopNode()
	hs := handler.HTTPServer()
	hs.Handler = withMCP
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.announce(n, ln.Addr().String())

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	logger.Info("shutting down: finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	stopNode()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	logger.Info("stopped")
	return nil
}

// announce prints where serve listens.
func (s *Serve) announce(n *node.Node, addr string) {
	cfg := s.Node
	fmt.Fprintf(s.Stdout, "settle serving http://%s (%s; %d route(s), %d worker(s)%s; pid %d)\n", addr, n.Where(), len(cfg.Routes), cfg.Workers,
		map[bool]string{true: ", dev mode", false: ""}[s.Dev], os.Getpid())
	if cfg.Listen != nil {
		fmt.Fprintf(s.Stdout, "settle NATS for downstream readers: %s (user %s, %s; read-only: stream %s, subjects %s; settle's own consumers are settle's)\n",
			n.ReaderURL(), node.ReaderUser, cfg.Listen.AuthNote(), ledger.DefaultStoreConfig().Stream, events.AllSubjects)
	}
}

// mountAPI is the HTTP API over the service and the node's log.
func (s *Serve) mountAPI(n *node.Node, svc *service.Service) (*api.Server, error) {
	acfg := api.DefaultConfig()
	acfg.Service, acfg.Log, acfg.Tokens, acfg.Dev, acfg.Addr = svc, n.Store(), s.Tokens, s.Dev, s.Addr
	acfg.Logger, acfg.Metrics, acfg.AccessLog = s.Node.Logger, n.Metrics(), s.AccessLog
	acfg.ReadTimeout, acfg.IdleTimeout = s.ReadTimeout, s.IdleTimeout
	acfg.Now, acfg.MaxInFlight, acfg.ReadyChecks = n.Now(), s.MaxInFlight, n.ReadyChecks()
	return api.New(acfg)
}
