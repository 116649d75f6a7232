// Package embedded runs nats-server with JetStream inside the settle
// process: the default deployment (`settle serve`, `settle demo`) and the
// server every test and benchmark starts. It owns the server options: the
// durability mode (Durability), a client listener with users and per-user
// publish/subscribe permissions (serve --nats-listen: read-only downstream
// readers), bounded JetStream storage, and 3-node clusters on loopback.
//
// The server's own warnings and errors go to settle's log; a store it
// cannot write is refused at once (ErrStoreNotWritable); after a full disk
// (a sticky write error until the stream is loaded again) Restartable
// restarts the server in place, and the client reconnects by itself.
//
// embedded imports nats-server and nats.go only.
// It must never import: events, fsm, adapter/..., ledger, producer,
// consumers/..., projector, api, mcp, node, cmd/..., fakeapi, testharness.
package embedded
