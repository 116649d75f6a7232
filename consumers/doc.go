// Package consumers holds settle's JetStream readers: the reconciler that
// settles unknown results without a second write (read-only search or
// status query, 0/1/many candidates, waiting out eventual consistency,
// readback, at most one CAS-claimed retry with the same idempotency key),
// the receipt subscription for downstream services, and audit replay.
//
// consumers imports events, fsm, adapter, producer, projector (the audit
// compares the projection with the fold) and nats.go. It must never import
// api, cmd or testharness (tests may).
package consumers
