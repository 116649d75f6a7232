// Package embedded runs nats-server with JetStream inside the settle
// process: the default deployment (`settle serve`, `settle demo`) and the
// server every test and benchmark starts. It owns the server options,
// including the durability mode (fsync on every write or the server
// default), a client listener with users and per-user publish/subscribe
// permissions (serve --nats-listen: read-only downstream readers), and
// 3-node clusters on loopback.
//
// embedded imports nats-server and nats.go only.
// It must never import: events, fsm, adapter/..., ledger, producer,
// consumers/..., projector, api, mcp, node, cmd/..., fakeapi, testharness.
package embedded
