package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
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
	cfg := ledger.DefaultStoreConfig()
	cfg.Replicas = 3
	// One store per server: the competitors publish through different
	// nodes, as workers of different processes do.
	var stores []*ledger.Store
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
			st, err := ledger.OpenStore(ctx, js, cfg)
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
					if err != nil && !errors.Is(err, ledger.ErrConflict) {
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
					case !errors.Is(err, ledger.ErrConflict):
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
