package api

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/service"
)

// consoleFixture is one intent in each state the console shows, made
// through the real producer, reconciler and operator actions.
type consoleFixture struct {
	confirmed, settled, rejected, unknown, manual, readFailing, approval, abandoned string
	// start is the clock when the first intent was made.
	start time.Time
}

// ids lists the fixture's intents with the state each is in.
func (f *consoleFixture) ids() map[string]fsm.State {
	return map[string]fsm.State{
		f.confirmed: fsm.Confirmed, f.settled: fsm.Confirmed, f.rejected: fsm.Rejected, f.unknown: fsm.Unknown,
		f.manual: fsm.ManualAction, f.readFailing: fsm.ManualAction, f.approval: fsm.AwaitingApproval,
		f.abandoned: fsm.Abandoned,
	}
}

// newConsoleFixture makes, on route social_post unless said: a confirmed
// write; a lost response settled to confirmed by reconciliation; a
// rejected write; a lost response still unknown; two exact duplicates
// handed to a human (duplicate_exact_matches); on social_approval, one
// intent awaiting approval and one abandoned by an operator; and last
// (its failing reads would fail the others' searches) a lost response
// whose searches keep failing, handed to a human (read_failing).
func newConsoleFixture(t *testing.T, e *env) *consoleFixture {
	t.Helper()
	ctx := context.Background()
	f := &consoleFixture{start: e.Clock.Now()}
	exec := func(route, rid, body string) *producer.Result {
		t.Helper()
		res, err := e.Prod.Execute(ctx, producer.Request{Route: route, Account: "acct_1", RequestID: rid,
			Payload: json.RawMessage(`{"body":"` + body + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	want := func(id string, st fsm.State, route string) {
		t.Helper()
		if i := e.intent(route, id); i.State != st {
			t.Fatalf("%s: %s, want %s", id, i.State, st)
		}
	}
	f.confirmed = exec("social_post", "fx-confirmed", "written, then read back").IntentID
	if i := e.Settle("social_post", f.confirmed); i.State != fsm.Confirmed {
		t.Fatalf("confirmed: %s", i.State)
	}

	e.Social.Next(fakeapi.CommitThenDrop())
	f.settled = exec("social_post", "fx-settled", "response lost, then found").IntentID
	want(f.settled, fsm.Unknown, "social_post")
	e.Clock.Advance(2 * time.Minute)
	if i := e.Settle("social_post", f.settled); i.State != fsm.Confirmed {
		t.Fatalf("settled: %s", i.State)
	}

	e.Social.Next(fakeapi.Status(400))
	f.rejected = exec("social_post", "fx-rejected", "refused").IntentID
	want(f.rejected, fsm.Rejected, "social_post")

	f.manual = e.manualIntent("fx-manual")

	e.Social.Next(fakeapi.CommitThenDrop())
	f.unknown = exec("social_post", "fx-unknown", "response lost").IntentID
	want(f.unknown, fsm.Unknown, "social_post")

	approval := exec("social_approval", "fx-approval", "needs approval")
	f.approval = approval.IntentID
	want(f.approval, fsm.AwaitingApproval, "social_approval")
	f.abandoned = exec("social_approval", "fx-abandoned", "never to be written").IntentID
	if _, _, err := e.Svc.Act(ctx, service.Caller{Name: "bob", Tenant: "default", Dev: true}, f.abandoned,
		service.Action{Kind: service.ActionAbandon, Reason: "not wanted any more", Operator: "bob"}); err != nil {
		t.Fatal(err)
	}
	want(f.abandoned, fsm.Abandoned, "social_approval")

	faults := make([]fakeapi.ReadFault, 400)
	for k := range faults {
		faults[k] = fakeapi.ReadError500
	}
	e.Social.FailLists(faults...)
	e.Social.Next(fakeapi.CommitThenDrop())
	f.readFailing = exec("social_post", "fx-read-failing", "searches fail").IntentID
	if i := e.Settle("social_post", f.readFailing); i.State != fsm.ManualAction || i.ManualReason != events.ReasonReadFailing {
		t.Fatalf("read failing: %s %s", i.State, i.ManualReason)
	}
	if d := e.Clock.Now().Sub(f.start); d >= time.Hour {
		t.Fatalf("the fixture took %s of the clock: not all in the last hour", d)
	}
	e.CatchUp()
	return f
}
