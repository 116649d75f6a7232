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
// one of them reported by ReadyChecks (/readyz) while it is down — and so
// is each route's upstream MCP server (an adapter that is a Readier);
// Close stops the routes' upstreams (Closer).
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
// # The data directory
//
// Open takes an exclusive lock on the data directory (an flock on the
// directory itself and one on settle.lock, which names the holder's pid),
// held for the process's life and released by the kernel when it dies: a
// second serve or mcp, an offline audit --data or views rebuild on a live
// directory exits naming the holder. The directory is 0700, the views
// 0600. Views that do not match the stream (another schema version, a
// recreated stream) are moved aside and rebuilt from the log.
//
// # The log at start
//
// Before anything reads or writes, the stream's state is compared with
// what the node knew of it (watermark.go): the high-water mark in the
// data directory and the views (every event they applied, by sequence). A
// stream gone, shorter than either, or with holes is refused
// (ledger.ErrLogDamaged), naming every lost sequence and, from the views,
// the intents and versions lost. Then Run reads the whole stream, headers
// only (verify.go), while appends are refused (ledger.ErrLogVerifying): a
// damaged record the server still counts is found there, and on an
// embedded store a second writer's traces (writers.go). Either blocks
// appends until an operator restarts with AcceptLogLoss, which records
// the loss in the high-water mark and holds every intent that lost events
// (a hold marker on its subject, ledger.MarkHeld; Config.Hold where the
// marker could not be written): a held intent is handed to a human and
// never recorded or written again (fsm.LossHeld).
//
// # While it runs
//
// The supervisor (supervise.go) restarts a projector that fails or stalls
// and a reconciler that stops, keeps the high-water mark, refuses appends
// while the clock is off the stream leader's by more than MaxClockOffset
// or the embedded server's disk is full (restarting the server once
// MinFreeMB are free), and reports each part by ReadyChecks (/readyz)
// while it is down. On shutdown the loops stop, the views catch up with
// the log, and Close closes NATS: a restart resumes from the log.
//
// With Config.Listen (serve --nats-listen), downstream readers reach the
// embedded server as a read-only user: stream and consumer info, their own
// consumers, subscriptions to settle.intents.>, no publishing on settle's
// subjects, and no access to settle's own consumers (each denied by name).
//
// node sits below cmd/settle and above api, mcp, consumers/reconcile,
// producer and projector; nothing but cmd imports it.
// It must never import: cmd/..., testing, testharness, fakeapi, examples/..., bench.
package node
