// Package node assembles one settle process: everything `settle serve`,
// `settle mcp` and `settle demo` run besides their transport. A Node owns
// the data directory's lock, NATS (the embedded nats-server in the data
// directory, or a connection to an external server), the log's store, the
// start-up check of the log against its high-water mark and the views,
// the reading of the whole log before the first write, the producer, the
// reconcilers with their start-up sweep, and the projector's views; and it
// keeps each of them supervised while it runs: the high-water mark, the
// clock guard, the disk watch of the embedded server, a projector that
// fails or stalls restarted, a reconciler that stops restarted, and every
// one of them reported by ReadyChecks (/readyz) while it is down.
//
// Config, DefaultConfig and Validate (every problem, naming the field),
// then Open (checks and opens everything, starts nothing), Run (the
// loops, until its context ends; then the views catch up) and Close. The
// transports mount on what a Node exposes: Producer, Projector, Store,
// Metrics and ReadyChecks. The data directory's layout and lock
// (LockDataDir), the high-water mark (ReadHighWater) and the logger
// (NewLogger: errors in full, every secret the process knows scrubbed)
// serve the offline commands (audit, views rebuild) too.
//
// node sits below cmd/settle and above api, mcp, consumers/reconcile,
// producer and projector; nothing but cmd imports it.
// It must never import: cmd/..., testing, testharness, fakeapi, examples/..., bench.
package node
