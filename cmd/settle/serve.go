package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/consumers/reconcile"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/internal/errkind"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
)

// tokenFile is the --tokens file: names, tenant, scopes and limits in
// JSON; the secrets themselves come from environment variables, never from
// the file.
type tokenFile struct {
	Tokens []struct {
		Name      string   `json:"name"`
		SecretEnv string   `json:"secret_env"`
		Tenant    string   `json:"tenant,omitempty"`
		Scopes    []string `json:"scopes"`
		Routes    []string `json:"routes,omitempty"`
		Accounts  []string `json:"accounts,omitempty"`
	} `json:"tokens"`
}

// loadTokens reads and checks the token file: every error names the
// file's own fields (tokens[1].secret_env) and is reported before
// anything starts. routes are the configured route names (limits must
// name one of them).
func loadTokens(path string, routes []string) ([]api.Token, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Errorf("--tokens: %w", err)
	}
	toks, err := parseTokens(b, os.LookupEnv, routes)
	if err != nil {
		return nil, errors.Errorf("--tokens %s: %w", path, err)
	}
	return toks, nil
}

// parseTokens reads a token file; errors name the entry and field as the
// file spells them, and never hold a secret.
func parseTokens(b []byte, env func(string) (string, bool), routes []string) ([]api.Token, error) {
	var tf tokenFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tf); err != nil {
		return nil, errors.Errorf("not a token file: %w", err)
	}
	if len(tf.Tokens) == 0 {
		return nil, errors.New("tokens: at least one token is required")
	}
	var out []api.Token
	for i, t := range tf.Tokens {
		if t.SecretEnv == "" {
			return nil, errors.Errorf("tokens[%d].secret_env: is required (secrets come from the environment)", i)
		}
		secret, ok := env(t.SecretEnv)
		if !ok || secret == "" {
			return nil, errors.Errorf("tokens[%d].secret_env: environment variable %q is not set", i, t.SecretEnv)
		}
		out = append(out, api.Token{Name: t.Name, Secret: secret, Tenant: t.Tenant, Scopes: t.Scopes, Routes: t.Routes, Accounts: t.Accounts})
	}
	if err := api.ValidateTokens(out, routes); err != nil {
		var te *api.TokenError
		if !errors.As(err, &te) {
			return nil, err
		}
		return nil, errors.Errorf("tokens[%d].%s: %s", te.Index, fileField(te.Field, tf.Tokens[te.Index].SecretEnv), secretReason(te, tf.Tokens[te.Index].SecretEnv))
	}
	return out, nil
}

// fileField maps api.Token's field names to the token file's.
func fileField(goField, secretEnv string) string {
	name, idx, _ := strings.Cut(goField, "[")
	if idx != "" {
		idx = "[" + idx
	}
	switch name {
	case "Secret":
		return "secret_env"
	case "Name":
		return "name" + idx
	}
	return strings.ToLower(name) + idx
}

// secretReason says which variable holds the bad secret.
func secretReason(te *api.TokenError, secretEnv string) string {
	if te.Field == "Secret" {
		return fmt.Sprintf("the secret in $%s %s", secretEnv, te.Reason)
	}
	return te.Reason
}

// serveFlags are serve's options.
type serveFlags struct {
	addr, data, routes, natsURL, durability, tokens string
	groupCommit                                     string
	natsListen, natsPasswordEnv                     string
	dev                                             bool
	workers, replicas                               int
	readTimeout, idleTimeout                        time.Duration
	faults                                          faultFlags // supervise_flags.go
}

