// Package apiclient is the CLI's side of settle's HTTP API: one request
// with the bearer token from an environment variable, and an answer's
// RFC 9457 problem turned into an error with a hint of what to do.
//
// It must never import: events, fsm, adapter/..., ledger, producer, consumers/..., projector, service, api, mcp, node, cmd/..., embedded, fakeapi, testharness.
package apiclient
