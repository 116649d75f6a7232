// Package events is settle's vocabulary: the event types of the intent
// lifecycle, the versioned JSON envelope they travel in, the strict decoder,
// the ids (intent, idempotency key, attempt) and their validation, the NATS
// subject and Nats-Msg-Id helpers, the canon/v1 payload hash, and the
// decode codes (DecodeCode, Unreadable) every reader of the log reports
// an unreadable event with.
//
// # Envelope
//
// An event is JSON: schema, event_id, intent_id, version, type, at,
// actor, attempt_id, data. version counts an intent's messages (1, 2,
// ..., no gap) and event_id is the Nats-Msg-Id, <intent_id>:<version>.
// Encode refuses an event over MaxEventSize (the decoder's limit too).
// Decode is strict — an unknown field, type or schema, a missing or
// malformed field is refused with a *DecodeError matching ErrUnknownSchema,
// ErrUnknownType, ErrMissingField, ErrBadID, ErrInvalidField or
// ErrMalformed — and never panics (fuzzed). IntentStarted holds an
// IntentRecorded's data and the first WriteStarted's (recorded, started)
// in one message; Recorded and Started read either form.
//
// # Ids
//
// Every id is derived, so any process computes the same one:
//
//	intent_id        in_ + base32(sha256) over the length-prefixed tenant,
//	                 route, account and request id (ScopedIntentID)
//	idempotency key  sk_ + base32(sha256) of the intent id: the same on
//	                 every attempt (IdempotencyKey)
//	attempt_id       <intent_id>.a<n> (AttemptID)
//	event_id         <intent_id>:<version> (MsgID)
//	tool request id  ToolKey(task, step[, payload digest]) for agents
//
// Tenants and routes are tokens [a-z0-9_-]{1,64}; request ids, accounts
// and parents are printable UTF-8 up to 256 bytes, hashed before they
// reach a subject. A FieldError names the field a value was refused for.
//
// events owns no I/O and imports nothing of settle: everything else
// imports it.
// It must never import: fsm, adapter/..., ledger, producer, consumers/...,
// projector, api, mcp, cmd/..., embedded, fakeapi, testharness,
// github.com/nats-io/....
package events
