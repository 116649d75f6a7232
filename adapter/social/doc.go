// Package social is the adapter for a social network's posting API: it
// creates posts (Write), lists an account's recent posts (Search), reads one
// back (Get) and probes a post's public page without credentials (Probe).
// It owns the route's payload shape, {"body", "assets"}, and its canonical
// form (NormalizePayload), which Search and Get rebuild from what the API
// returns so that a readback's canon/v1 hash can equal the intent's.
//
// Every HTTP call goes through adapter.NewRequest and adapter.Do: one call is
// one attempt, never retried here, and failures come back as
// *adapter.CallError. The bearer token is sent only in the Authorization
// header of API calls and never appears in an error.
//
// social imports adapter and events only (plus the standard library).
// It must never import: fsm, ledger, producer, consumers/..., projector, api,
// mcp, cmd/..., adapter/booking, adapter/payment, adapter/httproute, fakeapi,
// testharness, github.com/nats-io/....
package social
