// Command webhook-receiver is an endpoint for settle serve --webhook: it
// checks each request's Settle-Signature (HMAC-SHA256 over the timestamp
// and the body, as Stripe signs its webhooks) with Verify, written here
// from the documented scheme and nothing of settle's, and applies
// each settlement once — one row in its own SQLite database, keyed by
// the event id in the same transaction, so a delivery that comes again
// (settle delivers at least once) changes nothing. See README.md.
//
// It imports settle's consumers/receipts (the Deduper) and nothing of
// settle's webhook sender; nothing imports it.
// It must never import: consumers/webhook, fsm, adapter/..., ledger, producer,
// consumers/reconcile, consumers/audit, projector, api, mcp, cmd/...,
// embedded, fakeapi, testharness, testing.
package main
