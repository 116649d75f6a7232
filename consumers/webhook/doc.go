// Package webhook pushes settlements to an HTTP endpoint, as Stripe pushes
// its events: each settlement (an intent confirmed, rejected, failed,
// handed to a human or abandoned) is POSTed as JSON carrying its stable
// event id, signed with HMAC-SHA256 over the timestamp and the body
// (header Settle-Signature: t=<unix>,v1=<hex>), from a durable JetStream
// consumer that acks an event only after the endpoint answered 2xx. An
// endpoint that answers anything else, or not in time, gets the event
// again with exponential backoff and jitter, without end: delivery is at
// least once, and a receiver deduplicates by the event id
// (examples/webhook-receiver).
//
// The body is settle.webhook/v1 JSON: the event id (<intent_id>:<version>),
// the type, the intent's names from its first event, and the event as the
// log holds it — the same bytes on every attempt; only the signature's
// timestamp changes. The consumer (settle-webhook) is shared by every
// serve; max ack pending bounds what is taken and not delivered; a new
// consumer starts after the log's last event, or from the first. The
// delay after a failure is at least the answer's Retry-After. The secret
// prints as [redacted] and log lines carry the endpoint without its query
// (docs/webhooks.md).
//
// Deliverer is the sender (settle serve --webhook runs one); Sign and
// Verify are the signature scheme, for receivers written in Go.
//
// webhook imports events and nats.go; a deliverer links nothing of
// settle's write path.
// It must never import: fsm, adapter/..., ledger, producer, consumers/reconcile, consumers/audit, consumers/receipts, projector, api, mcp, cmd/..., embedded, testharness, fakeapi.
package webhook
