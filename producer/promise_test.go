package producer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// Two Executes of one request that read the same clock build byte-identical
// events; only the one whose WriteStarted the log holds may call the API.
func TestConcurrentExecutesWithIdenticalEventsWriteOnce(t *testing.T) {
	for round := 0; round < 5; round++ {
		n := testharness.StartNode(t)
		api := fakeapi.NewSocialAPI(t)
		ad := testharness.ExampleRoute(t, "social.yaml", api).Adapter
		pc := producer.DefaultConfig()
		pc.Actor, pc.Now = "writer-1", func() time.Time { return t0 } // every caller reads the same time
		p, err := producer.New(testharness.OpenStore(t, n.JS), pc, adapter.Route{Name: "social_post", Adapter: ad, Policy: adapter.DefaultPolicy()})
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
	e := newEnv(t, func(r *adapter.Route) {
		da = &deadlineAdapter{Adapter: r.Adapter}
		r.Adapter = da
	})
	res, err := e.p.Execute(context.Background(), req("task:deadline", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	var recorded time.Time
	for _, ev := range e.logged(t, res.IntentID) {
		if d := events.Started(ev); d != nil {
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
	e := newEnv(t, func(r *adapter.Route) {
		r.Adapter = identityAdapter{Adapter: r.Adapter, me: "u_token_owner"}
	})
	_, err := e.p.Execute(context.Background(), req("task:who", "hello"))
	var fe *events.FieldError
	if !errors.Is(err, producer.ErrInvalidRequest) || !errors.As(err, &fe) || fe.Field != "account" {
		t.Fatalf("err %v", err)
	}
	if e.api.Writes() != 0 {
		t.Fatalf("%d writes", e.api.Writes())
	}
	if _, err := e.store.Load(context.Background(), "social_post", events.ScopedIntentID("default", "social_post", "acct_1", "task:who")); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("recorded anyway: %v", err)
	}
	ok := req("task:me", "hello")
	ok.Account = "u_token_owner"
	if res, err := e.p.Execute(context.Background(), ok); err != nil || res.State == fsm.Rejected {
		t.Fatalf("the credential's own account: %v %+v", err, res)
	}
}
