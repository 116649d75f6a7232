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

func approval(id string, v uint64, actor string) events.Event {
	return events.New(id, v, t0.Add(time.Duration(v)*time.Second), actor, "", &events.ApprovalRequiredData{For: "first_write", Reason: actor})
}

// Appends submitted together go as one atomic batch, each message with its
// own Msg-Id, its own append id and its own CAS; the sequences reported
// are the ones the log holds.
func TestGroupCommitBatchKeepsEachMessagesMeaning(t *testing.T) {
	n := testharness.StartNode(t)
	s := testharness.OpenStore(t, n.JS, testharness.BatchMin(2))
	ctx := context.Background()
	const k = 12
	evs := make([][]events.Event, k)
	exp := make([]uint64, k)
	for i := range evs {
		rec := recordedEvent(t, fmt.Sprintf("batch-%d", i))
		evs[i] = []events.Event{rec}
		if i%3 == 0 { // some appends carry two events of their intent
			evs[i] = append(evs[i], approval(rec.IntentID, 2, "writer"))
		}
	}
	seqs, errs := s.AppendUnits(ctx, "social_post", evs, exp)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if st := s.BatchStats(); st.Batches != 1 || st.Messages != k+4 || st.Alone != 0 {
		t.Fatalf("stats %+v, want one batch of %d messages", st, k+4)
	}
	appendIDs := map[string]int{}
	for i := range evs {
		msgs := testharness.RawHistory(t, s, "social_post", evs[i][0].IntentID)
		if len(msgs) != len(evs[i]) {
			t.Fatalf("intent %d: %d messages on the log, appended %d", i, len(msgs), len(evs[i]))
		}
		for j, m := range msgs {
			if m.Sequence != seqs[i][j] {
				t.Fatalf("intent %d event %d: log seq %d, append said %d", i, j, m.Sequence, seqs[i][j])
			}
			if got := m.Header.Get(jetstream.MsgIDHeader); got != evs[i][j].EventID {
				t.Fatalf("Msg-Id %q, want %q", got, evs[i][j].EventID)
			}
			if m.Header.Get(jetstream.ExpectedLastSubjSeqHeader) != "" && j > 0 {
				t.Fatalf("event %d of a unit carries a CAS header", j)
			}
			appendIDs[m.Header.Get(ledger.AppendIDHeader)]++
		}
		if msgs[0].Header.Get(jetstream.ExpectedLastSubjSeqHeader) != "0" {
			t.Fatalf("first event's CAS header %q", msgs[0].Header.Get(jetstream.ExpectedLastSubjSeqHeader))
		}
		h, err := s.Load(ctx, "social_post", evs[i][0].IntentID)
		if err != nil || len(h.Events) != len(evs[i]) {
			t.Fatalf("load %d: %v", i, err)
		}
	}
	if len(appendIDs) != k {
		t.Fatalf("%d distinct append ids for %d appends", len(appendIDs), k)
	}
}

