// Package intenttext renders the API's intents for a terminal: the table
// of settle intents list and the page of settle intents show, which
// carries what the JSON has that a reader needs — the reason, the codes
// of the attempts, the next check, the deferral and the last error.
//
// It must never import: events, fsm, adapter/..., ledger, producer, consumers/..., projector, service, api, mcp, node, cmd/..., embedded, fakeapi, testharness.
package intenttext
