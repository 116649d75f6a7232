package producer_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/social"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// On an R3 stream, competitors appending the same version of an intent at
// once carry the same Msg-Id, and the server may answer one of them "duplicate
// message id is in process" (10158) while the other's proposal is applied.
// That answer proves nothing: it is resolved like a lost ack, so every
// append ends as a success (its bytes are on the log) or ErrConflict
// (another's are), never as a generic error, and an IntentRecorded that did
// commit is never reported as failed.
func TestClusterR3ConcurrentAppendsResolveInProcessDuplicates(t *testing.T) {
	c := testharness.StartCluster(t, embedded.SyncAlways)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := producer.DefaultStoreConfig()
	cfg.Replicas = 3
	// One store per server: the competitors publish through different
	// nodes, as workers of different processes do.
	var stores []*producer.Store
	for _, s := range c.Servers {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		for {
			st, err := producer.OpenStore(ctx, js, cfg)
			if err == nil {
				stores = append(stores, st)
				break
			}
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	const intents, racers = 20, 6
	dups := func() (n int64) {
		for _, s := range stores {
			n += s.DuplicatesInProcess()
		}
		return n
	}
	for round := 0; round < 5 && (round == 0 || dups() == 0); round++ {
		var wg sync.WaitGroup
		errs := make(chan error, intents*racers*2)
		for k := 0; k < intents; k++ {
			rec := recordedEvent(t, fmt.Sprintf("race-%d-%d", round, k))
			// v1: the same IntentRecorded, byte for byte, from several
			// writers at once: exactly one of them made the append.
			seqs := make([]uint64, racers)
			for r := 0; r < racers; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					seq, err := stores[r%len(stores)].Append(ctx, "social_post", rec, 0)
					if err != nil && !errors.Is(err, producer.ErrConflict) {
						errs <- fmt.Errorf("identical IntentRecorded by racer %d: %w (want success or ErrConflict)", r, err)
					}
					seqs[r] = seq
				}()
			}
			wg.Wait()
			winners := 0
			var seq1 uint64
			for _, q := range seqs {
				if q != 0 {
					winners++
					seq1 = q
				}
			}
			if winners != 1 {
				t.Fatalf("identical appends by %d writers: %d were told they made it (%v)", racers, winners, seqs)
			}
			seqs[0] = seq1
			// v2: different events from several writers at once.
			won := make([]bool, racers)
			for r := 0; r < racers; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					e := events.New(rec.IntentID, 2, t0, fmt.Sprintf("writer-%d", r), "", &events.ApprovalRequiredData{For: "first_write"})
					_, err := stores[r%len(stores)].Append(ctx, "social_post", e, seqs[0])
					switch {
					case err == nil:
						won[r] = true
					case !errors.Is(err, producer.ErrConflict):
						errs <- fmt.Errorf("competing append by racer %d: %w (want success or ErrConflict)", r, err)
					}
				}()
			}
			wg.Wait()
			n := 0
			for _, w := range won {
				if w {
					n++
				}
			}
			h, err := stores[0].Load(ctx, "social_post", rec.IntentID)
			if err != nil {
				t.Fatal(err)
			}
			if n != 1 || len(h.Events) != 2 || !won[actorIndex(t, h.Events[1].Actor)] {
				t.Fatalf("intent %d: %d winners %v, log has %d events (v2 by %s)", k, n, won, len(h.Events), h.Events[1].Actor)
			}
		}
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	t.Logf("%d appends answered 10158 (duplicate message id is in process) and were resolved", dups())
}

func actorIndex(t *testing.T, actor string) int {
	var n int
	if _, err := fmt.Sscanf(actor, "writer-%d", &n); err != nil {
		t.Fatalf("actor %q", actor)
	}
	return n
}

