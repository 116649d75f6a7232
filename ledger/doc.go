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
// # No answer trusted blindly
//
// Two competitors appending version n of one intent carry the same
// Msg-Id; on a replicated stream the loser may be answered with a
// duplicate ack, or with "duplicate message id is in process" (10158)
// while the winner's proposal is applied. So every Append call stamps its
// message with its own append id (header Settle-Append-Id, which also
// names the writing process: StoreConfig.Writer, WriterOf) and resolves a
// duplicate ack or a CAS refusal by reading the message stored at that
// version: our bytes under our append id are success (our earlier publish
// landed, its ack was lost), anything else is ErrConflict. Bytes alone
// would not do: two Executes of one request that read the same clock
// build identical events. A lost ack (timeout, disconnect) and 10158 are
// answered by the same publish again (same Msg-Id, CAS and append id),
// then a read; never by a second append. A caller whose Append ended
// unresolved has lost ownership: it reloads, and an event it cannot prove
// its own is somebody else's.
//
// # Group commit
//
// A flusher publishes the appends of concurrent callers as one atomic
// batch: the server checks each message's Msg-Id and CAS and stores all
// or none, with one sync. Only a committed batch's ack counts; anything
// else falls back to lone appends, resolved as above (batch.go). A server
// that does not fsync every write has no sync to share: ForServerSync
// publishes every append alone, concurrently.
//
// # The stream and its reads
//
// The stream is created when missing and updated only when its
// configuration differs (many workers open it at once). A cluster still
// forming is waited out by the caller (ClusterNotReady says which refusals
// count: an unanswered request, no suitable peers, JetStream
// unavailable). Reads of a history are message gets by subject: through
// the leader on a replicated stream (never stale after a CAS refusal),
// direct gets on a single replica. Every read and append is bounded
// (StoreConfig.AppendTimeout per request, retried; ErrNotConnected when
// there is no connection), so a leader being replaced never holds a
// caller for its whole deadline. A hold marker (header Settle-Hold,
// Msg-Id <intent>:hold) is not an event and has no version; it refuses
// the "subject empty" CAS of a new intent, so a second process holds the
// intent too. Reader's End is the last sequence the leader reports when
// the read opens; a consumer that delivers nothing for StallAfter while
// the leader holds more (MessageAfter) is made again, Recreate times,
// then ErrReadStalled; Follow never ends; LastPerSubject reads each
// subject's last message and what follows.
//
// ledger imports events, fsm and nats.go.
// It must never import: adapter/..., producer, consumers/..., projector, service, api, mcp, node, cmd/..., testharness, fakeapi.
package ledger
