// Package ledger is settle's log: the JetStream stream every intent lives
// on, one subject per intent. It owns the stream (file storage, deny
// delete and purge, dedup window), Append with Nats-Msg-Id =
// <intent_id>:<version> and per-subject compare-and-swap, the resolution
// of lost acks by reading the log (each Append call's own append id tells
// its message from a competitor's identical one), the group commit of
// concurrent appends into JetStream atomic batches (batch.go; every append
// alone for a server that does not fsync each write: ForServerSync), the
// reading of JetStream's acks (ack.go), and the reads: Load, LoadByID and
// Refresh of an intent's history (a hold marker on the subject, written by
// MarkHeld when a log loss is accepted, is History.Hold: hold.go), and
// Reader, the one reader of the whole stream (or a route's subjects) to
// its end, which asks the stream's leader where that is, so that a
// consumer on a copy that lags does not end a read early (reader.go).
//
// It decides nothing: what to append is the caller's (producer,
// reconciler), checked against the fsm by AppendNext before it is sent.
//
// ledger imports events, fsm and nats.go.
// It must never import: adapter/..., producer, consumers/..., projector, service, api, mcp, node, cmd/..., testharness, fakeapi.
package ledger
