// Package routes embeds the example route files (*.yaml in this
// directory), so that `settle demo`, the tests, the simulation and the
// benchmarks compile the very files a user copies. README.md here
// describes each file.
//
// It must never import: fsm, adapter/..., ledger, producer, consumers/..., projector, service, api, mcp, node, cmd/..., embedded, fakeapi, testharness.
package routes
