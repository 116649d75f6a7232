package reconcile

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/consumers/audit"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

var (
	simSeed    = flag.Uint64("sim.seed", 1, "seed of the seeded simulation")
	simIntents = flag.Int("sim.intents", 2000, "intents in the seeded simulation")
	simBound   = flag.Duration("sim.bound", 4*time.Minute, "liveness bound of a multi-worker run (not a speed assertion)")
	simBatch   = flag.Int("sim.batch", 2000, "intents per simulated world; a longer run is a series of worlds with seeds seed, seed+1, ...")
	simWorlds  = flag.Int("sim.parallel", 1, "simulated worlds run at once")
)

// The seeded simulation hunts double writes and false confirmations. Every
// intent draws a behaviour of the external system from the seed (response
// lost after commit, request lost, visibility delays up to past the
// window, the object deleted after the write, another author or parent, a
// look-alike that existed before the attempt, duplicates made by the API,
// 429 and 5xx bursts, malformed listings, probe errors, status
// processing / completed without id / not found, key retention expiring,
// a late original arriving after the retry, writers dying after the call
// or after recording) — over routes compiled from the example route
// files, and over the MCP submit tools and the real APIs' habits
// (simroutes_test.go); several workers with clocks skewed within the
// allowance step the intents, are killed at random steps and replaced,
// and sometimes race each other on one intent. Afterwards:
//
//   - external effects per intent ≤ 1 (counted by the fakes, per request);
//   - no intent confirmed by an external id it did not create;
//   - no intent rejected or abandoned that made an effect;
//   - no page probed for a route that declares no url check;
//   - every intent settled: confirmed, or a human's turn with a reason, or
//     a rejection or abandonment that is final;
//   - each behaviour ended in one of its allowed outcomes;
//   - the audit of the whole log passes.
//
// A failure prints the seed and the intent's history. Any seed and size:
//
//	go test ./consumers -run Simulation -v -args -sim.seed=N -sim.intents=M
//
// (make soak SEED=n INTENTS=n runs a long one).

const simSkew = 5 * time.Second

// outcome is an allowed end of a behaviour: a state and, for manual
// actions, the reason ("" = any).
type outcome struct {
	state  fsm.State
	reason events.ManualReason
}

func confirmedOnly() []outcome { return []outcome{{fsm.Confirmed, ""}} }

type behaviour struct {
	name   string
	route  string
	weight int
	// arm prepares the external system before the intent's write.
	arm func(s *sim, in *simIntent)
	// after runs once the writer returned.
	after func(s *sim, in *simIntent, res *producer.Result)
	want  []outcome
	// apiDuplicates: the API itself creates more than one object for one
	// request (not settle's doing; each request still counts once).
	apiDuplicates bool
	// noWrite: the writer dies before WriteStarted (the intent is only
	// recorded).
	noWrite bool
	// expires: the intent carries an ExpiresAt this close to its start.
	expires time.Duration
}

