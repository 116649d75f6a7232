// Package receipts is what a downstream service links to act on settle's
// receipts (announce a post, ship an order): Subscribe gives it a durable,
// route- and type-filtered consumer of the log that calls its handler at
// least once per receipt with the event's stable id, and Deduper records
// that id in the same SQL transaction as the effect, so redeliveries and
// duplicates are no-ops (examples/downstream).
//
// A downstream service that imports it links the vocabulary and nats.go,
// nothing of settle's write path.
//
// receipts imports events, nats.go and database/sql.
// It must never import: fsm, adapter/..., ledger, producer, consumers/reconcile, consumers/audit, projector, api, mcp, node, cmd/..., testharness, fakeapi.
package receipts
