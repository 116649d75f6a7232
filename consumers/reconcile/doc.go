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
// # What a step decides, by state
//
//   - recorded (its writer died before starting it): started after
//     RecordedGrace; expired: Abandoned.
//   - write_started past its deadline plus the skew:
//     OutcomeUnknown{attempt_deadline_passed}.
//   - rejected and retryable: resent after a backoff (equal jitter,
//     deterministic per intent and attempt) and not before the API's
//     retry_after, inside resend_budget.
//   - unknown or in_progress when due: ReconcileStarted{worker, lease,
//     strategy}; a proven write is read back by its known external id.
//   - reconciling whose lease expired: CheckDeferred{lease_expired}.
//   - search: the adapter's read-only listing by the account's immutable id
//     over the window around the attempts (± skew), partial listings
//     completed with Get; one exact match → CandidateFound; none while the
//     window is open for the listing's start → CheckDeferred (doubling
//     recheck); none for a listing started after it closed →
//     SearchWindowElapsed (clearing the attempts only when the search is
//     authoritative) or a near-match hand-off.
//   - status: completed with an id → CandidateFound{status}; processing →
//     TargetProcessing with backoff up to a deadline; failed → TargetFailed;
//     not found before the reflection delay → CheckDeferred, after it →
//     StatusNotFound.
//   - verifying: Get the object and, where the route checks its url, probe
//     the live page without credentials; every declared check passing →
//     ReadbackPassed with the receipt, else ReadbackFailed naming the failed
//     checks. A Get or probe that fails is a read failure
//     (CheckDeferred{read_failed}), never a failed check.
//   - not_found, an approved retry, a due resend: RetryClaimed (lease within
//     the key's validity and the expiry), then only the owner writes, with
//     the same key and the recorded request; a claim that expires unused →
//     ClaimExpired → unknown, never written straight away.
//
// reconcile imports ledger, producer, fsm, adapter, events and nats.go.
// It must never import: consumers/audit, consumers/receipts, projector, service, api, mcp, node, cmd/..., testharness, fakeapi.
package reconcile
