package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/testharness"
)

// medianMs is the median of d in milliseconds (d is sorted).
func medianMs(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)/2]) / float64(time.Millisecond)
}

// handMsg is a message of the log published again by hand on subject:
// its bytes and settle's headers, a Msg-Id of its own and the expected
// last sequence of subject.
func handMsg(subject string, of *jetstream.RawStreamMsg, msgID string, expected uint64) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = of.Data
	for _, key := range []string{ledger.AppendIDHeader, jetstream.ExpectedStreamHeader} {
		m.Header.Set(key, of.Header.Get(key))
	}
	m.Header.Set(jetstream.MsgIDHeader, msgID)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expected, 10))
	return m
}

// BenchmarkLoneParts: where a lone intent's time goes, without
// instrumenting settle. Each op is one Execute (fsync always, one caller)
// and then the same work by hand, interleaved so that both meet the same
// disk: a publish of the bytes and headers of that Execute's IntentStarted
// (read back from the log) on a new subject, the adapter's POST of the
// same payload, and a publish of the bytes of its outcome behind it. The
// difference of the two medians (settle_over_hand_ms) is settle's own
// path: encoding, the decider, the group commit's hand-off, folding. The
// hand sequence's parts say what the rest costs; start_B and outcome_B are
// the two messages' sizes (the raw baseline of BenchmarkAppendRaw
// publishes a mix of 351–1,048-byte events).
func BenchmarkLoneParts(b *testing.B) {
	n := testharness.StartNode(b, embedded.SyncAlways)
	store := openStore(b, n, embedded.SyncAlways)
	api := fakeapi.NewSocialAPI(b)
	ad := newAdapter(b, api)
	p := newProducer(b, store, ad)
	ctx := context.Background()
	var exec, start, post, outcome, hand []time.Duration
	var startB, outcomeB int
	b.ResetTimer()
	for k := 0; k < b.N; k++ {
		t0 := time.Now()
		req := request(fmt.Sprintf("lone:%d", k), time.Time{})
		res, err := p.Execute(ctx, req)
		exec = append(exec, time.Since(t0))
		if err != nil || res.State != fsm.Verifying || len(res.History) != 2 {
			b.Fatalf("execute %d: state %v, %d events, err %v", k, stateOf(res), len(res.History), err)
		}
		b.StopTimer()
		first, err := store.Stream().GetMsg(ctx, res.LastSeq-1)
		if err != nil {
			b.Fatal(err)
		}
		last, err := store.Stream().GetMsg(ctx, res.LastSeq)
		if err != nil {
			b.Fatal(err)
		}
		startB, outcomeB = len(first.Data), len(last.Data)
		subject := events.SubjectPrefix + "." + route + ".hand" + strconv.Itoa(k)
		m1 := handMsg(subject, first, fmt.Sprintf("hand%d:1", k), 0)
		wreq := adapter.WriteRequest{Account: account, Payload: res.Intent.Recorded.Payload,
			IdempotencyKey: "hand-" + strconv.Itoa(k), AttemptID: "hand-" + strconv.Itoa(k) + ".a1"}
		b.StartTimer()
		t1 := time.Now()
		ack, err := n.JS.PublishMsg(ctx, m1)
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := ad.Write(ctx, wreq); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if _, err := n.JS.PublishMsg(ctx, handMsg(subject, last, fmt.Sprintf("hand%d:2", k), ack.Sequence)); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		start, post, outcome, hand = append(start, t2.Sub(t1)), append(post, t3.Sub(t2)), append(outcome, t4.Sub(t3)), append(hand, t4.Sub(t1))
	}
	b.StopTimer()
	if api.Effects() != 2*b.N {
		b.Fatalf("effects %d, want %d", api.Effects(), 2*b.N)
	}
	med := medianMs
	e, h := med(exec), med(hand)
	report(b, e, "execute_p50_ms")
	report(b, h, "hand_p50_ms")
	report(b, med(start), "hand_start_p50_ms")
	report(b, med(post), "hand_post_p50_ms")
	report(b, med(outcome), "hand_outcome_p50_ms")
	report(b, e-h, "settle_over_hand_ms")
	report(b, float64(startB), "start_B")
	report(b, float64(outcomeB), "outcome_B")
}
