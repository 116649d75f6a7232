// Package fsm owns the intent lifecycle: the transition table (on
// looplab/fsm), the guards that the table alone cannot express (attempt
// order, same idempotency key, retry budget, approval, claim lease), and
// Fold, which rebuilds an intent from its history and refuses an illegal
// history with an error naming the event, its version and the state.
//
// Contract: Fold and Apply are deterministic and pure. They read only the
// events (their recorded times, never the wall clock), do no I/O, and the
// same history always folds to the same Intent, so any reader (worker,
// projector, audit) can replay the log and agree. The looplab/fsm machine is
// built without callbacks (a callback that re-enters the machine deadlocks
// it); an Intent is restored by folding, never by mutating the machine.
// Intents are not safe for concurrent mutation; fold a private copy.
//
// fsm imports events and looplab/fsm only. It must never import a NATS
// package or any settle package that does I/O.
package fsm
