// Package booking is the adapter for a booking service that changes an
// existing booking (seed 001): Write sends one PUT carrying the business
// request id, the intent's Idempotency-Key and the version the change was
// approved against; Status asks the service for its own record of that
// request id; Get reads the booking's current state.
//
// It owns the route's payload shape, {"booking_id", "expected_version",
// "change"}, and its canonical form (NormalizePayload). Status rebuilds
// that shape from what the service says it applied, so the reconciler can
// prove that the applied change is the approved one by its canon/v1 hash.
//
// Outcomes it classifies: a 409 version_conflict is a definite rejection
// (nothing applied, nothing overwritten); a 202 "processing" and a failure
// that left partial effects are unknown, to be settled by the status query;
// a lost or reset response is unknown (adapter.Do). The idempotency key is
// always the intent's key, identical on every attempt; the attempt id only
// travels as a correlation header (X-Settle-Attempt, X-Request-Id).
//
// Every HTTP call goes through adapter.NewRequest and adapter.Do: one call
// is one attempt, never retried here. The bearer token is sent only to the
// configured API origin and never appears in an error.
//
// booking imports adapter and events only (plus the standard library).
// It must never import: fsm, ledger, producer, consumers/..., projector, api,
// mcp, cmd/..., adapter/social, adapter/payment, adapter/httproute, fakeapi,
// testharness, github.com/nats-io/....
package booking
