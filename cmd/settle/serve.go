package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/consumers"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
)

// tokenFile is the --tokens file: names, scopes and limits in JSON; the
// secrets themselves come from environment variables, never from the file.
type tokenFile struct {
	Tokens []struct {
		Name      string   `json:"name"`
		SecretEnv string   `json:"secret_env"`
		Scopes    []string `json:"scopes"`
		Routes    []string `json:"routes,omitempty"`
		Accounts  []string `json:"accounts,omitempty"`
	} `json:"tokens"`
}

func loadTokens(path string) ([]api.Token, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--tokens: %w", err)
	}
	toks, err := parseTokens(b, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("--tokens %s: %w", path, err)
	}
	return toks, nil
}

// parseTokens reads a token file; errors name the entry and field and
// never hold a secret.
func parseTokens(b []byte, env func(string) (string, bool)) ([]api.Token, error) {
	var tf tokenFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tf); err != nil {
		return nil, fmt.Errorf("not a token file: %w", err)
	}
	if len(tf.Tokens) == 0 {
		return nil, errors.New("tokens: at least one token is required")
	}
	var out []api.Token
	for i, t := range tf.Tokens {
		if t.SecretEnv == "" {
			return nil, fmt.Errorf("tokens[%d].secret_env: is required (secrets come from the environment)", i)
		}
		secret, ok := env(t.SecretEnv)
		if !ok || secret == "" {
			return nil, fmt.Errorf("tokens[%d].secret_env: environment variable %q is not set", i, t.SecretEnv)
		}
		out = append(out, api.Token{Name: t.Name, Secret: secret, Scopes: t.Scopes, Routes: t.Routes, Accounts: t.Accounts})
	}
	return out, nil
}

// serve runs, in one process, the embedded nats-server (or a connection to
// --nats-url), the producer behind the HTTP API, reconcilers, the
// projector and metrics. SIGTERM: the HTTP server stops taking requests
// and lets the in-flight ones finish (each write ends with its outcome on
// the log, or stays write_started and becomes unknown at its deadline),
// then the workers stop, then NATS.
func (m *Main) serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "listen on `HOST:PORT`")
	data := fs.String("data", "settle-data", "data `DIR` (JetStream store and the SQLite views)")
	routesPath := fs.String("routes", "", "route file (YAML), required; see examples/routes")
	dev := fs.Bool("dev", false, "development mode: no tokens, loopback only")
	natsURL := fs.String("nats-url", "", "connect to this NATS server or cluster instead of the embedded one")
	durability := fs.String("durability", "always", "embedded server fsync: always | default")
	tokensPath := fs.String("tokens", "", "token file (JSON; secrets from environment variables)")
	workers := fs.Int("workers", 2, "reconciler workers in this process")
	replicas := fs.Int("replicas", 1, "stream replicas (3 on a cluster)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *routesPath == "" {
		fmt.Fprintln(m.Stderr, "settle serve: --routes FILE is required")
		return errUsage
	}
	if *workers < 1 || *workers > 64 {
		return fmt.Errorf("serve: --workers: %d is outside 1..64", *workers)
	}
	dur, err := embedded.ParseDurability(*durability)
	if err != nil {
		return fmt.Errorf("serve: --durability: %w", err)
	}
	if *dev {
		if err := api.CheckDevAddr(*addr); err != nil {
			return fmt.Errorf("serve: --dev: %w", err)
		}
	}
	var tokens []api.Token
	if *tokensPath != "" {
		if tokens, err = loadTokens(*tokensPath); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	} else if !*dev {
		return errors.New("serve: --tokens FILE is required unless --dev")
	}
	logger := slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	routes, err := httproute.Load(*routesPath, os.LookupEnv)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if err := os.MkdirAll(*data, 0o755); err != nil {
		return fmt.Errorf("serve: --data: %w", err)
	}

	var nc *nats.Conn
	var srv *embedded.Server
	if *natsURL == "" {
		srv, err = embedded.Start(embedded.Config{Dir: filepath.Join(*data, "jetstream"), Durability: dur, Port: -1})
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer srv.Stop()
		nc, err = srv.Connect()
	} else {
		nc, err = nats.Connect(*natsURL, nats.Name("settle"), nats.MaxReconnects(-1))
	}
	if err != nil {
		return fmt.Errorf("serve: connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	sc := producer.DefaultStoreConfig()
	sc.Replicas = *replicas
	store, err := producer.OpenStore(ctx, js, sc)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	metrics := api.NewMetrics()
	host, _ := os.Hostname()
	pc := producer.DefaultConfig()
	pc.Actor = "settle-api@" + host
	pc.OnCall = func(route string, outcome events.Type) { metrics.CountCall(route, api.OutcomeLabel(outcome)) }
	prod, err := producer.New(store, pc, routes...)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	pjc := projector.DefaultConfig()
	pjc.DBPath = filepath.Join(*data, "views.db")
	pjc.Logger = logger
	proj, err := projector.Open(ctx, js, pjc)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer proj.Close()

	// Workers live on their own context: they stop after the HTTP server
	// has let its in-flight writes finish.
	wctx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	var wg sync.WaitGroup
	for k := 0; k < *workers; k++ {
		rc := consumers.DefaultConfig()
		rc.Worker = host + "-" + strconv.Itoa(os.Getpid()) + "-w" + strconv.Itoa(k)
		rc.Logger = logger
		rc.OnStep = func(route, id string, res consumers.StepResult) {
			if res.Since != nil && api.Settled(res.State) {
				metrics.ObserveReconcile(time.Since(res.Since.StartedAt))
			}
		}
		rec, err := consumers.NewReconciler(store, rc, routes...)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
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

	acfg := api.DefaultConfig()
	acfg.Producer, acfg.Projector, acfg.Tokens, acfg.Dev, acfg.Addr = prod, proj, tokens, *dev, *addr
	acfg.Logger, acfg.Metrics = logger, metrics
	handler, err := api.New(acfg)
	if err != nil {
		stopWorkers()
		wg.Wait()
		return fmt.Errorf("serve: %w", err)
	}
	withMCP, err := mountMCP(handler, prod, proj, routes, *routesPath, tokens, logger)
	if err != nil {
		stopWorkers()
		wg.Wait()
		return fmt.Errorf("serve: %w", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		stopWorkers()
		wg.Wait()
		return fmt.Errorf("serve: listen: %w", err)
	}
	hs := &http.Server{Handler: withMCP, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	where := "embedded nats-server in " + filepath.Join(*data, "jetstream") + " (fsync " + string(dur) + ")"
	if *natsURL != "" {
		where = "NATS at " + redactURL(*natsURL)
	}
	fmt.Fprintf(m.Stdout, "settle serving http://%s (%s; %d route(s), %d worker(s)%s)\n", ln.Addr(), where, len(routes), *workers, map[bool]string{true: ", dev mode", false: ""}[*dev])

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	logger.Info("shutting down: finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	stopWorkers()
	wg.Wait()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	logger.Info("stopped")
	return nil
}

// redactURL drops credentials from a URL before it is printed.
func redactURL(s string) string {
	if i := strings.Index(s, "@"); i >= 0 {
		if j := strings.Index(s, "://"); j >= 0 && j < i {
			return s[:j+3] + "…" + s[i:]
		}
	}
	return s
}