// serve runs, in one process, the embedded nats-server (or a connection to
// --nats-url), the producer behind the HTTP API, reconcilers, the
// projector and metrics. Everything that can be checked is checked before
// anything starts; then the data directory is locked for the process's
// life. SIGTERM: the HTTP server stops taking requests and lets the
// in-flight ones finish (each write ends with its outcome on the log, or
// stays write_started and becomes unknown at its deadline), then the
// workers stop, then NATS.
func (m *Main) serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	var f serveFlags
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen on `HOST:PORT`")
	fs.StringVar(&f.data, "data", "settle-data", "data `DIR` (JetStream store, SQLite views, lock); one process owns it")
	fs.StringVar(&f.routes, "routes", "", "route file (YAML), required; see examples/routes")
	fs.BoolVar(&f.dev, "dev", false, "development mode: no tokens, loopback only")
	fs.StringVar(&f.natsURL, "nats-url", "", "connect to this NATS server or cluster instead of the embedded one")
	fs.StringVar(&f.natsListen, "nats-listen", "", "let downstream readers reach the embedded server at `ADDR` (PORT or HOST:PORT; loopback when no host is given)")
	fs.StringVar(&f.natsPasswordEnv, "nats-password-env", "SETTLE_NATS_PASSWORD", "environment `VARIABLE` with the password of the NATS user \""+natsReaderUser+"\" (required off loopback)")
	fs.StringVar(&f.durability, "durability", "always", "embedded server fsync: always | default")
	fs.StringVar(&f.groupCommit, "group-commit", groupCommitAuto, "appends of concurrent callers in atomic batches: auto (off on an embedded server that does not fsync every write, measured otherwise) | measured (batches or lone publishes by what each has cost) | off (every append alone)")
	fs.StringVar(&f.tokens, "tokens", "", "token file (JSON; secrets from environment variables)")
	fs.IntVar(&f.workers, "workers", 2, "reconciler workers in this process")
	fs.IntVar(&f.replicas, "replicas", 1, "stream replicas (3 on a cluster)")
	fs.DurationVar(&f.readTimeout, "read-timeout", api.DefaultConfig().ReadTimeout, "a request, body included, must arrive within this `duration`")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", api.DefaultConfig().IdleTimeout, "close kept-alive connections idle this `duration`")
	f.faults.register(fs)
	wh := registerWebhook(fs) // webhook.go
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(m.Stderr, "settle serve: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	if f.routes == "" {
		fmt.Fprintln(m.Stderr, "settle serve: --routes FILE is required")
		return errUsage
	}
	if f.workers < 1 || f.workers > 64 {
		return errors.Errorf("serve: --workers: %d is outside 1..64", f.workers)
	}
	if f.readTimeout <= 0 || f.idleTimeout <= 0 {
		return errors.New("serve: --read-timeout and --idle-timeout must be positive")
	}
	if err := f.faults.validate(); err != nil {
		return errors.Errorf("serve: %w", err)
	}
	if err := wh.check(os.LookupEnv); err != nil {
		return errors.Errorf("serve: %w", err)
	}
	dur, err := embedded.ParseDurability(f.durability)
	if err != nil {
		return errors.Errorf("serve: --durability: %w", err)
	}
	if err := checkGroupCommit(f.groupCommit); err != nil {
		return errors.Errorf("serve: --group-commit: %w", err)
	}
	if f.dev {
		if err := api.CheckDevAddr(f.addr); err != nil {
			return errors.Errorf("serve: --dev: %w", err)
		}
	}
	if f.tokens == "" && !f.dev {
		return errors.New("serve: --tokens FILE is required unless --dev")
	}
	var listen *natsListener
	if f.natsListen != "" {
		if f.natsURL != "" {
			return errors.New("serve: --nats-listen exposes the embedded server; with --nats-url readers connect to that server")
		}
		if listen, err = parseNATSListen(f.natsListen, f.natsPasswordEnv, os.LookupEnv); err != nil {
			return errors.Errorf("serve: %w", err)
		}
	}
	routes, err := httproute.Load(f.routes, os.LookupEnv)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	routeNames := make([]string, len(routes))
	for i, r := range routes {
		routeNames[i] = r.Name
	}
	var tokens []api.Token
	if f.tokens != "" {
		if tokens, err = loadTokens(f.tokens, routeNames); err != nil {
			return errors.Errorf("serve: %w", err)
		}
	}

	// From here on the data directory is this process's.
	dd, err := lockDataDir(f.data, "settle serve", true)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	defer dd.Unlock()
	if err := privateViews(dd.Views()); err != nil {
		return errors.Errorf("serve: %w", err)
	}
	logger := newLogger(m.Stderr)
	now, err := processClock(logger)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	sup := newSupervisor(logger, now)

	var nc *nats.Conn
	var srv *embedded.Restartable
	if f.natsURL == "" {
		// The server's own errors (a store it cannot write, a damaged
		// block, a full disk) reach settle's log; a full disk is watched.
		ecfg := embedded.Config{Dir: dd.Store(), Durability: dur, Port: -1, Logger: logger, Watch: sup.watchServerLog}
		var connect []nats.Option
		if listen != nil {
			ecfg.Host, ecfg.Port = listen.host, listen.port
			var internal embedded.User
			ecfg.Users, ecfg.NoAuthUser, internal, err = listen.users()
			if err != nil {
				return errors.Errorf("serve: %w", err)
			}
			connect = append(connect, nats.UserInfo(internal.Name, internal.Password))
		}
		srv, err = embedded.StartRestartable(ecfg)
		if err != nil {
			return errors.Errorf("serve: %w", err)
		}
		defer srv.Stop()
		nc, err = srv.Connect(connect...)
	} else {
		nc, err = nats.Connect(f.natsURL, nats.Name("settle"), nats.MaxReconnects(-1))
	}
	if err != nil {
		return errors.Errorf("serve: connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	sc := storeConfig(f.natsURL, dur, f.replicas, f.groupCommit)
	// Before anything reads or writes the log: has it lost events?
	hold, err := guardLog(ctx, js, sc.Stream, dd, f.faults.acceptLoss, logger)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	store, err := openStore(ctx, js, sc, logger)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	// Nothing is written until the whole log was read (verify.go).
	store.Block("verify", ledger.ErrLogVerifying)
	metrics := api.NewMetrics()
	host, _ := os.Hostname()
	pc := producer.DefaultConfig()
	pc.Actor = "settle-api@" + host
	pc.Now, pc.Hold, pc.ClaimLease = now, hold, f.faults.lease
	pc.OnCall = func(route string, outcome events.Type) { metrics.CountCall(route, api.OutcomeLabel(outcome)) }
	prod, err := producer.New(store, pc, routes...)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	pjc := projector.DefaultConfig()
	pjc.DBPath = dd.Views()
	pjc.Logger = logger
	proj, err := openViews(ctx, js, pjc, logger, f.faults.acceptLoss)
	if err != nil {
		return errors.Errorf("serve: %w", err)
	}
	defer proj.Close()

	// Workers live on their own context: they stop after the HTTP server
	// has let its in-flight writes finish.
	wctx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	var wg sync.WaitGroup
	for k := 0; k < f.workers; k++ {
		rc := reconcile.DefaultConfig()
		rc.Worker = host + "-" + strconv.Itoa(os.Getpid()) + "-w" + strconv.Itoa(k)
		rc.Logger = logger
		rc.Now, rc.Hold, rc.Lease, rc.CacheBytes, rc.Steps = now, hold, f.faults.lease, f.faults.cacheMB<<20, f.faults.steps
		rc.Sweep = k == 0 // one sweep per process (consumers/reconcile/sweep.go)
		rc.OnStep, rc.OnCall = stepMetrics(wctx, store, metrics), pc.OnCall
		rec, err := reconcile.NewReconciler(store, rc, routes...)
		if err != nil {
			return errors.Errorf("serve: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select { // the log is read whole first (verify.go)
			case <-sup.verified:
			case <-wctx.Done():
				return
			}
			if err := rec.Run(wctx); err != nil {
				logger.Error("reconciler stopped", "err", err)
			}
		}()
	}
	sup.store = store
	wg.Add(1)
	go func() {
		defer wg.Done()
		sup.runProjector(wctx, proj) // restarted after failures (supervise.go)
	}()
	sup.start(wctx, &wg, f.faults, supervised{js: js, store: store, proj: proj, srv: srv, dd: dd, routes: routes, metrics: metrics,
		consumers: consumerNames(routes)})
	wh.start(wctx, &wg, js, metrics, logger) // settlements to --webhook (webhook.go)

	svc, err := newService(prod, proj, now) // mcp.go
	if err != nil {
		stopWorkers()
		wg.Wait()
		return errors.Errorf("serve: %w", err)
	}
	acfg := api.DefaultConfig()
	acfg.Service, acfg.Log, acfg.Tokens, acfg.Dev, acfg.Addr = svc, store, tokens, f.dev, f.addr
	acfg.Logger, acfg.Metrics = logger, metrics
	acfg.ReadTimeout, acfg.IdleTimeout = f.readTimeout, f.idleTimeout
	acfg.Now, acfg.MaxInFlight, acfg.ReadyChecks = now, f.faults.maxInFlight, sup.readyChecks()
	handler, err := api.New(acfg)
	if err != nil {
		stopWorkers()
		wg.Wait()
		return errors.Errorf("serve: %w", err)
	}
	withMCP, err := mountMCP(handler, svc, routes, f.routes, tokens, logger)
	if err != nil {
		stopWorkers()
		wg.Wait()
		return errors.Errorf("serve: %w", err)
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		stopWorkers()
		wg.Wait()
		return errors.Errorf("serve: listen: %w", err)
	}
	hs := handler.HTTPServer()
	hs.Handler = withMCP
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	where := "embedded nats-server in " + dd.Store() + " (fsync " + string(dur) + ")"
	if f.natsURL != "" {
		where = "NATS at " + redactURL(f.natsURL)
	}
	fmt.Fprintf(m.Stdout, "settle serving http://%s (%s; %d route(s), %d worker(s)%s; pid %d)\n", ln.Addr(), where, len(routes), f.workers, map[bool]string{true: ", dev mode", false: ""}[f.dev], os.Getpid())
	if listen != nil {
		fmt.Fprintf(m.Stdout, "settle NATS for downstream readers: %s (user %s, %s; read-only: stream %s, subjects %s)\n",
			srv.ClientURL(), natsReaderUser, listen.authNote(), ledger.DefaultStoreConfig().Stream, events.AllSubjects)
	}

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
	// The views catch up with the log before the process ends: after a
	// clean stop they know every event, so a loss found at the next start
	// is named in full (intents and versions), not only by sequence.
	cctx, ccancel := context.WithTimeout(context.Background(), 15*time.Second)
	if err := proj.CatchUp(cctx); err != nil {
		logger.Warn("shutting down: the views did not catch up with the log; a later loss may be named by sequence only", "err", err)
	}
	ccancel()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return errors.Errorf("serve: %w", serveErr)
	}
	logger.Info("stopped")
	return nil
}

