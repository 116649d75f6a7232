package fsm

import (
	"maps"
	"slices"
	"sync"

	lfsm "github.com/looplab/fsm"

	"github.com/settle-dev/settle/events"
)

// State is a lifecycle state of an intent.
type State string

// SafeValue marks states safe for redacted log lines (cockroachdb/redact
// keeps them): a state is the lifecycle's vocabulary, never a value from
// outside.
func (State) SafeValue() {}

// The lifecycle states. See ARCHITECTURE.md and docs/lifecycle.md.
const (
	None             State = "none" // before IntentRecorded
	Recorded         State = "recorded"
	AwaitingApproval State = "awaiting_approval"
	ApprovedState    State = "approved"
	WriteStarted     State = "write_started"
	Verifying        State = "verifying"
	Confirmed        State = "confirmed"
	Rejected         State = "rejected"
	Unknown          State = "unknown"
	Reconciling      State = "reconciling"
	InProgress       State = "in_progress"
	NotFound         State = "not_found"
	RetryClaimed     State = "retry_claimed"
	Failed           State = "failed"
	ManualAction     State = "manual_action"
	Abandoned        State = "abandoned"
)

// Transition is one edge of the lifecycle: event Type moves an intent from
// any state in From to To.
type Transition struct {
	Type events.Type
	From []State
	To   State
}

// Transitions is the whole lifecycle. It is the single source of truth:
// the looplab/fsm machine, the guards' table tests and the Mermaid diagram
// in docs/ are all generated from it.
var Transitions = []Transition{
	{events.IntentRecorded, []State{None}, Recorded},
	// IntentStarted is IntentRecorded and the first WriteStarted in one
	// message: it folds through both rows and their guards.
	{events.IntentStarted, []State{None}, WriteStarted},
	{events.ApprovalRequired, []State{Recorded, NotFound, Rejected}, AwaitingApproval},
	{events.Approved, []State{AwaitingApproval}, ApprovedState},
	{events.WriteStarted, []State{Recorded, ApprovedState, RetryClaimed}, WriteStarted},
	{events.WriteSucceeded, []State{WriteStarted}, Verifying},
	{events.WriteConfirmed, []State{WriteStarted}, Confirmed},
	{events.WriteRejected, []State{WriteStarted}, Rejected},
	{events.OutcomeUnknown, []State{WriteStarted}, Unknown},
	{events.ReconcileStarted, []State{Unknown, InProgress}, Reconciling},
	{events.CheckDeferred, []State{Reconciling, Verifying}, Unknown},
	{events.CandidateFound, []State{Reconciling}, Verifying},
	{events.ReadbackPassed, []State{Verifying}, Confirmed},
	{events.ReadbackFailed, []State{Verifying}, ManualAction},
	{events.TargetProcessing, []State{Reconciling}, InProgress},
	{events.SearchWindowElapsed, []State{Reconciling}, NotFound},
	{events.StatusNotFound, []State{Reconciling}, NotFound},
	{events.TargetFailed, []State{Reconciling}, Failed},
	{events.RetryClaimed, []State{NotFound, Rejected, ApprovedState}, RetryClaimed},
	{events.ClaimExpired, []State{RetryClaimed}, Unknown},
	{events.ManualActionRequired, []State{Recorded, Unknown, Reconciling, Verifying, InProgress, NotFound, Failed, Rejected, RetryClaimed, AwaitingApproval, ApprovedState}, ManualAction},
	{events.OperatorConfirmed, []State{ManualAction, Abandoned}, Confirmed},
	{events.OperatorReleased, []State{ManualAction}, Recorded},
	{events.Abandoned, []State{Recorded, AwaitingApproval, ApprovedState, Rejected, NotFound, Failed, ManualAction}, Abandoned},
}

// AllStates lists every state, sorted, None first.
func AllStates() []State {
	seen := map[State]bool{}
	for _, t := range Transitions {
		seen[t.To] = true
		for _, f := range t.From {
			seen[f] = true
		}
	}
	delete(seen, None)
	return append([]State{None}, slices.Sorted(maps.Keys(seen))...)
}

// Terminal reports whether no event can follow s. Abandoned is not:
// cancellation is not rollback, and a write that later proves executed is
// recorded on it (OperatorConfirmed).
func (s State) Terminal() bool { return s == Confirmed }

var lfsmEvents = func() lfsm.Events {
	var out lfsm.Events
	for _, t := range Transitions {
		src := make([]string, len(t.From))
		for i, f := range t.From {
			src[i] = string(f)
		}
		out = append(out, lfsm.EventDesc{Name: string(t.Type), Src: src, Dst: string(t.To)})
	}
	return out
}()

// newMachine returns a looplab/fsm machine in state s. It has no
// callbacks: looplab/fsm deadlocks when a callback re-enters the machine,
// and folding must stay pure anyway.
func newMachine(s State) *lfsm.FSM {
	return lfsm.NewFSM(string(s), lfsmEvents, nil)
}

// machines recycles callback-free machines: building one costs more than
// folding an event. A machine taken from the pool is SetState to the
// intent's state before use, so no state leaks between intents.
var machines = sync.Pool{New: func() any { return newMachine(None) }}

func withMachine(s State, f func(m *lfsm.FSM) bool) bool {
	m := machines.Get().(*lfsm.FSM)
	m.SetState(string(s))
	defer machines.Put(m)
	return f(m)
}
