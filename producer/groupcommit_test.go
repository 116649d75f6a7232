package producer_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/social"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// countingAdapter checks, at each write, that the log already holds the
// attempt's WriteStarted.
type countingAdapter struct {
	adapter.Adapter
	store   *ledger.Store
	mu      sync.Mutex
	started int
	missing int
}

func (c *countingAdapter) Write(ctx context.Context, req adapter.WriteRequest) (adapter.WriteResult, error) {
	h, err := c.store.Load(ctx, "social_post", req.IntentID)
	c.mu.Lock()
	if err == nil && h.Events[len(h.Events)-1].Type == events.WriteStarted && h.Events[len(h.Events)-1].AttemptID == req.AttemptID {
		c.started++
	} else {
		c.missing++
	}
	c.mu.Unlock()
	return c.Adapter.Write(ctx, req)
}

// A new intent's IntentRecorded and WriteStarted are appended together, as
// one atomic batch (one sync), and the WriteStarted is on the log before
// the call: an Execute is two durable steps (intent and start, outcome),
// not three.
func TestExecuteRecordsAndStartsInOneBatch(t *testing.T) {
	n := testharness.StartNode(t)
	s := testharness.OpenStore(t, n.JS, testharness.BatchMin(1)) // every flush an atomic batch, to count them
	api := fakeapi.NewSocialAPI(t)
	ad, err := social.New(social.Config{BaseURL: api.URL(), Token: api.Token(), Client: &http.Client{Timeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ca := &countingAdapter{Adapter: ad, store: s}
	p, err := producer.New(s, producer.DefaultConfig(), adapter.Route{Name: "social_post", Adapter: ca, Policy: adapter.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Execute(context.Background(), req("task:one-batch", "hello"))
	if err != nil || res.State != fsm.Verifying {
		t.Fatalf("%v %+v", err, res)
	}
	if st := s.BatchStats(); st.Batches != 2 || st.Messages != 3 {
		t.Fatalf("stats %+v: want 2 batches (IntentRecorded+WriteStarted, outcome) of 3 messages", st)
	}
	msgs := testharness.RawHistory(t, s, "social_post", res.IntentID)
	if len(msgs) != 3 || msgs[1].Sequence != msgs[0].Sequence+1 {
		t.Fatalf("log: %d messages", len(msgs))
	}
	if ca.started != 1 || ca.missing != 0 || api.Writes() != 1 {
		t.Fatalf("calls with WriteStarted on the log %d, without %d; writes %d", ca.started, ca.missing, api.Writes())
	}
	// The same request again: replayed, nothing appended or written.
	again, err := p.Execute(context.Background(), req("task:one-batch", "hello"))
	if err != nil || !again.Replayed || api.Writes() != 1 || len(testharness.RawHistory(t, s, "social_post", res.IntentID)) != 3 {
		t.Fatalf("replay: %v %+v, %d writes", err, again, api.Writes())
	}
}

// Concurrent Executes of one request with different payloads race for
// IntentRecorded inside batches: the loser reloads, compares and is
// refused; exactly one write happens.
func TestConcurrentExecutesDifferentPayloadsThroughBatches(t *testing.T) {
	for round := 0; round < 3; round++ {
		n := testharness.StartNode(t)
		s := testharness.OpenStore(t, n.JS, testharness.BatchMin(2))
		api := fakeapi.NewSocialAPI(t)
		ad, err := social.New(social.Config{BaseURL: api.URL(), Token: api.Token(), Client: &http.Client{Timeout: 2 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := producer.New(s, producer.DefaultConfig(), adapter.Route{Name: "social_post", Adapter: ad, Policy: adapter.DefaultPolicy()})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		refused, ok := 0, 0
		for k := 0; k < 8; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := p.Execute(context.Background(), req("task:contested", fmt.Sprintf("body %d", k)))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, producer.ErrPayloadMismatch):
					refused++
				default:
					t.Error(err)
				}
			}()
		}
		// Other intents at the same time, to fill the batches.
		for k := 0; k < 24; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := p.Execute(context.Background(), req(fmt.Sprintf("task:other-%d", k), "hello")); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if ok != 1 || refused != 7 || api.Writes() != 25 || api.Effects() != 25 {
			t.Fatalf("round %d: %d ok, %d refused, %d writes, %d effects (want 1, 7, 25, 25)", round, ok, refused, api.Writes(), api.Effects())
		}
	}
}
