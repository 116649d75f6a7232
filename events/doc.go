// Package events is settle's vocabulary: the event types of the intent
// lifecycle, the versioned JSON envelope they travel in, the strict decoder,
// the ids (intent, idempotency key, attempt) and their validation, the NATS
// subject and Nats-Msg-Id helpers, the canon/v1 payload hash, and the
// decode codes (DecodeCode, Unreadable) every reader of the log reports
// an unreadable event with.
//
// events owns no I/O and imports nothing of settle: everything else
// imports it.
// It must never import: fsm, adapter/..., ledger, producer, consumers/...,
// projector, api, mcp, cmd/..., embedded, fakeapi, testharness,
// github.com/nats-io/....
package events
