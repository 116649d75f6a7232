package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/testharness"
)

// readerLog publishes n messages on the intents stream, intent k%5 of
// route r<k%3>, and returns each message's subject by sequence (from 1).
func readerLog(t *testing.T, js jetstream.JetStream, n int) []string {
	t.Helper()
	ctx := context.Background()
	subjects := []string{""}
	for k := 0; k < n; k++ {
		subj := events.Subject(fmt.Sprintf("r%d", k%3), events.ScopedIntentID("default", "r", "acct_1", fmt.Sprint(k%5)))
		ack, err := js.Publish(ctx, subj, []byte(fmt.Sprint(k)))
		if err != nil {
			t.Fatal(err)
		}
		if ack.Sequence != uint64(len(subjects)) {
			t.Fatalf("seq %d, want %d", ack.Sequence, len(subjects))
		}
		subjects = append(subjects, subj)
	}
	return subjects
}

// readAll reads r to io.EOF and returns the sequences it delivered.
func readAll(t *testing.T, r *ledger.Reader) []uint64 {
	t.Helper()
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var seqs []uint64
	for {
		m, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return seqs
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(seqs) > 0 && m.Seq <= seqs[len(seqs)-1] {
			t.Fatalf("seq %d after %d", m.Seq, seqs[len(seqs)-1])
		}
		seqs = append(seqs, m.Seq)
	}
}

