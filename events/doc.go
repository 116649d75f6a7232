// Package events is settle's vocabulary: the event types of the intent
// lifecycle, the versioned JSON envelope they travel in, the strict decoder,
// the ids (intent, idempotency key, attempt) and their validation, the NATS
// subject and Nats-Msg-Id helpers, and the canon/v1 payload hash.
//
// events owns no I/O. It must never import a NATS package, the fsm, or any
// other settle package: everything else imports it.
package events
