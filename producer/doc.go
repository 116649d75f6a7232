// Package producer is settle's write path. Execute records an intent and
// makes its write as fsm.Decider says: intent first, WriteStarted
// acknowledged on the log, then at most one external call, then the
// classified outcome. Its Writer (write.go) carries out one write step;
// a reconciler makes its own Writer for the write steps it takes. An
// intent held after an accepted log loss is never recorded anew or
// written for (hold.go). The operator actions (Approve, Abandon, Resolve*) and
// the tool wrapper for agents (Call: keys from task and step) are
// appends through the same checks.
//
// # Execute
//
//  1. Validate: the one validation of a request (the API and mcp parse
//     only what is theirs); errors wrap ErrInvalidRequest with the
//     *events.FieldError naming the field. Normalise and hash the
//     payload, derive ids, refuse a record over an event's limit
//     (ErrPayloadTooLarge) before anything is recorded or written.
//  2. Record: a new intent is recorded without a read, the CAS "subject
//     empty" being the check; a resubmission fails it and costs one read.
//     The same request id with another payload, account or parent is
//     ErrPayloadMismatch, nothing written; with the same one, the stored
//     intent (Replayed) after whatever the decider says next. A route that
//     knows its credential's identity checks the account first. The first
//     message is IntentStarted when the decider's first step is the write,
//     else IntentRecorded with its first step in one unit.
//  3. Write: at most one WriteStarted (CAS); only its winner calls. A
//     route's adapter that is an adapter.Preparer renders the request
//     before the append and the event records it; every attempt is sent
//     from the recorded request, so a retry sends the first attempt's bytes.
//  4. Call, bounded by the attempt deadline counted from before the
//     append, then the outcome, appended even if the caller's context was
//     cancelled: not sent (observed with httptrace, never guessed) →
//     WriteRejected, retryable unless sending again cannot help; a
//     definite 4xx → WriteRejected (429 and 425 retryable with the API's
//     retry_after; 408 and 409 unknown; every 5xx but 501 unknown); "key
//     already used" → OutcomeUnknown whatever class the adapter gave it;
//     success → WriteSucceeded (readback pending) or WriteConfirmed when the
//     route trusts responses; written and then timeout, reset, 502/504 or
//     cancelled → OutcomeUnknown. An outcome that cannot be appended
//     (including one that lost its CAS to a reconciler) is
//     ErrOutcomeNotRecorded, and the intent is never driven again by this
//     call: the deadline makes it unknown and reconciliation finds the
//     effect.
//  5. Result: the intent as the log holds it — its events, the stream
//     sequence of the last (Result.LastSeq) and their fold — which the
//     transports answer from without reading again.
//
// A held intent (a hold marker on its subject, or Config.Hold) is never
// written for: it is handed off for its loss when its state allows, or
// answered ErrIntentHeld (*HeldError, naming the loss) when what is left
// of it cannot be folded; a history that cannot be folded with no hold is
// ErrHistoryUnreadable. An operator action appends to the intent as the
// caller read it (Load: one read, one fold): an intent that moved since
// is ledger.ErrConflict, a state that forbids the action ErrNotAllowed.
//
// The log itself (stream, CAS appends, lost acks, group commit, Load) is
// package ledger's; routes and their policy are package adapter's.
//
// producer imports ledger, fsm, adapter and events.
// It must never import: consumers/..., projector, service, api, mcp, node, cmd/..., testharness, fakeapi.
package producer