func openReader(t *testing.T, js jetstream.JetStream, cfg ledger.ReaderConfig) *ledger.Reader {
	t.Helper()
	if cfg.Stream == "" {
		cfg.Stream = "SETTLE_INTENTS"
	}
	r, err := ledger.OpenReader(context.Background(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func sameSeqs(t *testing.T, what string, got, want []uint64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: read %d message(s) %v, want %d %v", what, len(got), got, len(want), want)
	}
}

// checkReads runs the reader's contract on js: a whole read, a read from
// a sequence, a route's read, a last-per-subject read, and a read whose
// first consumer sits on a copy that lags (it holds nothing after 100):
// every message to the end, each once, in order, the lagging consumer made
// again; a copy that never catches up fails with ErrReadStalled.
func checkReads(t *testing.T, js jetstream.JetStream) {
	subjects := readerLog(t, js, 300)
	r := openReader(t, js, ledger.ReaderConfig{Batch: 64})
	if r.End() != 300 {
		t.Fatalf("end %d", r.End())
	}
	sameSeqs(t, "whole", readAll(t, r), seqRange(1, 300))
	sameSeqs(t, "from 250", readAll(t, openReader(t, js, ledger.ReaderConfig{From: 250})), seqRange(250, 300))
	sameSeqs(t, "until 20", readAll(t, openReader(t, js, ledger.ReaderConfig{Until: 20})), seqRange(1, 20))
	var route []uint64
	for s := uint64(1); s <= 300; s++ {
		if subjects[s] == events.Subject("r1", events.ScopedIntentID("default", "r", "acct_1", fmt.Sprint((s-1)%5))) {
			route = append(route, s)
		}
	}
	sameSeqs(t, "route r1", readAll(t, openReader(t, js, ledger.ReaderConfig{Subject: events.RouteSubjects("r1")})), route)
	last := map[string]uint64{}
	for s := uint64(1); s <= 300; s++ {
		last[subjects[s]] = s
	}
	got := readAll(t, openReader(t, js, ledger.ReaderConfig{LastPerSubject: true}))
	if len(got) != len(last) {
		t.Fatalf("last per subject: %v (want one of each of %d subjects)", got, len(last))
	}
	for _, s := range got {
		if last[subjects[s]] != s {
			t.Fatalf("last per subject: %d is not its subject's last", s)
		}
	}

	var consumers atomic.Int32
	lag := func(n int) uint64 {
		consumers.Store(int32(n + 1))
		if n == 0 {
			return 100
		}
		return 0
	}
	r = openReader(t, testharness.NewLaggingCopy(js, lag), ledger.ReaderConfig{StallAfter: 300 * time.Millisecond})
	sameSeqs(t, "a lagging copy", readAll(t, r), seqRange(1, 300))
	// The lagging consumer was made again. A busy machine may stall the
	// next one past StallAfter too (seen under -race beside a build): it
	// is made again as well, and the read is still whole and in order.
	if n := r.Recreated(); n < 1 || consumers.Load() != int32(n)+1 {
		t.Fatalf("a lagging copy: %d recreated, %d consumers", n, consumers.Load())
	}
	r = openReader(t, testharness.NewLaggingCopy(js, func(n int) uint64 { return map[int]uint64{0: 200}[n] }),
		ledger.ReaderConfig{LastPerSubject: true, StallAfter: 300 * time.Millisecond})
	got = readAll(t, r)
	seen := map[string]uint64{}
	for _, s := range got {
		seen[subjects[s]] = s
	}
	for subj, s := range last {
		if seen[subj] != s {
			t.Fatalf("last per subject from a lagging copy: %s ends at %d, want %d (%v)", subj, seen[subj], s, got)
		}
	}
	r = openReader(t, testharness.NewLaggingCopy(js, func(int) uint64 { return 50 }), ledger.ReaderConfig{StallAfter: 100 * time.Millisecond, Recreate: 2})
	defer r.Close()
	var err error
	for n := 0; err == nil; n++ {
		_, err = r.Next(context.Background())
		if n > 300 {
			t.Fatal("no end")
		}
	}
	if !errors.Is(err, ledger.ErrReadStalled) || r.Last() != 50 {
		t.Fatalf("a copy that never catches up: %v after %d", err, r.Last())
	}
}

func TestReaderReadsToTheEnd(t *testing.T) {
	n := testharness.StartNode(t)
	testharness.OpenStore(t, n.JS)
	checkReads(t, n.JS)
}

// The same on a real three-node cluster (R3: reads of the end go through
// the stream's leader).
func TestReaderReadsToTheEndOnACluster(t *testing.T) {
	c := testharness.StartCluster(t, embedded.SyncAlways)
	js := testharness.ConnectJS(t, c.URLs())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := ledger.DefaultStoreConfig()
	cfg.Replicas = 3
	testharness.OpenStoreWhenReady(ctx, t, js, cfg)
	checkReads(t, js)
}

// A stream whose state counts messages it does not hold (a cut block
// file: the last five gone) is read to where its messages end; End says
// where its state ends. An empty read ends at once.
func TestReaderEndsWhereTheMessagesEnd(t *testing.T) {
	n := testharness.StartNode(t)
	ctx := context.Background()
	st, err := n.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "CUT", Subjects: []string{events.AllSubjects}})
	if err != nil {
		t.Fatal(err)
	}
	readerLog(t, n.JS, 20)
	for s := uint64(16); s <= 20; s++ {
		if err := st.DeleteMsg(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	r := openReader(t, n.JS, ledger.ReaderConfig{Stream: "CUT", StallAfter: 300 * time.Millisecond})
	sameSeqs(t, "cut", readAll(t, r), seqRange(1, 15))
	if r.End() != 20 || r.Last() != 15 {
		t.Fatalf("end %d, last %d", r.End(), r.Last())
	}
	sameSeqs(t, "an empty route", readAll(t, openReader(t, n.JS, ledger.ReaderConfig{Stream: "CUT", Subject: events.RouteSubjects("none")})), nil)
	if _, err := ledger.OpenReader(ctx, n.JS, ledger.ReaderConfig{Stream: "a.b", Batch: -1, Follow: true, Until: 3}); err == nil {
		t.Fatal("a bad config opened")
	}
}

// A Follow read delivers what comes until its context ends.
func TestReaderFollows(t *testing.T) {
	n := testharness.StartNode(t)
	testharness.OpenStore(t, n.JS)
	readerLog(t, n.JS, 10)
	r := openReader(t, n.JS, ledger.ReaderConfig{Follow: true, From: 5, StallAfter: 200 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		time.Sleep(500 * time.Millisecond)
		readerLog(t, n.JS, 0)
		for k := 0; k < 5; k++ {
			if _, err := n.JS.Publish(ctx, events.Subject("r9", events.ScopedIntentID("default", "r", "acct_1", "late")), []byte("late")); err != nil {
				t.Error(err)
			}
		}
	}()
	var got []uint64
	for len(got) < 11 {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.Seq)
	}
	sameSeqs(t, "follow", got, seqRange(5, 15))
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	if _, err := r.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after the last message: %v", err)
	}
}
