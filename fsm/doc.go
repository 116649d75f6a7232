// Package fsm owns the intent lifecycle: the transition table (on
// looplab/fsm), the guards that the table alone cannot express (attempt
// order, same idempotency key, retry budget, approval, claim lease, and
// for intents recorded with their capabilities the safety rules: no retry
// after a proven write, a dedup proof for every retry that covers its
// attempt, no claim before the API's Retry-After, a retry sending the
// request its first attempt recorded, expiry on every write, no
// pre-existing (unless our marker names it), foreign-marker or
// other-account candidate, every declared readback check), Fold, which rebuilds an intent from its history and
// refuses an illegal history with an error naming the event, its version
// and the state (FoldCode is its stable code), and the decision function
// (Decider), the only place that decides what happens to an intent next;
// and the two rules every reader asks: whether an intent is settled
// (settled.go: Settled, Reconciled) and whether it is held after an
// accepted log loss (hold.go: LossHeld, LossHandoff).
// The fold carries everything a view of the intent needs (UnknownSince
// included), so a reader folds once.
//
// Contract of Decider: Next and the Conclude functions are pure and
// deterministic (their inputs are the folded intent, the frozen
// capabilities, the observations a caller made and the time it passes);
// every event they return is accepted by Apply.
//
// Contract: Fold and Apply are deterministic and pure. They read only the
// events (their recorded times, never the wall clock), do no I/O, and the
// same history always folds to the same Intent, so any reader (worker,
// projector, audit) can replay the log and agree. The looplab/fsm machine is
// built without callbacks (a callback that re-enters the machine deadlocks
// it); an Intent is restored by folding, never by mutating the machine.
// Intents are not safe for concurrent mutation; fold a private copy.
//
// fsm imports events and looplab/fsm only.
// It must never import: adapter/..., ledger, producer, consumers/...,
// projector, api, mcp, cmd/..., embedded, fakeapi, testharness,
// github.com/nats-io/....
package fsm
