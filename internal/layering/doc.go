// Package layering holds the check of settle's import direction (a test,
// run by make lint and by go test): every package's doc.go says what it
// must never import, in a sentence that starts "It must never import:"
// and lists module-relative packages ("producer", "consumers/..." for a
// subtree) or import paths ("testing", "github.com/nats-io/..."), and the
// check fails on any package whose dependencies, direct or not, include
// one of them, naming the chain that leads there. A second check keeps
// make fuzz naming every fuzz target of the module.
//
// It must never import: adapter/..., api, cmd/..., consumers/..., embedded, events, examples/..., fakeapi, fsm, ledger, mcp, node, producer, projector, testharness.
package layering
