package servicetest

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/consumers/reconcile"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/service"
	"github.com/settle-dev/settle/testharness"
)

// T0 is the manual clock's start.
var T0 = time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)

// RouteSecret is the fake social API's bearer token: the routes'
// credential, which no answer may show.
const RouteSecret = "route_secret_4c9e2a7f1b8d3e6c5a0f"

// Options shape an Env.
type Options struct {
	// Routes builds the routes over the fake API (default ExampleRoutes).
	Routes func(t testing.TB, api *fakeapi.SocialAPI) []adapter.Route
	// Actor names the producer on its events (default "test-writer").
	Actor string
	// OnCall is the producer's (metrics).
	OnCall func(route string, outcome events.Type)
}

// Env is a service over real parts, until the test ends. Every
// component logs into Logs.
type Env struct {
	T      testing.TB
	Ctx    context.Context
	Node   *testharness.Node
	Clock  *testharness.ManualClock
	Social *fakeapi.SocialAPI
	Routes []adapter.Route
	Store  *ledger.Store
	Prod   *producer.Producer
	Proj   *projector.Projector
	Svc    *service.Service
	Logs   *testharness.SyncBuffer
	Logger *slog.Logger
}

// New starts an Env. Every route gets a clock skew of one second.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logs := &testharness.SyncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n := testharness.StartNode(t)
	clock := testharness.NewManualClock(T0)
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(clock.Now), fakeapi.WithSocialToken(RouteSecret))
	if o.Routes == nil {
		o.Routes = ExampleRoutes
	}
	routes := o.Routes(t, api)
	for i := range routes {
		routes[i].Policy.ClockSkew = events.Duration(time.Second)
	}
	store, err := ledger.OpenStore(ctx, n.JS, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	pc := producer.DefaultConfig()
	pc.Now, pc.Actor, pc.OnCall = clock.Now, "test-writer", o.OnCall
	if o.Actor != "" {
		pc.Actor = o.Actor
	}
	prod, err := producer.New(store, pc, routes...)
	if err != nil {
		t.Fatal(err)
	}
	proj, err := projector.Open(ctx, n.JS, projector.Config{DBPath: filepath.Join(t.TempDir(), "views.db"), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	projDone := make(chan struct{})
	go func() { defer close(projDone); _ = proj.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-projDone; proj.Close() })
	sc := service.DefaultConfig()
	sc.Intents, sc.Views, sc.Now = prod, proj, clock.Now
	svc, err := service.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{T: t, Ctx: ctx, Node: n, Clock: clock, Social: api, Routes: routes, Store: store, Prod: prod,
		Proj: proj, Svc: svc, Logs: logs, Logger: logger}
}

// ExampleRoutes are the example route file examples/routes/social.yaml
// compiled against the fake API with the token RouteSecret (route
// social_post), and the same route under first-write approval
// (social_approval).
func ExampleRoutes(t testing.TB, api *fakeapi.SocialAPI) []adapter.Route {
	t.Helper()
	post := testharness.ExampleRoute(t, "social.yaml", testharness.At{Addr: api.URL(), Secret: RouteSecret})
	approval := post
	approval.Name = "social_approval"
	approval.Policy.FirstWrite = events.PolicyApproval
	return []adapter.Route{post, approval}
}

// SocialRoutes are three routes compiled from examples/routes/social.yaml
// against the fake API: social_post, social_other, and social_approval
// (first write approved).
func SocialRoutes(t testing.TB, api *fakeapi.SocialAPI) []adapter.Route {
	t.Helper()
	post := testharness.ExampleRoute(t, "social.yaml", api)
	other, approval := post, post
	other.Name = "social_other"
	approval.Name = "social_approval"
	approval.Policy.FirstWrite = events.PolicyApproval
	return []adapter.Route{post, other, approval}
}

// Reconciler returns a reconciler over every route on the env's clock.
func (e *Env) Reconciler(name string) *reconcile.Reconciler {
	e.T.Helper()
	cfg := reconcile.DefaultConfig()
	cfg.Worker = name
	cfg.Now = e.Clock.Now
	cfg.Recheck = time.Minute
	cfg.MaxRecheck = 8 * time.Minute
	cfg.MaxWait = 20 * time.Millisecond
	cfg.AckWait = 2 * time.Second
	cfg.Lease = 30 * time.Second
	cfg.Rand = rand.New(rand.NewPCG(7, 7))
	cfg.Logger = e.Logger
	r, err := reconcile.NewReconciler(e.Store, cfg, e.Routes...)
	if err != nil {
		e.T.Fatal(err)
	}
	return r
}

// RunReconciler runs a reconciler until the test ends.
func (e *Env) RunReconciler(name string) {
	e.T.Helper()
	r := e.Reconciler(name)
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	e.T.Cleanup(func() { cancel(); <-done })
}

// Settle steps an intent with a reconciler, moving the manual clock over
// every wait, until no reconciler has anything to do.
func (e *Env) Settle(route, intentID string) *fsm.Intent {
	e.T.Helper()
	r := e.Reconciler("stepper")
	for k := 0; k < 200; k++ {
		res, err := r.Step(context.Background(), route, intentID)
		if err != nil {
			e.T.Fatal(err)
		}
		if res.Done {
			return e.Intent(route, intentID)
		}
		if res.Wait > 0 {
			e.Clock.Advance(res.Wait)
		}
	}
	e.T.Fatalf("intent %s did not settle", intentID)
	return nil
}

// History reads an intent's events from the log.
func (e *Env) History(route, intentID string) []events.Event {
	e.T.Helper()
	h, err := e.Store.Load(context.Background(), route, intentID)
	if err != nil {
		e.T.Fatal(err)
	}
	return h.Events
}

// Intent reads an intent from the log and folds it.
func (e *Env) Intent(route, intentID string) *fsm.Intent {
	e.T.Helper()
	i, err := fsm.Fold(e.History(route, intentID))
	if err != nil {
		e.T.Fatal(err)
	}
	return i
}

// StreamLen is the number of events on the log.
func (e *Env) StreamLen() uint64 {
	e.T.Helper()
	info, err := e.Store.Stream().Info(context.Background())
	if err != nil {
		e.T.Fatal(err)
	}
	return info.State.Msgs
}

// CatchUp waits until the projector has applied everything on the log.
func (e *Env) CatchUp() {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Proj.CatchUp(ctx); err != nil {
		e.T.Fatal(err)
	}
}
