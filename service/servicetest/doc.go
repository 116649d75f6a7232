// Package servicetest is the test kit of settle's transports (package
// api's and package mcp's tests, and the service's): one env of real
// parts under a service — an embedded nats-server with a t.TempDir()
// store (testharness), the fake social API over real HTTP that counts
// effects (fakeapi), routes over it, the ledger store, a producer, a
// running projector and the service over them — with the manual clock,
// reconcilers that step intents on it, and reads of the log.
//
// Only tests import it: the settle binary never links it.
//
// It must never import: api, mcp, cmd/....
package servicetest
