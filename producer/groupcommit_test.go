package producer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// countingAdapter checks, at each write, that the log already holds the
// attempt's start (IntentStarted or WriteStarted).
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
	if err == nil && h.Events[len(h.Events)-1].Type.StartsWrite() && h.Events[len(h.Events)-1].AttemptID == req.AttemptID {
		c.started++
	} else {
		c.missing++
	}
	c.mu.Unlock()
	return c.Adapter.Write(ctx, req)
}

// A new intent's record and first write start are one message,
// IntentStarted, on the log before the call: an Execute is two messages
// and two synced publishes (start, outcome), not three.
func TestExecuteRecordsAndStartsInOneMessage(t *testing.T) {
	n := testharness.StartNode(t)
	s := testharness.OpenStore(t, n.JS, testharness.BatchMin(1)) // every flush an atomic batch, to count them
	api := fakeapi.NewSocialAPI(t)
	ad := testharness.ExampleRoute(t, "social.yaml", api).Adapter
	ca := &countingAdapter{Adapter: ad, store: s}
	p, err := producer.New(s, producer.DefaultConfig(), adapter.Route{Name: "social_post", Adapter: ca, Policy: adapter.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Execute(context.Background(), req("task:one-message", "hello"))
	if err != nil || res.State != fsm.Verifying {
		t.Fatalf("%v %+v", err, res)
	}
	if st := s.BatchStats(); st.Batches != 2 || st.Messages != 2 || st.Alone != 0 {
		t.Fatalf("stats %+v: want 2 publishes (IntentStarted, outcome) of 2 messages", st)
	}
	msgs := testharness.RawHistory(t, s, "social_post", res.IntentID)
	if len(msgs) != 2 || len(res.History) != 2 || res.History[0].Type != events.IntentStarted || res.LastSeq != msgs[1].Sequence {
		t.Fatalf("log: %d messages, history %d", len(msgs), len(res.History))
	}
	if ca.started != 1 || ca.missing != 0 || api.Writes() != 1 {
		t.Fatalf("calls with the start on the log %d, without %d; writes %d", ca.started, ca.missing, api.Writes())
	}
	// The same request again: replayed, nothing appended or written.
	again, err := p.Execute(context.Background(), req("task:one-message", "hello"))
	if err != nil || !again.Replayed || api.Writes() != 1 || len(testharness.RawHistory(t, s, "social_post", res.IntentID)) != 2 {
		t.Fatalf("replay: %v %+v, %d writes", err, again, api.Writes())
	}
}

// Messages and synced publishes per write, counted on the stream: every
// confirmed write is two messages (IntentStarted, its outcome) and two
// publishes, whether appends go through the group commit (concurrent
// callers, atomic batches) or each alone (BatchMax 1, a server that does
// not sync every write).
func TestExecuteIsTwoMessagesPerWrite(t *testing.T) {
	const intents = 24
	for name, mod := range map[string]func(*ledger.StoreConfig){
		"group commit": func(c *ledger.StoreConfig) {},
		"alone":        func(c *ledger.StoreConfig) { c.BatchMax = 1 },
	} {
		n := testharness.StartNode(t)
		s := testharness.OpenStore(t, n.JS, mod)
		api := fakeapi.NewSocialAPI(t)
		ad := testharness.ExampleRoute(t, "social.yaml", api).Adapter
		pol := adapter.DefaultPolicy()
		pol.TrustResponse = true
		p, err := producer.New(s, producer.DefaultConfig(), adapter.Route{Name: "social_post", Adapter: ad, Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		ids := make([]string, intents)
		for k := range intents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := p.Execute(context.Background(), req(fmt.Sprintf("task:%d", k), "hello"))
				if err != nil || res.State != fsm.Confirmed {
					t.Errorf("%v %+v", err, res)
					return
				}
				ids[k] = res.IntentID
			}()
		}
		wg.Wait()
		info, err := s.Stream().Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != 2*intents || api.Writes() != intents {
			t.Fatalf("%s: %d messages for %d confirmed writes (want %d)", name, info.State.Msgs, intents, 2*intents)
		}
		for _, id := range ids {
			if m := testharness.RawHistory(t, s, "social_post", id); len(m) != 2 {
				t.Fatalf("%s: %s has %d messages", name, id, len(m))
			}
		}
		st := s.BatchStats()
		if publishes := st.Batches + st.Alone; name == "group commit" && publishes > 2*intents {
			t.Fatalf("%s: %d publishes for %d writes (stats %+v)", name, publishes, intents, st)
		}
		t.Logf("%s: %d messages, %d atomic batches of %d messages, %d units alone, for %d writes", name, info.State.Msgs, st.Batches, st.Messages, st.Alone, intents)
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
		ad := testharness.ExampleRoute(t, "social.yaml", api).Adapter
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
