// Package reconcile settles what a write left unknown, without a second
// write: a durable pull consumer per route wakes the intents that wait,
// and each step loads and folds the intent (ledger), asks fsm.Decider what
// is next (fsm's package doc states the rules; nothing here decides) and
// carries it out — a read-only search or status query (0, 1
// or many candidates, waiting out eventual consistency), a readback of
// the object found, at most one CAS-claimed retry with the same
// idempotency key (made by the worker's own producer.Writer), or a
// hand-off to a human with the evidence. The events of the steps that
// only read (ReconcileStarted, the query's conclusion, the readback's) are
// appended together as one unit, CAS'd on the last event read; a claim is
// appended before its write (reconciler.go). An intent held after an
// accepted log loss is never written for (hold.go, fsm.LossHeld).
//
// # Waking
//
// Each configured route has one durable pull consumer
// (settle-reconciler-<route>, filter settle.intents.<route>.*, explicit
// ack) shared by every worker that has the route; a worker that lacks a
// route never sees its intents, so processes with different route files
// each settle what they can and drop nothing (an intent whose frozen
// strategy this worker's adapter cannot serve is Nak'ed for another). An
// event that is not its intent's latest is acked at once; the latest is
// the intent's wake-up: acked after a step that appended (the new event
// carries on), NakWithDelay'ed while the intent waits (capped at MaxWait),
// acked when nothing is left to do. Pending messages are consumer state,
// replicated with the stream, so waiting survives any restart with no
// second store, and a worker that dies mid-step leaves its message to be
// redelivered. The delay is only a hint: every decision re-reads its
// times from the log (plus the clock-skew allowance).
//
// A worker fetches Batch messages; the intents they wake that search one
// account plan a shared listing (windows merged, listed once, each
// judging its window by when that listing started), and are stepped Steps
// at a time, which also bounds the concurrent calls to the external API.
// A fetch's units wait for each other briefly so that they share a group
// commit. A route consumer that disappears is made again (counted in the
// metrics); one that cannot be made yet is tried again, each request
// bounded.
//
// The start-up sweep (sweep.go, Config.Sweep: one reconciler per process)
// reads the last event of every intent of its routes to the stream's end
// and steps every intent a reconciler may still act on, keeping those that
// must wait in a schedule bounded by SweepMax: a message can be gone while
// its intent still needs a step (events lost, a consumer recreated).
//
// While its store refuses appends (clock off, disk full, log verifying or
// damaged: ledger.Store.Blocked) a reconciler fetches nothing, and a step
// that meets the refusal hands its message back at once, so another
// process steps the intent. The history cache is an LRU bounded in bytes
// (CacheBytes, cache.go) that drops intents no reconciler will act on
// again.
//
// reconcile imports ledger, producer, fsm, adapter, events and nats.go.
// It must never import: consumers/audit, consumers/receipts, projector, service, api, mcp, node, cmd/..., testharness, fakeapi.
package reconcile
