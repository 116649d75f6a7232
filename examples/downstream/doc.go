// Command downstream is a small service that acts on settle receipts: for
// every confirmed write of a route it writes one "announcement" row into
// its own SQLite database and prints it. A receipt delivered again (after a
// crash, an unconfirmed ack, a second consumer) is recognised by its event
// id and changes nothing. See README.md.
//
// It imports settle's consumers/receipts and events; nothing imports it.
// It must never import: fsm, adapter/..., ledger, producer,
// consumers/reconcile, consumers/audit, projector, api, mcp, cmd/...,
// embedded, fakeapi, testharness, testing.
package main