// A batch the server refuses for one append's lost CAS (and another's
// duplicate Msg-Id) is split: every other append lands, the two are told
// ErrConflict, and nothing of theirs is on the log.
func TestGroupCommitConflictInsideBatchIsSplit(t *testing.T) {
	n := testharness.StartNode(t)
	s := testharness.OpenStore(t, n.JS, testharness.BatchMin(2))
	ctx := context.Background()
	// Two intents already on the log.
	stale := recordedEvent(t, "stale")
	if _, err := s.Append(ctx, "social_post", stale, 0); err != nil {
		t.Fatal(err)
	}
	taken := recordedEvent(t, "taken")
	seqTaken, err := s.Append(ctx, "social_post", taken, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "social_post", approval(taken.IntentID, 2, "someone-else"), seqTaken); err != nil {
		t.Fatal(err)
	}
	before := s.BatchStats()
	const k = 16
	evs := make([][]events.Event, k)
	exp := make([]uint64, k)
	for i := range evs {
		evs[i] = []events.Event{recordedEvent(t, fmt.Sprintf("fine-%d", i))}
	}
	// 5: version 1 of an intent that has one (CAS "empty" lost).
	evs[5] = []events.Event{stale}
	// 11: version 2 of an intent whose version 2 another writer holds
	// (same Msg-Id, other bytes), appended with its true CAS.
	evs[11] = []events.Event{approval(taken.IntentID, 2, "me")}
	exp[11] = seqTaken
	seqs, errs := s.AppendUnits(ctx, "social_post", evs, exp)
	for i, err := range errs {
		switch i {
		case 5, 11:
			var ce *ledger.ConflictError
			if !errors.Is(err, ledger.ErrConflict) || !errors.As(err, &ce) {
				t.Fatalf("append %d: %v, want ErrConflict", i, err)
			}
		default:
			if err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
			h, lerr := s.Load(ctx, "social_post", evs[i][0].IntentID)
			if lerr != nil || len(h.Events) != 1 || h.LastSeq != seqs[i][0] {
				t.Fatalf("append %d: log %v %v, append said %v", i, h, lerr, seqs[i])
			}
		}
	}
	st := s.BatchStats()
	// The two stale units are found by reading their subjects once: the
	// refused batch is published again without them (one refusal, one
	// commit of the 14 others), not halved until each is alone (which
	// took 7 refused batches here).
	if st.Refused-before.Refused != 1 || st.Batches-before.Batches != 1 || st.Messages-before.Messages != k-2 || st.Alone-before.Alone != 2 {
		t.Fatalf("stats %+v (before %+v): want one refusal, the 14 others in one batch, the 2 stale alone", st, before)
	}
	for _, id := range []string{stale.IntentID, taken.IntentID} {
		msgs := testharness.RawHistory(t, s, "social_post", id)
		if id == stale.IntentID && len(msgs) != 1 || id == taken.IntentID && (len(msgs) != 2 || string(msgs[1].Data) == "") {
			t.Fatalf("%s: %d messages", id, len(msgs))
		}
	}
	h, err := s.Load(ctx, "social_post", taken.IntentID)
	if err != nil || h.Events[1].Actor != "someone-else" {
		t.Fatalf("version 2 of the taken intent: %v %v", h, err)
	}
}

// A batch whose ack is lost had landed: every append is resolved by
// reading the log (our bytes under our append id) and reported with the
// log's sequences; nothing is written twice. A batch whose commit never
// reached the server had not landed: each append is then published alone.
func TestGroupCommitLostBatchAckIsResolvedPerMessage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(*testharness.BatchFaults)
	}{
		{"ack-lost", func(f *testharness.BatchFaults) { f.LoseAcks(1) }},
		{"commit-dropped", func(f *testharness.BatchFaults) { f.DropCommits(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testharness.StartNode(t)
			faults := testharness.NewBatchFaults(n.JS)
			s := testharness.OpenStore(t, faults, testharness.BatchMin(2))
			ctx := context.Background()
			const k = 10
			evs := make([][]events.Event, k)
			exp := make([]uint64, k)
			for i := range evs {
				rec := recordedEvent(t, fmt.Sprintf("lost-%d", i))
				evs[i] = []events.Event{rec, approval(rec.IntentID, 2, "writer")}
			}
			tc.inject(faults)
			seqs, errs := s.AppendUnits(ctx, "social_post", evs, exp)
			for i, err := range errs {
				if err != nil {
					t.Fatalf("append %d: %v (want success: its events are ours)", i, err)
				}
				msgs := testharness.RawHistory(t, s, "social_post", evs[i][0].IntentID)
				if len(msgs) != 2 || msgs[0].Sequence != seqs[i][0] || msgs[1].Sequence != seqs[i][1] {
					t.Fatalf("append %d: log %d messages, append said %v", i, len(msgs), seqs[i])
				}
			}
			info, err := s.Stream().Info(ctx)
			if err != nil || info.State.Msgs != 2*k {
				t.Fatalf("stream holds %d messages, want %d: %v", info.State.Msgs, 2*k, err)
			}
			if st := s.BatchStats(); st.Lost != 1 || st.Alone != k {
				t.Fatalf("stats %+v: want the lost batch's %d appends resolved alone", st, k)
			}
		})
	}
}

