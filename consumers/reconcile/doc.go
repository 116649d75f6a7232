// Package reconcile settles what a write left unknown, without a second
// write: a durable pull consumer per route wakes the intents that wait,
// and each step loads and folds the intent (ledger), asks fsm.Decider what
// is next and carries it out — a read-only search or status query (0, 1
// or many candidates, waiting out eventual consistency), a readback of
// the object found, at most one CAS-claimed retry with the same
// idempotency key (made by the worker's own producer.Writer), or a
// hand-off to a human with the evidence. The events of the steps that
// only read (ReconcileStarted, the query's conclusion, the readback's) are
// appended together as one unit, CAS'd on the last event read; a claim is
// appended before its write (reconciler.go). An intent held after an accepted
// log loss is never written for (hold.go, fsm.LossHeld). The intents one fetch wakes share their
// searches and are stepped Config.Steps at a time (run.go).
//
// reconcile imports ledger, producer, fsm, adapter, events and nats.go.
// It must never import: consumers/audit, consumers/receipts, projector, service, api, mcp, node, cmd/..., testharness, fakeapi.
package reconcile
