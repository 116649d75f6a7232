// Package adaptertest holds what the tests of the hand-written adapters
// (adapter/booking, adapter/payment, adapter/social) share, so that each
// rule is written once: the fuzz property of a payload normaliser (errors
// name a payload field; the output is canonical and normalises to
// itself), a write request of one intent, and the check that a write
// refused before sending reaches no server.
//
// It is test support: only _test files import it.
//
// adaptertest imports adapter and events only.
// It must never import: fsm, ledger, producer, consumers/..., projector, api, mcp, cmd/..., fakeapi, testharness, github.com/nats-io/....
package adaptertest