// A competitor's identical bytes in a lost batch are not ours: after a lost
// ack, an append whose version another writer (another append id) holds
// is a conflict, not a success.
func TestGroupCommitLostAckDoesNotClaimAnIdenticalEvent(t *testing.T) {
	n := testharness.StartNode(t)
	faults := testharness.NewBatchFaults(n.JS)
	s := testharness.OpenStore(t, faults, testharness.BatchMin(2))
	ctx := context.Background()
	rec := recordedEvent(t, "identical")
	if _, err := s.Append(ctx, "social_post", rec, 0); err != nil { // another append of the same bytes
		t.Fatal(err)
	}
	other := recordedEvent(t, "other")
	faults.LoseAcks(1)
	_, errs := s.AppendUnits(ctx, "social_post", [][]events.Event{{rec}, {other}}, []uint64{0, 0})
	if !errors.Is(errs[0], ledger.ErrConflict) {
		t.Fatalf("identical event appended by another append: %v, want ErrConflict", errs[0])
	}
	if errs[1] != nil {
		t.Fatal(errs[1])
	}
	if msgs := testharness.RawHistory(t, s, "social_post", rec.IntentID); len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
}

// Many concurrent writers of many intents, some racing for the same
// versions, through the group commit: every version has exactly one
// winner, the winners' sequences are the log's, and histories are whole.
//
// The same race with the store set for a server that does not sync every
// write (ForServerSync(false)): every append alone, none batched, the same
// one winner per version.
func TestGroupCommitConcurrentWritersRace(t *testing.T) {
	t.Run("group commit", func(t *testing.T) {
		n := testharness.StartNode(t)
		_, js2 := n.Connect()
		stores := []*ledger.Store{testharness.OpenStore(t, n.JS, testharness.BatchMin(2)), testharness.OpenStore(t, js2, testharness.BatchMin(2))}
		writersRace(t, stores)
		if st := stores[0].BatchStats(); st.Batches == 0 {
			t.Logf("no batch was formed: %+v", st)
		}
	})
	t.Run("lone appends", func(t *testing.T) {
		n := testharness.StartNode(t)
		_, js2 := n.Connect()
		cfg := ledger.DefaultStoreConfig().ForServerSync(false)
		var stores []*ledger.Store
		for _, js := range []jetstream.JetStream{n.JS, js2} {
			s, err := ledger.OpenStore(context.Background(), js, cfg)
			if err != nil {
				t.Fatal(err)
			}
			stores = append(stores, s)
		}
		writersRace(t, stores)
		for i, s := range stores {
			if st := s.BatchStats(); st != (ledger.BatchStats{}) {
				t.Errorf("store %d: the group commit was used: %+v", i, st)
			}
		}
	})
}

