// Package payment is the adapter for a Stripe-style payments API (seed 004):
// Write creates a charge with one POST carrying the intent's
// Idempotency-Key, Status looks the charge up by that key, Get reads a
// charge back.
//
// It owns the route's payload shape, {"amount", "currency", "customer",
// "description"}, and its canonical form (NormalizePayload), which Status
// and Get rebuild from the charge the API returns so that the reconciler
// can compare canon/v1 hashes.
//
// Outcomes it classifies, following the Idempotency-Key contract: 409 means
// a request with the same key is still in flight, so the outcome is
// unknown (never a rejection); 422 means the key was used with another
// body, a definite rejection; a lost or reset response is unknown
// (adapter.Do).
//
// Every HTTP call goes through adapter.NewRequest and adapter.Do: one call
// is one attempt, never retried here. The bearer token is sent only to the
// configured API origin and never appears in an error.
//
// payment imports adapter and events only (plus the standard library).
// It must never import: fsm, ledger, producer, consumers/..., projector, api,
// mcp, cmd/..., adapter/social, adapter/booking, adapter/httproute, fakeapi,
// testharness, github.com/nats-io/....
package payment
