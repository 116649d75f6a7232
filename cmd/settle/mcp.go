package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/consumers/reconcile"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/mcp"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/service"
)

// mcpSecrets are the values no tool result may show: the route headers'
// ${env:NAME} values (credentials may only come from there) and the API
// token secrets.
func mcpSecrets(routesPath string, tokens []api.Token, logger *slog.Logger) []string {
	var out []string
	if data, err := os.ReadFile(routesPath); err == nil {
		if cfgs, err := httproute.Parse(data, os.LookupEnv); err == nil {
			ref := regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}`)
			for _, c := range cfgs {
				for _, h := range c.Headers {
					for _, m := range ref.FindAllStringSubmatch(h.Value, -1) {
						if v, ok := os.LookupEnv(m[1]); ok {
							out = append(out, v)
						}
					}
				}
			}
		}
	}
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
// single-flight): the producer's writes and the projector's views.
func newService(prod *producer.Producer, proj *projector.Projector, now func() time.Time) (*service.Service, error) {
	sc := service.DefaultConfig()
	sc.Intents, sc.Views, sc.Now = prod, proj, now
	return service.New(sc)
}

// mountMCP serves the API and, at /mcp, the MCP endpoint over the same
// service, behind the same bearer tokens: api.Server.Authenticate gives
// the token's caller (name, tenant, scopes, limits) to every tool call.
func mountMCP(apiSrv *api.Server, svc *service.Service, routes []adapter.Route,
	routesPath string, tokens []api.Token, logger *slog.Logger) (http.Handler, error) {
	cfg := mcp.DefaultConfig()
	cfg.Service, cfg.Routes, cfg.Logger, cfg.Version = svc, routes, logger, version
	cfg.Secrets = mcpSecrets(routesPath, tokens, logger)
	srv, err := mcp.New(cfg)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler(apiSrv.Authenticate))
	mux.Handle("/", apiSrv)
	return mux, nil
}

// mcpStdio runs settle as an MCP server on stdin/stdout for a desktop agent
// host: the embedded nats-server in --data (or --nats-url), the producer,
// reconcilers and the projector, and one MCP session on stdio. Stdout
// carries protocol messages only; every log line goes to stderr.
func (m *Main) mcpStdio(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	data := fs.String("data", "", "data `DIR` (JetStream store and views); required unless --nats-url")
	routesPath := fs.String("routes", "", "route file (YAML), required; see examples/routes")
	natsURL := fs.String("nats-url", "", "use this NATS server or cluster (e.g. the one settle serve uses) instead of an embedded one")
	durability := fs.String("durability", "always", "embedded server fsync: always | default")
	workers := fs.Int("workers", 1, "reconciler workers in this process (0 with --nats-url: leave reconciliation to settle serve)")
	replicas := fs.Int("replicas", 1, "stream replicas (3 on a cluster)")
	groupCommit := fs.String("group-commit", groupCommitAuto, "appends in atomic batches: auto | measured | off (as settle serve's)")
	scopes := fs.String("scopes", "submit,read", "what the agent may do: submit, read, operate (operate lets it approve and resolve its own writes)")
	accounts := fs.String("accounts", "", "comma-separated accounts the agent may write as (the first is the default); empty: any")
	tenant := fs.String("tenant", api.DefaultTenant, "the `TENANT` the agent acts for: its task and step ids name that tenant's intents, and it sees no other tenant's")
	name := fs.String("name", "mcp-stdio", "the caller's name (recorded as operator of its approvals)")
	keyPayload := fs.Bool("key-includes-payload", false, "derive keys from task, step and the payload's hash (another payload is another write)")
	maxWait := fs.Duration("max-wait", 30*time.Second, "bound of wait_seconds")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	switch {
	case *routesPath == "":
		fmt.Fprintln(m.Stderr, "settle mcp: --routes FILE is required")
		return errUsage
	case *data == "" && *natsURL == "":
		fmt.Fprintln(m.Stderr, "settle mcp: --data DIR or --nats-url URL is required")
		return errUsage
	case *workers < 0 || *workers > 64 || (*workers == 0 && *natsURL == ""):
		return errors.Errorf("mcp: --workers: %d is outside 1..64 (0 only with --nats-url)", *workers)
	}
	caller := service.Caller{Name: *name, Tenant: *tenant, Scopes: splitList(*scopes), Accounts: splitList(*accounts)}
	if err := caller.Validate(); err != nil {
		return errors.Errorf("mcp: --tenant/--scopes/--accounts/--name: %w", err)
	}
	dur, err := embedded.ParseDurability(*durability)
	if err != nil {
		return errors.Errorf("mcp: --durability: %w", err)
	}
	if err := checkGroupCommit(*groupCommit); err != nil {
		return errors.Errorf("mcp: --group-commit: %w", err)
	}

	// Stdout is the protocol. Anything else that would print to the
	// process's stdout is sent to stderr while the session runs.
	out := m.Stdout
	if f, ok := out.(*os.File); ok && f == os.Stdout {
		saved := os.Stdout
		os.Stdout = os.Stderr
		defer func() { os.Stdout = saved }()
	}
	in := m.Stdin
	if in == nil {
		in = os.Stdin
	}
	logger := newLogger(m.Stderr)

	routes, err := httproute.Load(*routesPath, os.LookupEnv)
	if err != nil {
		return errors.Errorf("mcp: %w", err)
	}
	var dd *dataDir
	if *data != "" {
		// One process owns a data directory (see lockDataDir).
		dd, err = lockDataDir(*data, "settle mcp", true)
		if err != nil {
			return errors.Errorf("mcp: %w", err)
		}
		defer dd.Unlock()
		if err := privateViews(dd.Views()); err != nil {
			return errors.Errorf("mcp: %w", err)
		}
	}
	var nc *nats.Conn
	if *natsURL == "" {
		srv, err := embedded.Start(embedded.Config{Dir: filepath.Join(*data, "jetstream"), Durability: dur, Port: -1})
		if err != nil {
			return errors.Errorf("mcp: %w", err)
		}
		defer srv.Stop()
		nc, err = srv.Connect()
		if err != nil {
			return errors.Errorf("mcp: connect: %w", err)
		}
	} else {
		nc, err = nats.Connect(*natsURL, nats.Name("settle-mcp"), nats.MaxReconnects(-1))
		if err != nil {
			return errors.Errorf("mcp: connect: %w", err)
		}
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return errors.Errorf("mcp: %w", err)
	}
	sc := storeConfig(*natsURL, dur, *replicas, *groupCommit)
	if dd != nil {
		if _, err := guardLog(ctx, js, sc.Stream, dd, false, logger); err != nil { // watermark.go
			return errors.Errorf("mcp: %w", err)
		}
	}
	store, err := openStore(ctx, js, sc, logger)
	if err != nil {
		return errors.Errorf("mcp: %w", err)
	}
	host, _ := os.Hostname()
	pc := producer.DefaultConfig()
	pc.Actor = "settle-mcp@" + host
	prod, err := producer.New(store, pc, routes...)
	if err != nil {
		return errors.Errorf("mcp: %w", err)
	}
	viewsDir := *data
	if viewsDir == "" {
		if viewsDir, err = os.MkdirTemp("", "settle-mcp-views-"); err != nil {
			return errors.Errorf("mcp: %w", err)
		}
		defer os.RemoveAll(viewsDir)
	}
	pjc := projector.DefaultConfig()
	pjc.DBPath = filepath.Join(viewsDir, "views.db")
	pjc.Logger = logger
	proj, err := openViews(ctx, js, pjc, logger, false)
	if err != nil {
		return errors.Errorf("mcp: %w", err)
	}
	defer proj.Close()

	wctx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopWorkers()
	for k := 0; k < *workers; k++ {
		rc := reconcile.DefaultConfig()
		rc.Worker = host + "-" + strconv.Itoa(os.Getpid()) + "-mcp" + strconv.Itoa(k)
		rc.Logger = logger
		rec, err := reconcile.NewReconciler(store, rc, routes...)
		if err != nil {
			return errors.Errorf("mcp: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rec.Run(wctx); err != nil {
				logger.Error("reconciler stopped", "err", err)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := proj.Run(wctx); err != nil && !errors.Is(err, projector.ErrClosed) {
			logger.Error("projector stopped", "err", err)
		}
	}()

	svc, err := newService(prod, proj, time.Now)
	if err != nil {
		return errors.Errorf("mcp: %w", err)
	}
	cfg := mcp.DefaultConfig()
	cfg.Service, cfg.Routes, cfg.Logger, cfg.Version = svc, routes, logger, version
	cfg.KeyIncludesPayload, cfg.MaxWait = *keyPayload, *maxWait
	cfg.Secrets = mcpSecrets(*routesPath, nil, logger)
	srv, err := mcp.New(cfg)
	if err != nil {
		return errors.Errorf("mcp: %w", err)
	}
	logger.Info("settle mcp: serving on stdio", "routes", len(routes), "workers", *workers, "caller", caller.Name, "scopes", caller.Scopes)
	err = srv.RunStdio(ctx, caller, in, out)
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