var behaviours = []behaviour{
	// search route, author-filtered listing, no idempotency key
	{name: "ok", route: "post", weight: 8, want: confirmedOnly()},
	{name: "response_lost_after_commit", route: "post", weight: 8, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.post.NextFor(in.id, fakeapi.CommitThenDrop()) }},
	{name: "request_lost", route: "post", weight: 5, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.post.NextFor(in.id, fakeapi.ResetBeforeCommit()) }},
	{name: "response_respelled", route: "post", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.post.NextFor(in.id, fakeapi.Respelled()) }},
	{name: "gateway_502_nothing_created", route: "post", weight: 3, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.post.NextFor(in.id, fakeapi.Status(502)) }},
	{name: "visible_late_inside_window", route: "post", weight: 4, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) {
			s.post.NextFor(in.id, fakeapi.VisibilityDelay(time.Duration(1+s.rng.IntN(25))*time.Minute).Dropped())
		}},
	{name: "removed_after_success", route: "post", weight: 3, want: []outcome{{fsm.ManualAction, events.ReasonWrittenUnverified}},
		after: func(s *sim, in *simIntent, res *producer.Result) {
			if res != nil && res.Intent != nil && res.Intent.ExternalID != "" {
				s.post.Remove(res.Intent.ExternalID)
			}
		}},
	{name: "lookalike_existed_request_lost", route: "post", weight: 3, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) {
			s.post.Inject(fakeapi.Post{AuthorID: in.account, Body: in.body, CreatedAt: s.clock.Now().Add(-20 * time.Second)})
			s.post.NextFor(in.id, fakeapi.ResetBeforeCommit())
		}},
	{name: "lookalike_existed_response_lost", route: "post", weight: 3, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) {
			s.post.Inject(fakeapi.Post{AuthorID: in.account, Body: in.body, CreatedAt: s.clock.Now().Add(-20 * time.Second)})
			s.post.NextFor(in.id, fakeapi.CommitThenDrop())
		}},
	{name: "api_duplicates", route: "post", weight: 2, apiDuplicates: true, want: []outcome{{fsm.ManualAction, events.ReasonDuplicateExactMatches}},
		arm: func(s *sim, in *simIntent) { s.post.NextFor(in.id, fakeapi.Duplicate().Dropped()) }},
	{name: "damaged_copy", route: "post", weight: 2, want: []outcome{{fsm.ManualAction, events.ReasonNearMatch}},
		arm: func(s *sim, in *simIntent) {
			in.assets = []string{strings.Repeat("ab", 32)}
			s.post.NextFor(in.id, fakeapi.MissingAsset().Dropped())
		}},
	{name: "throttled_then_ok", route: "post", weight: 4, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) {
			n := 1 + s.rng.IntN(3)
			for k := 0; k < n; k++ {
				s.post.NextFor(in.id, fakeapi.Status(429))
			}
		}},
	{name: "throttled_past_budget", route: "post", weight: 1, want: []outcome{{fsm.Rejected, ""}},
		arm: func(s *sim, in *simIntent) {
			for k := 0; k < 6; k++ {
				s.post.NextFor(in.id, fakeapi.Status(429))
			}
		}},
	{name: "throttled_until_expired", route: "post", weight: 1, expires: 200 * time.Millisecond,
		want: []outcome{{fsm.Abandoned, ""}, {fsm.Confirmed, ""}},
		arm:  func(s *sim, in *simIntent) { s.post.NextFor(in.id, fakeapi.Status(429)) }},
	{name: "definite_rejection", route: "post", weight: 1, want: []outcome{{fsm.Rejected, ""}},
		arm: func(s *sim, in *simIntent) { s.post.NextFor(in.id, fakeapi.Status(400)) }},
	{name: "writer_died_after_call", route: "post", weight: 3, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.dieAfterCall.Store(in.id, true) }},
	{name: "writer_died_after_recording", route: "post", weight: 2, noWrite: true, want: confirmedOnly()},
	{name: "read_errors_burst", route: "post", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) {
			f := make([]fakeapi.ReadFault, 1+s.rng.IntN(4))
			for k := range f {
				f[k] = fakeapi.ReadError500
			}
			s.post.FailLists(f...)
			s.post.NextFor(in.id, fakeapi.CommitThenDrop())
		}},
	{name: "malformed_listing", route: "post", weight: 1, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) {
			s.post.FailLists(fakeapi.ReadNoItems)
			s.post.NextFor(in.id, fakeapi.CommitThenDrop())
		}},
	{name: "probe_errors", route: "post", weight: 1, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) {
			s.post.FailPages(fakeapi.ReadError500, fakeapi.ReadReset)
			s.post.NextFor(in.id, fakeapi.CommitThenDrop())
		}},

	// search route whose API honours an idempotency key (24h)
	{name: "keyed_visible_after_window", route: "post_keyed", weight: 2,
		want: []outcome{{fsm.Confirmed, ""}, {fsm.ManualAction, events.ReasonWrittenUnverified}},
		arm: func(s *sim, in *simIntent) {
			s.keyed.NextFor(in.id, fakeapi.VisibilityDelay(time.Duration(40+s.rng.IntN(60))*time.Minute).Dropped())
		}},
	{name: "keyed_removed_after_lost_response", route: "post_keyed", weight: 2, want: []outcome{{fsm.ManualAction, events.ReasonWrittenUnverified}},
		arm: func(s *sim, in *simIntent) { s.keyed.NextFor(in.id, fakeapi.CommitThenDrop()) },
		after: func(s *sim, in *simIntent, _ *producer.Result) {
			for _, p := range s.keyed.Posts() {
				if strings.HasPrefix(p.AttemptID, in.id+".a") {
					s.keyed.Remove(p.ID)
				}
			}
		}},
	{name: "keyed_request_lost", route: "post_keyed", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.keyed.NextFor(in.id, fakeapi.ResetBeforeCommit()) }},

	// replies in threads, listed with every author (as a comment list is)
	{name: "reply_response_lost", route: "reply", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.thread.NextFor(in.id, fakeapi.CommitThenDrop()) }},
	{name: "reply_other_author", route: "reply", weight: 2, want: []outcome{{fsm.ManualAction, events.ReasonNearMatch}},
		arm: func(s *sim, in *simIntent) {
			s.thread.NextFor(in.id, fakeapi.WrongAuthor("u_token_owner").Dropped())
		}},
	{name: "reply_other_parent", route: "reply", weight: 2, want: []outcome{{fsm.ManualAction, events.ReasonNearMatch}},
		arm: func(s *sim, in *simIntent) { s.thread.NextFor(in.id, fakeapi.WrongParent("t_elsewhere").Dropped()) }},

	// status query + idempotency key (24h)
	{name: "booking_ok", route: "booking", weight: 4, want: confirmedOnly()},
	{name: "booking_response_lost", route: "booking", weight: 4, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.bk.NextFor(in.id, fakeapi.CommitThenDrop()) }},
	{name: "booking_request_lost", route: "booking", weight: 3, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.bk.NextFor(in.id, fakeapi.ResetBeforeCommit()) }},
	{name: "booking_late_original", route: "booking", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.bk.NextFor(in.id, fakeapi.HoldForLateArrival().Dropped()) }},
	{name: "booking_never_completes", route: "booking", weight: 1, want: []outcome{{fsm.ManualAction, events.ReasonProcessingDeadline}},
		arm: func(s *sim, in *simIntent) { s.bk.NextFor(in.id, fakeapi.NeverComplete()) }},
	{name: "booking_failed_definite", route: "booking", weight: 1, want: []outcome{{fsm.Rejected, ""}},
		arm: func(s *sim, in *simIntent) { s.bk.NextFor(in.id, fakeapi.FailDefinite(422, nil)) }},
	{name: "booking_failed_partial_lost", route: "booking", weight: 1, want: []outcome{{fsm.ManualAction, events.ReasonPartialEffects}},
		arm: func(s *sim, in *simIntent) {
			s.bk.NextFor(in.id, fakeapi.FailDefinite(500, []string{"seat held"}).Dropped())
		}},
	{name: "booking_throttled", route: "booking", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.bk.NextFor(in.id, fakeapi.Status(429), fakeapi.Status(429)) }},
	{name: "status_completed_without_id", route: "booking_noid", weight: 1, want: []outcome{{fsm.ManualAction, events.ReasonNoExternalID}},
		arm: func(s *sim, in *simIntent) { s.bk.NextFor(in.id, fakeapi.CommitThenDrop()) }},
	// a key remembered 2 minutes by an API whose status lags 3 minutes
	{name: "key_expired_request_lost", route: "booking_short", weight: 1, want: []outcome{{fsm.ManualAction, events.ReasonKeyRetentionExpired}},
		arm: func(s *sim, in *simIntent) { s.bkShort.NextFor(in.id, fakeapi.ResetBeforeCommit()) }},
	{name: "short_key_response_lost", route: "booking_short", weight: 1, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.bkShort.NextFor(in.id, fakeapi.CommitThenDrop()) }},
}

