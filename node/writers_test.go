package node

import (
	"context"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/testharness"
)

// knownAt is views that applied the given events.
type knownAt []projector.KnownEvent

func (k knownAt) Checkpoint(context.Context) (uint64, error) { return uint64(len(k)), nil }
func (k knownAt) EventsBetween(_ context.Context, from, to uint64, fn func(projector.KnownEvent) error) error {
	for _, e := range k {
		if e.Seq >= from && e.Seq <= to {
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func header(appendID, msgID string) nats.Header {
	return nats.Header{ledger.AppendIDHeader: {appendID}, jetstream.MsgIDHeader: {msgID}}
}

// A writer that appends again after another one has is a second writer
// (on a log only one process may write); the events the views applied at
// sequences that now hold other events are named with their intents.
// Writers that follow each other (restarts) are not.
func TestWriterCheckNamesASecondWriterAndTheReplacedEvents(t *testing.T) {
	x := events.ScopedIntentID("default", "r", "acct", "x")
	y := events.ScopedIntentID("default", "r", "acct", "y")
	subj := func(id string) string { return events.SubjectPrefix + ".r." + id }

	restarts := newWriterCheck(t.Context(), nil, 0)
	for seq, w := range []string{"p1-aa", "p1-aa", "p2-bb", "p3-cc", "p3-cc"} {
		restarts.visit(uint64(seq+1), subj(x), header(w+".0123", x+":1"))
	}
	if rep := restarts.report(); rep.Found() || len(rep.Writers) != 3 {
		t.Fatalf("writers one after the other: %+v", rep)
	}

	views := knownAt{{Seq: 2, IntentID: x, Version: 2, Type: "WriteStarted"}, {Seq: 3, IntentID: x, Version: 3, Type: "OutcomeUnknown"}}
	two := newWriterCheck(t.Context(), views, 0)
	two.visit(1, subj(x), header("p1-aa.01", x+":1"))
	two.visit(2, subj(y), header("p2-bb.02", y+":1")) // B's event where A's v2 was
	two.visit(3, subj(x), header("p1-aa.03", x+":3"))
	two.visit(4, subj(y), header("p2-bb.04", y+":2"))
	rep := two.report()
	if !rep.Found() || rep.NClashes != 2 || rep.NReplace != 1 || len(rep.Intents) != 1 || rep.Intents[0] != x {
		t.Fatalf("two writers at once: %+v", rep)
	}
	msg := rep.Error()
	for _, want := range []string{"writer p1-aa appended at sequence 3 after writer p2-bb had", x + " v2 WriteStarted (seq 2)"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("%q does not say %q", msg, want)
		}
	}
	accepted := newWriterCheck(t.Context(), nil, 4)
	accepted.visit(1, subj(x), header("p1-aa.01", x+":1"))
	accepted.visit(2, subj(y), header("p2-bb.02", y+":1"))
	accepted.visit(3, subj(x), header("p1-aa.03", x+":3"))
	if accepted.report().Found() {
		t.Fatal("traces an operator accepted were reported again")
	}
}

// A node on an embedded store that two processes appended to at once
// does not write: /readyz names the log, Started returns the damage
// naming both writers; with --accept-log-loss it starts, and does not
// name them again.
func TestANodeRefusesALogTwoWritersWrote(t *testing.T) {
	testharness.SkipShort(t, "an embedded nats-server")
	data := t.TempDir()
	srv := startStore(t, data)
	js := testharness.JetStreamOf(t)(srv.Connect())
	if _, err := ledger.OpenStore(t.Context(), js, ledger.DefaultStoreConfig()); err != nil {
		t.Fatal(err)
	}
	x := events.ScopedIntentID("default", "social_post", "acct", "x")
	for i, w := range []string{"p1-aa", "p2-bb", "p1-aa"} {
		m := &nats.Msg{Subject: events.SubjectPrefix + ".social_post." + x, Data: []byte("{}"), Header: header(w+".0"+string(rune('0'+i)), x+":"+string(rune('1'+i)))}
		if _, err := js.PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	srv.Stop()
	var logs testharness.SyncBuffer
	cfgFor := func(accept bool) func(*Config) {
		return func(c *Config) { c.Data, c.AcceptLogLoss = data, accept }
	}
	api := newFakeSocial(t)
	n := openNode(t, api, &logs, cfgFor(false))
	err := startedOrDamaged(t, n)
	if !errors.Is(err, ledger.ErrLogDamaged) || !strings.Contains(err.Error(), "writer p1-aa appended at sequence 3 after writer p2-bb had") {
		t.Fatalf("a log two writers wrote: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "TWO WRITERS") {
		t.Fatalf("no loud line:\n%s", logs.String())
	}
	closeNode(n)
	n = openNode(t, api, &logs, cfgFor(true))
	if err := startedOrDamaged(t, n); err != nil {
		t.Fatalf("accepted: %v", err)
	}
	closeNode(n)
	n = openNode(t, api, &logs, cfgFor(false))
	if err := startedOrDamaged(t, n); err != nil {
		t.Fatalf("after the acceptance: %v", err)
	}
	closeNode(n)
}

// Every reconciler of every node has a worker name of its own, even for
// two processes of one host name and pid (containers of one image run as
// pid 1): a lease or claim held under a name is its holder's alone. Two
// nodes of one test process share both, as such containers would.
func TestWorkerNamesAreUniqueAcrossProcessesOfOneHostAndPid(t *testing.T) {
	api := newFakeSocial(t)
	var logs testharness.SyncBuffer
	seen := map[string]bool{}
	var nodes []*Node
	for range 2 {
		n := testNode(t, api, &logs, nil)
		if len(n.recs) != 2 {
			t.Fatalf("%d reconcilers, want 2", len(n.recs))
		}
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		for _, r := range n.recs {
			if w := r.Worker(); seen[w] {
				t.Fatalf("worker name %q used twice (%v)", w, seen)
			} else {
				seen[w] = true
			}
		}
	}
	for _, n := range nodes {
		for _, r := range n.recs {
			if w := r.Worker(); !strings.Contains(w, n.writer) {
				t.Fatalf("worker name %q does not hold the process's writer id %q", w, n.writer)
			}
		}
	}
}