// writersRace records intents and, at each next version, races three
// writers over two stores: exactly one wins, the others get ErrConflict.
func writersRace(t *testing.T, stores []*ledger.Store) {
	t.Helper()
	ctx := context.Background()
	const intents, versions, racers = 24, 6, 3
	var wg sync.WaitGroup
	errc := make(chan error, intents)
	for k := 0; k < intents; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := recordedEvent(t, fmt.Sprintf("race-%d", k))
			last, err := stores[k%2].Append(ctx, "social_post", rec, 0)
			if err != nil {
				errc <- err
				return
			}
			for v := uint64(2); v <= versions; v++ {
				var rw sync.WaitGroup
				seqs := make([]uint64, racers)
				errs := make([]error, racers)
				for r := 0; r < racers; r++ {
					rw.Add(1)
					go func() {
						defer rw.Done()
						seqs[r], errs[r] = stores[r%2].Append(ctx, "social_post", approval(rec.IntentID, v, fmt.Sprintf("writer-%d", r)), last)
					}()
				}
				rw.Wait()
				wins := 0
				for r := range racers {
					switch {
					case errs[r] == nil:
						wins++
						last = seqs[r]
					case !errors.Is(errs[r], ledger.ErrConflict):
						errc <- fmt.Errorf("intent %d v%d racer %d: %w", k, v, r, errs[r])
						return
					}
				}
				if wins != 1 {
					errc <- fmt.Errorf("intent %d v%d: %d winners", k, v, wins)
					return
				}
			}
			h, err := stores[0].Load(ctx, "social_post", rec.IntentID)
			if err != nil || len(h.Events) != versions || h.LastSeq != last {
				errc <- fmt.Errorf("intent %d: history %v last %d, want %d events ending at %d", k, err, h.LastSeq, versions, last)
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// The R3 stream through the group commit: identical and competing appends
// racing on every node resolve as they do alone (one winner per version,
// never a generic error), batches commit on the replicated stream, and a
// batch's lost ack is resolved from the replicated log.
func TestClusterR3GroupCommit(t *testing.T) {
	c := testharness.StartCluster(t, embedded.SyncAlways)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := ledger.DefaultStoreConfig()
	cfg.Replicas = 3
	cfg.BatchMin = 2
	var stores []*ledger.Store
	var faults []*testharness.BatchFaults
	for _, srv := range c.Servers {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		faults = append(faults, testharness.NewBatchFaults(js))
		for {
			st, err := ledger.OpenStore(ctx, faults[len(faults)-1], cfg)
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
	const intents, racers = 16, 6
	var wg sync.WaitGroup
	errc := make(chan error, intents*racers)
	for k := 0; k < intents; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := recordedEvent(t, fmt.Sprintf("r3-batch-%d", k))
			seqs := make([]uint64, racers)
			var rw sync.WaitGroup
			for r := 0; r < racers; r++ {
				rw.Add(1)
				go func() {
					defer rw.Done()
					seq, err := stores[r%len(stores)].Append(ctx, "social_post", rec, 0)
					if err != nil && !errors.Is(err, ledger.ErrConflict) {
						errc <- fmt.Errorf("intent %d racer %d: %w (want success or ErrConflict)", k, r, err)
					}
					seqs[r] = seq
				}()
			}
			rw.Wait()
			var seq1 uint64
			winners := 0
			for _, q := range seqs {
				if q != 0 {
					winners++
					seq1 = q
				}
			}
			if winners != 1 {
				errc <- fmt.Errorf("intent %d: %d writers told they made the identical append", k, winners)
				return
			}
			won := make([]bool, racers)
			for r := 0; r < racers; r++ {
				rw.Add(1)
				go func() {
					defer rw.Done()
					_, err := stores[r%len(stores)].Append(ctx, "social_post", approval(rec.IntentID, 2, fmt.Sprintf("writer-%d", r)), seq1)
					switch {
					case err == nil:
						won[r] = true
					case !errors.Is(err, ledger.ErrConflict):
						errc <- fmt.Errorf("intent %d competing racer %d: %w", k, r, err)
					}
				}()
			}
			rw.Wait()
			h, err := stores[0].Load(ctx, "social_post", rec.IntentID)
			if err != nil {
				errc <- err
				return
			}
			n := 0
			for _, w := range won {
				if w {
					n++
				}
			}
			if n != 1 || len(h.Events) != 2 || !won[actorIndex(t, h.Events[1].Actor)] {
				errc <- fmt.Errorf("intent %d: %d winners %v, log has %d events", k, n, won, len(h.Events))
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	batches := int64(0)
	for _, s := range stores {
		batches += s.BatchStats().Batches
	}
	t.Logf("%d atomic batches committed on R3", batches)

	// A lost batch ack on R3: resolved from the replicated log.
	s := stores[1]
	evs := make([][]events.Event, 8)
	exp := make([]uint64, 8)
	for i := range evs {
		rec := recordedEvent(t, fmt.Sprintf("r3-lost-%d", i))
		evs[i] = []events.Event{rec, approval(rec.IntentID, 2, "writer")}
	}
	faults[1].LoseAcks(1)
	before := s.BatchStats()
	seqs, errs := s.AppendUnits(ctx, "social_post", evs, exp)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("lost-ack append %d: %v", i, err)
		}
		h, err := stores[0].Load(ctx, "social_post", evs[i][0].IntentID)
		if err != nil || len(h.Events) != 2 || h.LastSeq != seqs[i][1] {
			t.Fatalf("lost-ack append %d: %v, log ends at %d, append said %v", i, err, h.LastSeq, seqs[i])
		}
	}
	if st := s.BatchStats(); st.Lost-before.Lost != 1 || st.Batches-before.Batches != 0 {
		t.Fatalf("stats %+v (before %+v): want one lost batch", st, before)
	}
}

// A stream of this log format without atomic publish and direct get is
// updated when the store opens, and appends then go in batches.
func TestOpenStoreEnablesAtomicPublishOnAnOlderStream(t *testing.T) {
	n := testharness.StartNode(t)
	ctx := context.Background()
	old := jetstream.StreamConfig{Name: "SETTLE_INTENTS", Description: "settle intents: one subject per intent, every lifecycle event",
		Subjects: []string{events.AllSubjects}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		Discard: jetstream.DiscardNew, Replicas: 1, Duplicates: 10 * time.Minute, DenyDelete: true, DenyPurge: true,
		MaxMsgSize: events.MaxEventSize + 4096, Metadata: map[string]string{events.FormatMetadata: events.FormatMetadataValue}}
	if _, err := n.JS.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	s := testharness.OpenStore(t, n.JS, testharness.BatchMin(2))
	info, err := s.Stream().Info(ctx)
	if err != nil || !info.Config.AllowAtomicPublish || !info.Config.AllowDirect {
		t.Fatalf("config after open: atomic %v direct %v (%v)", info.Config.AllowAtomicPublish, info.Config.AllowDirect, err)
	}
	evs := [][]events.Event{{recordedEvent(t, "old-1")}, {recordedEvent(t, "old-2")}}
	if _, errs := s.AppendUnits(ctx, "social_post", evs, []uint64{0, 0}); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if st := s.BatchStats(); st.Batches != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A lone one-message append on an idle batcher is published by its caller,
// which holds the flusher's place meanwhile: what arrives then waits and
// goes as the next flush, together. A unit of several messages is still
// the flusher's to batch.
func TestALoneAppendOnAnIdleBatcherHoldsTheFlushersPlace(t *testing.T) {
	n := testharness.StartNode(t)
	s := testharness.OpenStore(t, n.JS, testharness.BatchMin(2))
	ctx := context.Background()

	// Alone: published by the caller, no flusher left running.
	lone := recordedEvent(t, "idle-lone")
	if _, err := s.Append(ctx, "social_post", lone, 0); err != nil {
		t.Fatal(err)
	}
	if st := s.BatchStats(); st.Alone != 1 || st.Batches != 0 || s.FlushersRunning() != 0 {
		t.Fatalf("stats %+v, %d flushers running; want one append alone and none running", st, s.FlushersRunning())
	}
	if msgs := testharness.RawHistory(t, s, "social_post", lone.IntentID); len(msgs) != 1 {
		t.Fatalf("%d messages on the log for the lone append", len(msgs))
	}

	// While a lone append holds the place, others queue, then go together.
	if !s.HoldFlusherPlace() {
		t.Fatal("the idle batcher's place was not free")
	}
	if s.HoldFlusherPlace() {
		t.Fatal("the place was taken twice")
	}
	const k = 6
	var wg sync.WaitGroup
	errs := make([]error, k)
	ids := make([]string, k)
	for i := range k {
		e := recordedEvent(t, fmt.Sprintf("idle-queued-%d", i))
		ids[i] = e.IntentID
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = s.Append(ctx, "social_post", e, 0) }()
	}
	for deadline := time.Now().Add(10 * time.Second); s.QueuedUnits() < k; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d appends queued behind the held place", s.QueuedUnits(), k)
		}
	}
	for _, id := range ids {
		if msgs := testharness.RawHistory(t, s, "social_post", id); len(msgs) != 0 {
			t.Fatalf("an append went out while the place was held: %d messages of %s", len(msgs), id)
		}
	}
	s.ReleaseFlusherPlace()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("queued append %d: %v", i, err)
		}
	}
	if st := s.BatchStats(); st.Batches != 1 || st.Messages != k || st.Alone != 2 {
		t.Fatalf("stats %+v, want the %d queued appends in one batch (alone: the lone append and the held place)", st, k)
	}

	// Two events of one intent on an idle batcher: a batch, not two lone
	// publishes.
	rec := recordedEvent(t, "idle-pair")
	if _, err := s.AppendEvents(ctx, "social_post", []events.Event{rec, approval(rec.IntentID, 2, "writer")}, 0); err != nil {
		t.Fatal(err)
	}
	if st := s.BatchStats(); st.Batches != 2 || st.Alone != 2 {
		t.Fatalf("stats %+v, want the pair as the second batch", st)
	}
}