type simIntent struct {
	k         int
	id        string
	requestID string
	route     string
	account   string
	parent    string
	body      string
	assets    []string
	booking   string
	b         *behaviour
	// YAML routes: the tag every object of the intent carries; an agent's
	// intents (through MCP) have a task and a tenant of their own.
	yaml     bool
	tag      string
	task     string
	tenant   string
	submitAt time.Time
	dueAt    time.Time
	done     bool
	// steps: what each step of the intent ended with, as the world saw it
	// (printed when the intent ends outside its allowed outcomes).
	steps []string
}

// note records how one step of the intent ended.
func (in *simIntent) note(at time.Time, who, what string) {
	if len(in.steps) >= 64 {
		in.steps = append(in.steps[:32], in.steps[len(in.steps)-31:]...)
	}
	in.steps = append(in.steps, fmt.Sprintf("%s %s: %s", at.Format("15:04:05.000"), who, what))
}

func (in *simIntent) payload() json.RawMessage {
	if in.yaml {
		return yamlRoutes[in.route].payload(in)
	}
	if in.booking != "" {
		return json.RawMessage(fmt.Sprintf(`{"booking_id":%q,"expected_version":1,"change":{"seat":"%dA"}}`, in.booking, in.k%40))
	}
	p := map[string]any{"body": in.body}
	if in.assets != nil {
		p["assets"] = in.assets
	}
	b, _ := json.Marshal(p)
	return b
}

type simWorker struct {
	name   string
	offset time.Duration
	r      *Reconciler
}

type sim struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	clock *testharness.ManualClock
	node  *testharness.Node
	store *ledger.Store
	// batched is a second store on the same stream whose every flush goes
	// as an atomic batch (BatchMin 1: a new intent is one IntentStarted,
	// so a floor of two messages would leave a quiet world with no batch
	// at all); one writer uses it, so the group commit's batches (refused,
	// split, handed back, commits and acks lost) race the lone publishes
	// of the other writer on the same intents. grouped batches flushes of
	// two messages or more (the default's floor, forced): every other
	// worker appends through it.
	batched, grouped *ledger.Store
	batchFaults      *testharness.BatchFaults // batched's
	post             *fakeapi.SocialAPI
	keyed            *fakeapi.SocialAPI
	thread           *fakeapi.SocialAPI
	bk               *fakeapi.BookingAPI
	bkShort          *fakeapi.BookingAPI
	routes           []adapter.Route
	y                *yamlWorld
	writers          []*producer.Producer
	workers          []*simWorker
	born             int

	dieAfterCall sync.Map // intent id → true: its writer dies after the call
	killed       sync.Map // intent id → true: the crash happened once
	kills        int
	races        int
	doubles      int // requests executed by both writers at once
}

func (s *sim) skewed(offset time.Duration) func() time.Time {
	return func() time.Time { return s.clock.Now().Add(offset) }
}