// Two Executes of one request that read the same clock build byte-identical
// events; only the one whose WriteStarted the log holds may call the API.
func TestConcurrentExecutesWithIdenticalEventsWriteOnce(t *testing.T) {
	for round := 0; round < 5; round++ {
		n := testharness.StartNode(t)
		api := testharness.NewSocialAPI(t)
		ad, err := social.New(social.Config{BaseURL: api.URL(), Token: api.Token(), Client: &http.Client{Timeout: 2 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		pc := producer.DefaultConfig()
		pc.Actor, pc.Now = "writer-1", func() time.Time { return t0 } // every caller reads the same time
		p, err := producer.New(openStore(t, n.JS), pc, producer.Route{Name: "social_post", Adapter: ad, Policy: producer.DefaultPolicy()})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for k := 0; k < 8; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := p.Execute(context.Background(), req("task:same", "hello")); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if api.Writes() != 1 || api.Effects() != 1 {
			t.Fatalf("round %d: 8 concurrent submits made %d writes, %d effects", round, api.Writes(), api.Effects())
		}
	}
}

// A request that was never sent is retryable only when sending it again
// could help: an invalid request is not.
func TestClassifyNotSentKeepsTheAdaptersRetryable(t *testing.T) {
	i := &fsm.Intent{}
	d := producer.Classify(i, "a1", adapter.WriteResult{}, &adapter.CallError{Class: adapter.NotSent, Code: "bad_request", Retryable: false})
	if r, ok := d.(*events.WriteRejectedData); !ok || r.Retryable {
		t.Fatalf("%+v", d)
	}
	d = producer.Classify(i, "a1", adapter.WriteResult{}, &adapter.CallError{Class: adapter.NotSent, Code: "connection_refused", Retryable: true})
	if r, ok := d.(*events.WriteRejectedData); !ok || !r.Retryable {
		t.Fatalf("%+v", d)
	}
}

// deadlineAdapter records the deadline its write was called with.
type deadlineAdapter struct {
	adapter.Adapter
	mu       sync.Mutex
	deadline time.Time
}

func (d *deadlineAdapter) Write(ctx context.Context, req adapter.WriteRequest) (adapter.WriteResult, error) {
	dl, _ := ctx.Deadline()
	d.mu.Lock()
	d.deadline = dl
	d.mu.Unlock()
	return d.Adapter.Write(ctx, req)
}

// The call never outlives the deadline recorded in WriteStarted (which the
// reconciler trusts, plus skew, before declaring the attempt unknown), even
// when the append of WriteStarted is slow.
func TestCallDeadlineIsTheRecordedDeadline(t *testing.T) {
	var da *deadlineAdapter
	e := newEnv(t, func(r *producer.Route, c *social.Config) {
		ad, err := social.New(*c)
		if err != nil {
			t.Fatal(err)
		}
		da = &deadlineAdapter{Adapter: ad}
		r.Adapter = da
	})
	res, err := e.p.Execute(context.Background(), req("task:deadline", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	var recorded time.Time
	for _, ev := range e.logged(t, res.IntentID) {
		if d, ok := ev.Data.(*events.WriteStartedData); ok {
			recorded = d.Deadline
		}
	}
	da.mu.Lock()
	defer da.mu.Unlock()
	if da.deadline.IsZero() || da.deadline.After(recorded) {
		t.Fatalf("the call's deadline %s is after the recorded deadline %s", da.deadline, recorded)
	}
}

// identityAdapter knows its credential acts as one account only.
type identityAdapter struct {
	adapter.Adapter
	me string
}

func (a identityAdapter) CheckAccount(_ context.Context, account string) error {
	if account != a.me {
		return fmt.Errorf("identity %s: %w", a.me, adapter.ErrAccountMismatch)
	}
	return nil
}

// A route that can tell its credential's identity refuses an intent for
// another account before anything is recorded or written.
func TestIdentityMismatchIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	e := newEnv(t, func(r *producer.Route, c *social.Config) {
		ad, err := social.New(*c)
		if err != nil {
			t.Fatal(err)
		}
		r.Adapter = identityAdapter{Adapter: ad, me: "u_token_owner"}
	})
	_, err := e.p.Execute(context.Background(), req("task:who", "hello"))
	var fe *events.FieldError
	if !errors.Is(err, producer.ErrInvalidRequest) || !errors.As(err, &fe) || fe.Field != "account" {
		t.Fatalf("err %v", err)
	}
	if e.api.Writes() != 0 {
		t.Fatalf("%d writes", e.api.Writes())
	}
	if _, err := e.p.Store().Load(context.Background(), "social_post", events.ScopedIntentID("default", "social_post", "acct_1", "task:who")); !errors.Is(err, producer.ErrNotFound) {
		t.Fatalf("recorded anyway: %v", err)
	}
	ok := req("task:me", "hello")
	ok.Account = "u_token_owner"
	if res, err := e.p.Execute(context.Background(), ok); err != nil || res.State == fsm.Rejected {
		t.Fatalf("the credential's own account: %v %+v", err, res)
	}
}
