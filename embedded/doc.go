// Package embedded runs nats-server with JetStream inside the settle
// process: the default deployment (`settle serve`, `settle demo`) and the
// server every test and benchmark starts. It owns the server options,
// including the durability mode (fsync on every write or the server
// default), a client listener with users and per-user publish/subscribe
// permissions (serve --nats-listen: read-only downstream readers), and
// 3-node clusters on loopback.
//
// Durability: SyncAlways fsyncs before the ack (an acknowledged event
// survives a power loss; one fsync per lone append or per atomic batch);
// SyncDefault flushes to the OS before the ack and fsyncs every two
// minutes (it survives a process crash, not a power loss). The duplicate
// window and JetStream's memory storage are bounded, since the server
// holds every Msg-Id of the window in memory; what grows with intents is
// the server's per-subject index. The server's own warnings and errors go
// to settle's log; a store it cannot write is refused at once
// (ErrStoreNotWritable); after a full disk (a sticky write error until the
// stream is loaded again) Restartable restarts the server in place, and
// the client reconnects by itself.
//
// embedded imports nats-server and nats.go only.
// It must never import: events, fsm, adapter/..., ledger, producer,
// consumers/..., projector, api, mcp, node, cmd/..., fakeapi, testharness.
package embedded