// stepMetrics feeds the write and settle latencies from the reconcilers'
// steps: a step that started a write and appended its outcome is one
// write; a step that settled an intent whose outcome had been unknown is
// one settlement (its latency read from the log's own times).
func stepMetrics(ctx context.Context, store *ledger.Store, metrics *api.Metrics) func(route, id string, res reconcile.StepResult) {
	return func(route, id string, res reconcile.StepResult) {
		started := false
		for _, t := range res.Appended {
			if t == events.WriteStarted {
				started = true
			}
			if started && api.IsOutcome(t) && res.Since != nil {
				metrics.ObserveWrite(route, api.OutcomeLabel(t), time.Since(res.Since.StartedAt))
			}
		}
		if !res.Done || res.Since == nil || (res.Since.Outcome != events.OutcomeUnknown && res.Since.N == 1) {
			return // not settled by this step, or an intent whose outcome was never unknown
		}
		switch res.State {
		case fsm.Confirmed, fsm.Failed, fsm.Abandoned, fsm.ManualAction:
		default:
			return // the step ended elsewhere
		}
		// Only the step that appended the settling event counts it (a step
		// may also end Done after losing a CAS to the worker that settled).
		switch res.Appended[len(res.Appended)-1] {
		case events.ReadbackPassed, events.WriteConfirmed, events.ReadbackFailed, events.ManualActionRequired,
			events.TargetFailed, events.Abandoned:
		default:
			return
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		h, err := store.Load(lctx, route, id)
		if err != nil {
			return // a metric is not worth a failed step
		}
		if d, result, ok := api.SettleLatency(h.Events); ok {
			metrics.ObserveSettle(route, string(result), d)
		}
	}
}

// openViews opens the projector's views. Views that do not match the
// stream (another schema version, a recreated stream) are derived data:
// they are moved aside and rebuilt from the log, with a log line naming
// the file kept.
func openViews(ctx context.Context, js jetstream.JetStream, cfg projector.Config, logger *slog.Logger, acceptLoss bool) (*projector.Projector, error) {
	p, err := projector.Open(ctx, js, cfg)
	if err == nil || !(errors.Is(err, projector.ErrSchema) || errors.Is(err, projector.ErrStreamMismatch)) {
		return p, err
	}
	if errors.Is(err, projector.ErrStreamMismatch) && !acceptLoss {
		// The views project another history than the stream holds: the
		// log was replaced or damaged. Never rebuilt silently.
		return nil, errors.WithHint(errkind.Wrap(ledger.ErrLogDamaged, err),
			"the stream is not the one the views were built from: restore it, or start with --accept-log-loss to rebuild the views from what it holds (the old views are kept aside)")
	}
	aside, merr := moveViewsAside(cfg.DBPath)
	if merr != nil {
		return nil, errors.WithHint(errors.WithSecondaryError(errors.Errorf("%w (and moving it aside failed: %v)", err, merr), merr),
			"stop settle, then run: settle views rebuild --data DIR")
	}
	logger.Warn("views do not match the stream: rebuilding them from the log", "reason", safeText(err), "old_views", aside)
	if err := privateViews(cfg.DBPath); err != nil {
		return nil, err
	}
	return projector.Open(ctx, js, cfg)
}

// moveViewsAside renames the views file (and SQLite's side files) to
// PATH.stale-<unix seconds> and returns that name.
func moveViewsAside(path string) (string, error) {
	aside := fmt.Sprintf("%s.stale-%d", path, time.Now().Unix())
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(path+suffix, aside+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return aside, nil
}

// redactURL drops credentials from a URL, or from each of a comma-separated
// list, before it is printed.
func redactURL(s string) string {
	urls := strings.Split(s, ",") // a cluster's list: every URL may hold the password
	for k, u := range urls {
		if i := strings.LastIndex(u, "@"); i >= 0 {
			if j := strings.Index(u, "://"); j >= 0 && j < i {
				urls[k] = u[:j+3] + "…" + u[i:]
			}
		}
	}
	return strings.Join(urls, ",")
}