func newSim(t *testing.T, seed uint64) *sim {
	s := &sim{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
	s.clock = testharness.NewManualClock(t0)
	// Durability is not what this test is about: skip the fsync per append.
	s.node = testharness.StartNode(t, embedded.SyncDefault)
	var err error
	s.store, err = ledger.OpenStore(context.Background(), s.node.JS, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	bc := ledger.DefaultStoreConfig()
	bc.BatchMin = 1
	s.batchFaults = testharness.NewBatchFaults(s.node.JS)
	if s.batched, err = ledger.OpenStore(context.Background(), s.batchFaults, bc); err != nil {
		t.Fatal(err)
	}
	bc.BatchMin = 2
	if s.grouped, err = ledger.OpenStore(context.Background(), s.node.JS, bc); err != nil {
		t.Fatal(err)
	}
	clockOpt := fakeapi.WithSocialClock(s.clock.Now)
	s.post = fakeapi.NewSocialAPI(t, clockOpt)
	s.keyed = fakeapi.NewSocialAPI(t, clockOpt, fakeapi.WithIdempotencyKeys())
	s.thread = fakeapi.NewSocialAPI(t, clockOpt, fakeapi.WithListAllAuthors())
	s.bk = fakeapi.NewBookingAPI(t, fakeapi.WithBookingClock(s.clock.Now), fakeapi.WithBookingReflectionDelay(5*time.Second))
	s.bkShort = fakeapi.NewBookingAPI(t, fakeapi.WithBookingClock(s.clock.Now), fakeapi.WithBookingReflectionDelay(3*time.Minute),
		fakeapi.WithBookingKeyRetention(2*time.Minute))
	client := &http.Client{Timeout: 5 * time.Second}
	pol := adapter.DefaultPolicy()
	pol.ClockSkew = events.Duration(simSkew)
	pol.RetentionMargin = events.Duration(10 * time.Second)
	route := func(name, file string, api testharness.Fake, edits ...string) adapter.Route {
		r := s.compile(name, s.exampleFile(file, edits...), testharness.FakeEnv(api), client)
		r.Policy = pol
		return r
	}
	mainBooking := route("booking", "booking.yaml", s.bk)
	s.routes = []adapter.Route{
		route("post", "social.yaml", s.post),
		route("post_keyed", "social.yaml", s.keyed, "      idempotency_key: false\n", "      idempotency_key: true\n      key_retention: 24h\n"),
		route("reply", "social.yaml", s.thread),
		mainBooking,
		{Name: "booking_noid", Adapter: noStatusID{capsOverride{mainBooking.Adapter, func(*adapter.Capabilities) {}}}, Policy: pol},
		route("booking_short", "booking.yaml", s.bkShort, "      key_retention: 24h\n      reflection_delay: 5s\n", "      key_retention: 2m\n      reflection_delay: 3m\n",
			"      retention_margin: 1h\n", "      retention_margin: 10s\n"),
	}
	yroutes := s.newYAMLWorld(client)
	s.routes = append(s.routes, yroutes...)
	// Two writers and four workers, clocks spread inside the allowance.
	for k, off := range []time.Duration{-simSkew / 2, simSkew / 3} {
		pc := producer.DefaultConfig()
		pc.Actor, pc.Now = fmt.Sprintf("writer-%d", k), s.skewed(off)
		pc.Logger = quietLogger()
		st := s.store
		if k == 1 {
			st = s.batched
		}
		p, err := producer.New(&dyingWriter{Store: st, dies: &s.dieAfterCall}, pc, s.routes...)
		if err != nil {
			t.Fatal(err)
		}
		s.writers = append(s.writers, p)
	}
	for k := 0; k < 4; k++ {
		s.workers = append(s.workers, s.newWorker())
	}
	s.startMCP(yroutes)
	return s
}

// newWorker starts a worker process: a new name (a restarted process is a
// new worker), an empty cache, a clock offset inside the allowance.
func (s *sim) newWorker() *simWorker {
	s.born++
	w := &simWorker{name: fmt.Sprintf("worker-%d", s.born), offset: time.Duration(s.rng.Int64N(int64(simSkew))) - simSkew/2}
	cfg := DefaultConfig()
	cfg.Worker, cfg.Now = w.name, s.skewed(w.offset)
	cfg.Rand = rand.New(rand.NewPCG(s.seed, uint64(s.born)))
	cfg.Logger = quietLogger()
	cfg.Recheck, cfg.MaxRecheck = 20*time.Second, 5*time.Minute
	r, err := NewReconciler(&dyingWriter{Store: s.storeFor(s.born), dies: &s.dieAfterCall}, cfg, s.routes...)
	if err != nil {
		s.t.Fatal(err)
	}
	w.r = r
	return w
}

// storeFor gives the k-th worker its store: odd ones batch.
func (s *sim) storeFor(k int) *ledger.Store {
	if k%2 == 1 {
		return s.grouped
	}
	return s.store
}

// pickBehaviour draws a behaviour by weight.
func (s *sim) pickBehaviour() *behaviour {
	total := 0
	for _, b := range allBehaviours {
		total += b.weight
	}
	n := s.rng.IntN(total)
	for k := range allBehaviours {
		if n < allBehaviours[k].weight {
			return &allBehaviours[k]
		}
		n -= allBehaviours[k].weight
	}
	return &allBehaviours[len(allBehaviours)-1]
}

// allBehaviours are those of the example routes and of the real APIs' routes.
var allBehaviours = append(append(append([]behaviour{}, behaviours...), routeBehaviours...), handoffBehaviours...)

func (s *sim) submit(in *simIntent) {
	t := s.t
	if in.b.arm != nil {
		in.b.arm(s, in)
	}
	if in.task != "" {
		// An agent's step, through the MCP server's submit tool; one in
		// four is sent twice at once (an agent retrying its own call).
		twice := s.rng.IntN(4) == 0
		if twice {
			s.doubles++
		}
		s.viaMCP(in, twice)
		if q := s.y.globalFaults[in.route]; q != nil {
			q.DropFaults()
		}
		if in.b.after != nil {
			in.b.after(s, in, nil)
		}
		return
	}
	if q := s.y.globalFaults[in.route]; q != nil {
		defer q.DropFaults() // what the write did not take reaches no other intent
	}
	req := producer.Request{Route: in.route, Account: in.account, RequestID: in.requestID, ParentExternalID: in.parent, Payload: in.payload()}
	if in.b.expires > 0 {
		req.ExpiresAt = s.clock.Now().Add(in.b.expires)
	}
	w := s.writers[s.rng.IntN(len(s.writers))]
	if in.b.noWrite {
		// The writer recorded the intent and died before WriteStarted.
		r, ok := w.Route(in.route)
		if !ok {
			t.Fatalf("route %s", in.route)
		}
		canon, err := r.Adapter.(adapter.PayloadNormalizer).NormalizePayload(req.Payload)
		if err != nil {
			t.Fatal(err)
		}
		sum, _ := events.PayloadSHA256(canon)
		caps := r.Adapter.Capabilities().Frozen()
		d := &events.IntentRecordedData{Tenant: "default", Route: in.route, Account: in.account, RequestID: in.requestID,
			IdempotencyKey: events.IdempotencyKey(in.id), ParentExternalID: in.parent, Payload: canon, PayloadSHA256: sum,
			Canon: events.CanonV1, PlannedAt: s.clock.Now().UTC(), Policy: r.Policy, Caps: &caps}
		h := &ledger.History{Route: in.route}
		if err := s.store.AppendNext(context.Background(), h, &fsm.Intent{State: fsm.None, ID: in.id}, "dead-writer", s.clock.Now(), "", d); err != nil {
			t.Fatal(err)
		}
		return
	}
	if s.rng.IntN(32) == 0 {
		// The batching store's next atomic batch loses its commit (the
		// batch never lands) or its ack (it landed, unknown to its
		// callers): every unit in it is handed back and settled alone.
		if s.rng.IntN(2) == 0 {
			s.batchFaults.DropCommits(1)
		} else {
			s.batchFaults.LoseAcks(1)
		}
	}
	var res *producer.Result
	var err error
	if s.rng.IntN(4) == 0 {
		// The caller sends its request twice at once (it retried its own
		// call to settle): both writers execute it, racing; one effect at
		// most, and the result that went further is the caller's.
		s.doubles++
		var wg sync.WaitGroup
		var rs [2]*producer.Result
		var errs [2]error
		for k, wk := range s.writers[:2] {
			wg.Add(1)
			go func() { defer wg.Done(); rs[k], errs[k] = wk.Execute(context.Background(), req) }()
		}
		wg.Wait()
		for k := range rs {
			if errs[k] != nil && !strings.Contains(errs[k].Error(), "simulated crash") {
				t.Fatalf("seed %d: execute %s (%s) twice at once, writer %d: %v", s.seed, in.id, in.b.name, k, errs[k])
			}
		}
		k := 0
		if rs[0] == nil || (rs[1] != nil && rs[1].LastSeq > rs[0].LastSeq) {
			k = 1
		}
		res, err = rs[k], errs[k]
	} else {
		res, err = w.Execute(context.Background(), req)
	}
	if err != nil && !strings.Contains(err.Error(), "simulated crash") {
		t.Fatalf("seed %d: execute %s (%s): %v", s.seed, in.id, in.b.name, err)
	}
	if res != nil && res.IntentID != in.id {
		t.Fatalf("intent id %s, want %s", res.IntentID, in.id)
	}
	if in.b.after != nil {
		in.b.after(s, in, res)
	}
}

// step lets a worker (sometimes two at once, racing) take the intent's
// next steps; sometimes the worker dies during it and is replaced.
func (s *sim) step(in *simIntent) {
	wi := s.rng.IntN(len(s.workers))
	w := s.workers[wi]
	dieAt := -1
	if s.rng.IntN(40) == 0 {
		dieAt = s.rng.IntN(3)
	}
	if dieAt >= 0 {
		n := 0
		w.r.hookStep = func(i *fsm.Intent, st fsm.Step) error {
			if n == dieAt {
				return fmt.Errorf("simulated crash of %s before %s", w.name, st.Kind)
			}
			n++
			return nil
		}
	}
	var rival *simWorker
	if s.rng.IntN(10) == 0 {
		rival = s.workers[(wi+1+s.rng.IntN(len(s.workers)-1))%len(s.workers)]
		s.races++
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	if rival != nil {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = rival.r.Step(ctx, in.route, in.id) }()
	}
	res, err := w.r.Step(ctx, in.route, in.id)
	wg.Wait()
	switch {
	case err != nil:
		in.note(s.clock.Now(), w.name, "error: "+err.Error())
	case res.Done:
		in.note(s.clock.Now(), w.name, "done")
	default:
		in.note(s.clock.Now(), w.name, fmt.Sprintf("wait %s, appended %v", res.Wait, res.Appended))
	}
	switch {
	case dieAt >= 0 && err != nil && strings.Contains(err.Error(), "simulated crash"):
		s.kills++
		s.workers[wi] = s.newWorker()
		in.dueAt = s.clock.Now()
	case err != nil:
		// A transient failure (a CAS lost to the rival, a read): look again.
		in.dueAt = s.clock.Now().Add(time.Second)
	case res.Done:
		in.dueAt = s.clock.Now().Add(time.Hour) // re-checked below; a done intent is final
		in.done = s.final(in)
	default:
		wait := res.Wait
		if wait <= 0 {
			wait = time.Millisecond
		}
		in.dueAt = s.clock.Now().Add(wait)
	}
	w.r.hookStep = nil
}

// final reports whether nothing more will happen to the intent without a
// human: the decider (of any worker) has nothing to do.
func (s *sim) final(in *simIntent) bool {
	i := s.load(in)
	st := s.workers[0].r.dec.Next(i, i.Caps(), s.clock.Now().Add(time.Minute))
	return st.Kind == fsm.StepDone
}

func (s *sim) load(in *simIntent) *fsm.Intent {
	h, err := s.store.Load(context.Background(), in.route, in.id)
	if err != nil {
		s.t.Fatalf("seed %d: load %s: %v", s.seed, in.id, err)
	}
	i, err := h.Fold()
	if err != nil {
		s.t.Fatalf("seed %d: fold %s: %v", s.seed, in.id, err)
	}
	return i
}

func (s *sim) history(in *simIntent) string {
	h, err := s.store.Load(context.Background(), in.route, in.id)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range h.Events {
		data, _ := json.Marshal(e.Data)
		fmt.Fprintf(&b, "\n    v%d %s %s by %s %s", e.Version, e.At.Format("15:04:05.000"), e.Type, e.Actor, data)
	}
	return b.String()
}

// simTotals adds up the worlds of one run.
type simTotals struct {
	mu                                                                                         sync.Mutex
	intents, kills, races, maxEffects, falseConfirmations, unexpected, violations, unaccounted int
	byBehaviour, byState, paths, injected                                                      map[string]int
	handoffs                                                                                   handoffTally
}

func TestSimulationSeeded(t *testing.T) {
	seed, total, batch := *simSeed, *simIntents, max(*simBatch, 1)
	tot := &simTotals{byBehaviour: map[string]int{}, byState: map[string]int{}, paths: map[string]int{}, injected: map[string]int{},
		handoffs: handoffTally{byReason: map[string]int{}}}
	running := make(chan struct{}, max(*simWorlds, 1))
	var worlds sync.WaitGroup
	for b := 0; b*batch < total && !t.Failed(); b++ {
		n := min(batch, total-b*batch)
		running <- struct{}{}
		worlds.Go(func() {
			defer func() { <-running }()
			t.Run(fmt.Sprintf("seed=%d", seed+uint64(b)), func(t *testing.T) {
				runSimulation(t, seed+uint64(b), n, tot)
			})
		})
	}
	worlds.Wait()
	audit := "ok"
	if tot.violations > 0 {
		audit = fmt.Sprintf("%d violations", tot.violations)
	}
	fmt.Fprintf(os.Stdout, "simulation: seed=%d intents=%d worlds=%d workers=4 kills=%d races=%d paths={%s} injected={%s} behaviours={%s} final={%s} %s effects/intent max=%d false confirmations=%d effects of rejected=%d unexpected outcomes=%d audit=%s\n",
		seed, tot.intents, (total+batch-1)/batch, tot.kills, tot.races, counts(tot.paths), counts(tot.injected), counts(tot.byBehaviour), counts(tot.byState),
		tot.handoffs.line(), tot.maxEffects, tot.falseConfirmations, tot.unaccounted, tot.unexpected, audit)
}

// runSimulation runs one world of n intents with seed.
func runSimulation(t *testing.T, seed uint64, n int, tot *simTotals) {
	s := newSim(t, seed)
	accounts := 40
	paths := map[string]int{}
	var intents []*simIntent
	at := t0
	for k := 0; k < n; k++ {
		b := s.pickBehaviour()
		in := &simIntent{k: k, b: b, route: b.route, requestID: fmt.Sprintf("sim-%d:%d", seed, k), tenant: "default",
			account: fmt.Sprintf("acct_%d", k%accounts), body: fmt.Sprintf("simulated post %d of seed %d", k, seed)}
		path := "adapters"
		if yr, ok := yamlRoutes[b.route]; ok {
			agent := yr.mcp && !b.noWrite && s.rng.IntN(3) == 0
			s.prepareYAML(in, agent)
			path = yr.path()
			if agent {
				path = "yaml+mcp"
			}
		}
		paths[path]++
		switch b.route {
		case "reply":
			in.parent = fmt.Sprintf("t_%d", k%20)
		case "booking", "booking_noid":
			in.booking = fmt.Sprintf("B-%d", k)
			s.bk.Seed(in.booking, 1, nil)
		case "booking_short":
			in.booking = fmt.Sprintf("B-%d", k)
			s.bkShort.Seed(in.booking, 1, nil)
		}
		in.id = events.ScopedIntentID(in.tenant, in.route, in.account, in.requestID)
		at = at.Add(time.Duration(s.rng.IntN(1500)) * time.Millisecond)
		in.submitAt = at
		intents = append(intents, in)
	}

	// The event loop: submissions at their times, steps of due intents,
	// the clock jumping to the next thing that can happen.
	next := 0
	bound := t0.Add(72 * time.Hour)
	for iter := 0; ; iter++ {
		now := s.clock.Now()
		for next < len(intents) && !intents[next].submitAt.After(now) {
			in := intents[next]
			s.submit(in)
			in.dueAt = now
			next++
		}
		// Due intents in the order they fell due (ties in random order).
		// A step whose call took simulated time (a slow listing, a wait
		// for a rate limit) moves the world's clock: the loop then starts
		// over, so that what fell due meanwhile runs next rather than
		// after every other due step has added its own delay.
		var due []*simIntent
		for _, k := range s.rng.Perm(next) {
			if in := intents[k]; !in.done && !in.dueAt.After(now) {
				due = append(due, in)
			}
		}
		slices.SortStableFunc(due, func(a, b *simIntent) int { return a.dueAt.Compare(b.dueAt) })
		for _, in := range due {
			s.step(in)
			if s.clock.Now().After(now) {
				break
			}
		}
		// Jump to the earliest due time.
		earliest := time.Time{}
		if next < len(intents) {
			earliest = intents[next].submitAt
		}
		pending := 0
		for _, in := range intents[:next] {
			if in.done {
				continue
			}
			pending++
			if earliest.IsZero() || in.dueAt.Before(earliest) {
				earliest = in.dueAt
			}
		}
		if pending == 0 && next == len(intents) {
			break
		}
		if s.clock.Now().After(bound) {
			var stuck []string
			for _, in := range intents {
				if !in.done && len(stuck) < 5 {
					stuck = append(stuck, fmt.Sprintf("%s (%s): %s%s", in.id, in.b.name, s.load(in).State, s.history(in)))
				}
			}
			t.Fatalf("seed %d: %d intents not settled after 72h of simulated time; first:\n%s", seed, pending, strings.Join(stuck, "\n"))
		}
		if earliest.After(s.clock.Now()) {
			s.clock.Set(earliest)
		}
	}
	// The late originals held by the booking API arrive now.
	s.bk.ReleaseHeld()
	s.bkShort.ReleaseHeld()

	// Invariants.
	var (
		maxEffects, falseConfirmations, unexpected, unaccounted int
		byState                                                 = map[string]int{}
		byBehaviour                                             = map[string]int{}
		handoffs                                                = handoffTally{byReason: map[string]int{}}
	)
	writeLogs := map[string][]fakeapi.WriteRecord{}
	for route, api := range map[string]*fakeapi.SocialAPI{"post": s.post, "post_keyed": s.keyed, "reply": s.thread} {
		for _, w := range api.WriteLog() {
			if k := strings.LastIndex(w.AttemptID, ".a"); k > 0 {
				writeLogs[route+"|"+w.AttemptID[:k]] = append(writeLogs[route+"|"+w.AttemptID[:k]], w)
			}
		}
	}
	effectsOf := func(in *simIntent) (int, map[string]bool) {
		if n, created, ok := s.yamlEffects(in); ok {
			return n, created
		}
		created := map[string]bool{}
		bkAPI := map[string]*fakeapi.BookingAPI{"booking": s.bk, "booking_noid": s.bk, "booking_short": s.bkShort}[in.route]
		if bkAPI != nil {
			// The object a booking change creates is the booking at the
			// version this request applied.
			if rq, ok := bkAPI.Request(in.requestID); ok && rq.State == fakeapi.BookingCompleted && !rq.External {
				created[fmt.Sprintf("%s@v%d", rq.BookingID, rq.AppliedVersion)] = true
			}
			return bkAPI.EffectsForRequest(in.requestID), created
		}
		n := 0
		for _, w := range writeLogs[in.route+"|"+in.id] {
			if len(w.PostIDs) > 0 && !w.Replay {
				n++
				for _, id := range w.PostIDs {
					created[id] = true
				}
			}
		}
		return n, created
	}
	for _, in := range intents {
		i := s.load(in)
		byBehaviour[in.b.name]++
		key := string(i.State)
		if i.State == fsm.ManualAction {
			key += ":" + string(i.ManualReason)
		}
		byState[key]++
		n, created := effectsOf(in)
		s.judge(in, i, created, &handoffs)
		maxEffects = max(maxEffects, n)
		if n > 1 {
			t.Errorf("seed %d: %s (%s): %d requests had an effect%s", seed, in.id, in.b.name, n, s.history(in))
		}
		if i.State == fsm.Confirmed {
			for _, ext := range i.ConfirmedExternalIDs {
				if !created[ext] {
					falseConfirmations++
					t.Errorf("seed %d: %s (%s): confirmed by %s, which it did not create%s", seed, in.id, in.b.name, ext, s.history(in))
				}
			}
		}
		if (i.State == fsm.Rejected || i.State == fsm.Abandoned) && n > 0 {
			// The caller was told nothing was written: it was.
			unaccounted++
			t.Errorf("seed %d: %s (%s): %s, but it made %d effects%s", seed, in.id, in.b.name, i.State, n, s.history(in))
		}
		if i.State == fsm.ManualAction && i.ManualReason == "" {
			t.Errorf("seed %d: %s: manual action without a reason", seed, in.id)
		}
		allowed := ambiguousAllowed(in, i)
		for _, o := range in.b.want {
			allowed = allowed || (o.state == i.State && (o.reason == "" || o.reason == i.ManualReason))
		}
		if !allowed {
			unexpected++
			if unexpected <= 10 {
				t.Errorf("seed %d: %s (%s): ended %s %q, allowed %v%s\n  steps:\n    %s", seed, in.id, in.b.name, i.State, i.ManualReason, in.b.want, s.history(in), strings.Join(in.steps, "\n    "))
			}
		}
	}
	acfg := audit.DefaultAuditConfig()
	acfg.Now = s.clock.Now
	rep, err := audit.Audit(context.Background(), s.node.JS, acfg)
	if err != nil {
		t.Fatal(err)
	}
	verdict := "ok"
	if !rep.OK() {
		verdict = fmt.Sprintf("%d violations", len(rep.Violations))
		for k, v := range rep.Violations {
			if k < 10 {
				t.Errorf("seed %d: audit: %s", seed, v)
			}
		}
	}
	bs := s.batched.BatchStats()
	if bs.Batches == 0 || bs.Lost == 0 {
		t.Errorf("seed %d: the batching store committed %d atomic batches and lost %d: the group commit's paths were not exercised", seed, bs.Batches, bs.Lost)
	}
	t.Logf("world seed=%d intents=%d kills=%d races=%d doubles=%d batches=%d (refused %d, commit or ack lost %d, alone %d) final={%s} %s effects/intent max=%d false confirmations=%d unexpected outcomes=%d audit=%s (rerun: go test ./consumers/reconcile -run Simulation -v -args -sim.seed=%d -sim.intents=%d)",
		seed, n, s.kills, s.races, s.doubles, bs.Batches, bs.Refused, bs.Lost, bs.Alone, counts(byState), handoffs.line(), maxEffects, falseConfirmations, unexpected, verdict, seed, n)
	s.yamlChecks()
	injected := s.yamlCounts()
	t.Logf("world seed=%d paths={%s} injected={%s}", seed, counts(paths), counts(injected))
	tot.mu.Lock()
	defer tot.mu.Unlock()
	for k, v := range paths {
		tot.paths[k] += v
	}
	for k, v := range injected {
		tot.injected[k] += v
	}
	tot.intents += n
	tot.kills += s.kills
	tot.races += s.races
	tot.maxEffects = max(tot.maxEffects, maxEffects)
	tot.falseConfirmations += falseConfirmations
	tot.unaccounted += unaccounted
	tot.unexpected += unexpected
	tot.violations += len(rep.Violations)
	for k, v := range byBehaviour {
		tot.byBehaviour[k] += v
	}
	for k, v := range byState {
		tot.byState[k] += v
	}
	for k, v := range handoffs.byReason {
		tot.handoffs.byReason[k] += v
	}
	tot.handoffs.needless += handoffs.needless
	tot.handoffs.ambiguousOwn += handoffs.ambiguousOwn
	if unexpected > 10 {
		t.Errorf("seed %d: %d intents ended outside their behaviour's allowed outcomes (first 10 above)", seed, unexpected)
	}
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
