package node

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/consumers/reconcile"
	"github.com/settle-dev/settle/consumers/webhook"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
)

// The embedded server's limits.
const (
	// embeddedMaxMemory bounds JetStream's memory storage on the embedded
	// server: settle's stream is on file; only consumers' state (ordered
	// consumers are R1 in memory) counts.
	embeddedMaxMemory = 64 << 20
	// embeddedDuplicateWindow is the stream's Msg-Id window on the
	// embedded server: the server keeps every Msg-Id of the window in
	// memory, and a lost ack is retried within seconds (AppendAttempts ×
	// AppendTimeout); a duplicate outside it is refused by its CAS and
	// resolved by reading the log all the same.
	embeddedDuplicateWindow = 2 * time.Minute
)

// Node is one opened settle process (Open): its parts are ready, and Run
// runs their loops.
type Node struct {
	cfg     Config
	dd      *DataDir
	tmp     string                // a temporary data directory (Config.Data empty), removed by Close
	srv     *embedded.Restartable // nil with NATSURL
	nc      *nats.Conn
	js      jetstream.JetStream
	store   *ledger.Store
	prod    *producer.Producer
	proj    *projector.Projector
	recs    []*reconcile.Reconciler
	metrics *api.Metrics
	sup     *supervisor
	hold    map[string]string
	hook    *webhook.Deliverer // Config.Webhook's, or nil
	writer  string             // this process's writer id (newWriterID)

	ran     atomic.Bool // Run was called
	closers []func()
}

// Open checks cfg, takes the data directory, starts (or connects to)
// NATS, checks the log's format (another is refused: events.ErrLogFormat)
// and the log against what settle knew of it (the high-water
// mark and the views: a loss is refused unless AcceptLogLoss), and opens
// the store, the producer, the views and the reconcilers. Nothing runs
// yet and nothing is appended: the store refuses appends
// (ledger.ErrLogVerifying) until Run has read the whole log. On an error
// everything opened so far is closed again.
func Open(ctx context.Context, cfg Config) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, metrics: api.NewMetrics()}
	// Every route's external calls are measured (adapter.Do reports each
	// request of a context marked with adapter.Calling).
	n.cfg.Routes = slices.Clone(cfg.Routes)
	for k := range n.cfg.Routes {
		n.cfg.Routes[k].Observer = n.metrics
	}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if err := n.openDataDir(); err != nil {
		return nil, err
	}
	n.sup = newSupervisor(cfg.Logger, cfg.Now, cfg)
	if err := n.connect(); err != nil {
		return nil, err
	}
	sc := StoreConfig(cfg.NATSURL, cfg.Durability, cfg.Replicas, cfg.GroupCommit)
	if cfg.NATSURL == "" {
		// Memory: the embedded server keeps every Msg-Id of the window
		// (bounded by the append rate times the window, not by intents).
		sc.DuplicateWindow = embeddedDuplicateWindow
	}
	// Every append names this process (a second writer is then named).
	n.writer = newWriterID()
	sc.Writer = n.writer
	cfg.Logger.Info("settle starting", "command", cfg.Command, "writer", sc.Writer, "pid", os.Getpid(), "log", n.Where())
	// Before anything reads or writes the log: has it lost events?
	if n.hold, err = guardLog(ctx, logGuard{js: n.js, stream: sc.Stream, dd: n.dd, accept: cfg.AcceptLogLoss, single: cfg.NATSURL == "", logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if n.store, err = openStore(ctx, n.js, sc, cfg.Logger); err != nil {
		return nil, err
	}
	// Nothing is written until the whole log was read (verify.go).
	n.store.Block("verify", ledger.ErrLogVerifying)
	n.sup.store = n.store
	if err := n.openProducer(); err != nil {
		return nil, err
	}
	if err := n.openViews(ctx); err != nil {
		return nil, err
	}
	if err := n.openWebhook(ctx); err != nil {
		return nil, err
	}
	return n, n.openReconcilers()
}

// openDataDir locks the data directory (a temporary one when Data is
// empty) and checks --min-free-mb against its file system.
func (n *Node) openDataDir() error {
	dir := n.cfg.Data
	if dir == "" {
		tmp, err := os.MkdirTemp("", "settle-node-")
		if err != nil {
			return errors.Errorf("data directory: %w", err)
		}
		n.tmp, dir = tmp, tmp
	}
	dd, err := LockDataDir(dir, n.cfg.Command, true)
	if err != nil {
		return err
	}
	n.dd = dd
	if err := PrivateViews(dd.Views()); err != nil {
		return err
	}
	if n.cfg.NATSURL == "" {
		return checkMinFree(dd.Path(), n.cfg.MinFreeMB, n.cfg.Logger)
	}
	return nil
}

// connect starts the embedded server in the data directory (its own
// errors and warnings in settle's log, a full disk watched) or connects
// to NATSURL.
func (n *Node) connect() error {
	var err error
	if n.cfg.NATSURL != "" {
		n.nc, err = nats.Connect(n.cfg.NATSURL, nats.Name(n.cfg.Actor), nats.MaxReconnects(-1))
		if err != nil {
			return errors.Errorf("connect: %w", err)
		}
	} else {
		ecfg := embedded.Config{Dir: n.dd.Store(), Durability: n.cfg.Durability, Port: -1,
			Logger: n.cfg.Logger, Watch: n.sup.watchServerLog, MaxMemory: embeddedMaxMemory}
		var connect []nats.Option
		if l := n.cfg.Listen; l != nil {
			ecfg.Host, ecfg.Port = l.host, l.port
			ecfg.Users, ecfg.NoAuthUser = l.users(n.cfg.Routes)
			connect = append(connect, nats.UserInfo(ecfg.Users[0].Name, ecfg.Users[0].Password))
		}
		if n.srv, err = embedded.StartRestartable(ecfg); err != nil {
			return err
		}
		if n.nc, err = n.srv.Connect(connect...); err != nil {
			return errors.Errorf("connect: %w", err)
		}
	}
	n.js, err = jetstream.New(n.nc)
	return err
}

// openProducer makes the producer: metrics of its calls, the held
// intents of an accepted loss.
func (n *Node) openProducer() error {
	host, _ := os.Hostname()
	pc := producer.DefaultConfig()
	pc.Actor = n.cfg.Actor + "@" + host
	pc.Now, pc.Hold, pc.ClaimLease, pc.Logger = n.cfg.Now, n.hold, n.cfg.Lease, n.cfg.Logger
	var err error
	n.prod, err = producer.New(n.store, pc, n.cfg.Routes...)
	return err
}

// openReconcilers makes the Workers reconcilers (the first one sweeps).
func (n *Node) openReconcilers() error {
	host, _ := os.Hostname()
	for k := 0; k < n.cfg.Workers; k++ {
		rc := reconcile.DefaultConfig()
		// Unique among running workers, as leases and claims need: the
		// writer id holds the pid and a random part (two containers of
		// one image often run as pid 1 under one host name).
		rc.Worker = host + "-" + n.writer + "-w" + strconv.Itoa(k)
		rc.Logger = n.cfg.Logger
		// CacheMB is the process's: its workers share it.
		rc.Now, rc.Hold, rc.Lease, rc.CacheBytes, rc.Steps = n.cfg.Now, n.hold, n.cfg.Lease, max(1<<20, n.cfg.CacheMB<<20/n.cfg.Workers), n.cfg.Steps
		rc.Sweep = k == 0 // one sweep per process (consumers/reconcile/sweep.go)
		rc.OnStep = stepMetrics(n.store, n.metrics)
		rec, err := reconcile.NewReconciler(n.store, rc, n.cfg.Routes...)
		if err != nil {
			return err
		}
		n.recs = append(n.recs, rec)
	}
	return nil
}

// Run runs the node's loops until ctx ends: the reading of the whole log
// (then appends are allowed and the reconcilers start), the high-water
// mark, the clock guard, the disk watch, the projector and the
// reconcilers, each restarted when it fails or stalls and reported by
// ReadyChecks meanwhile. When ctx ends it stops them, lets the views
// catch up with the log (so that a loss found at the next start is named
// in full) and returns. Run runs once.
func (n *Node) Run(ctx context.Context) error {
	if !n.ran.CompareAndSwap(false, true) {
		return errors.New("node: Run was called twice")
	}
	var wg sync.WaitGroup
	n.sup.start(ctx, &wg, supervised{js: n.js, store: n.store, proj: n.proj, srv: n.srv, dd: n.dd,
		routes: n.cfg.Routes, metrics: n.metrics, recs: n.recs})
	if n.hook != nil {
		// Settlements to Config.Webhook: Run makes its consumer again
		// while it cannot and returns only when ctx ends.
		wg.Go(func() { _ = n.hook.Run(ctx) })
	}
	wg.Wait()
	// The views catch up with the log before the process ends: after a
	// clean stop they know every event, so a loss found at the next start
	// is named in full (intents and versions), not only by sequence.
	cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := n.proj.CatchUp(cctx); err != nil {
		n.cfg.Logger.Warn("stopping: the views did not catch up with the log; a later loss may be named by sequence only", "err", err)
	}
	return nil
}

// Close closes what Open opened: the routes' adapters (the processes of
// their upstream MCP servers), the views, the NATS connection, the
// embedded server, the data directory's lock (and a temporary data
// directory). Call it after Run returned.
func (n *Node) Close() {
	closeAdapters(n.cfg.Routes)
	if n.proj != nil {
		_ = n.proj.Close()
	}
	if n.nc != nil {
		n.nc.Close()
	}
	if n.srv != nil {
		n.srv.Stop()
	}
	n.dd.Unlock()
	if n.tmp != "" {
		_ = os.RemoveAll(n.tmp)
	}
}

// Producer is the node's producer (submits and operator actions).
func (n *Node) Producer() *producer.Producer { return n.prod }

// Projector is the node's views.
func (n *Node) Projector() *projector.Projector { return n.proj }

// Store is the node's log.
func (n *Node) Store() *ledger.Store { return n.store }

// Metrics is the registry the node's parts feed (the API serves it).
func (n *Node) Metrics() *api.Metrics { return n.metrics }

// Routes are the node's routes.
func (n *Node) Routes() []adapter.Route { return n.cfg.Routes }

// ReadyChecks are the node's parts' health, each under its name
// (/readyz).
func (n *Node) ReadyChecks() []api.ReadyCheck {
	return append(n.sup.readyChecks(), upstreamChecks(n.cfg.Routes)...)
}

// Ready runs every ReadyCheck and returns the first failure, named.
func (n *Node) Ready(ctx context.Context) error {
	for _, c := range n.ReadyChecks() {
		if err := c.Check(ctx); err != nil {
			return errors.Wrapf(err, "%s", c.Name)
		}
	}
	return nil
}

// Where says where the log is: the embedded server's store and fsync,
// or the NATS URL (without credentials).
func (n *Node) Where() string {
	if n.cfg.NATSURL != "" {
		return "NATS at " + RedactURL(n.cfg.NATSURL)
	}
	return "embedded nats-server in " + n.dd.Store() + " (fsync " + string(n.cfg.Durability) + ")"
}

// ReaderURL is where downstream readers reach the embedded server
// (Config.Listen), "" without.
func (n *Node) ReaderURL() string {
	if n.cfg.Listen == nil || n.srv == nil {
		return ""
	}
	return n.srv.ClientURL()
}

// Logger is the node's logger.
func (n *Node) Logger() *slog.Logger { return n.cfg.Logger }

// Now is the node's clock.
func (n *Node) Now() func() time.Time { return n.cfg.Now }

// Started waits until Run has read the whole log and appends are allowed
// (the reconcilers start then). It returns the log's damage instead when
// reading found a loss, or ctx's error.
func (n *Node) Started(ctx context.Context) error {
	for {
		select {
		case <-n.sup.verified:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if err := n.store.Blocked(); errors.Is(err, ledger.ErrLogDamaged) {
			return err
		}
	}
}
