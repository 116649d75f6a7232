// Package projector owns settle's read model: the receipt views (intents,
// receipts, per-intent event timelines, quarantine) kept in an embedded
// SQLite database (modernc.org/sqlite, pure Go), the checkpoint that says how
// far into the JetStream log those views are, and the queries the API, the
// CLI and the audit read them with.
//
// The log is the truth and the views are a fold of it. The projector reads
// the intents stream with a ledger.Reader that starts at checkpoint+1;
// the checkpoint lives in SQL, in the same transaction as the view rows it
// covers, so a crash at any point either keeps a whole batch or none of it,
// and an event at or below the checkpoint is skipped: every event is applied
// exactly once. No position is kept on the NATS server; Config.Durable only
// names the projector's (ephemeral) consumers. The database is synced at
// WAL checkpoints, not at every commit (synchronous=NORMAL): a power loss
// may take the last batches back, checkpoint and rows together, and they
// are applied again from the log. A long catch-up runs without syncs
// behind a marker file; after a machine restart the views are rebuilt
// (unsynced.go).
//
// Applying an event folds it onto the intent's history with
// (*fsm.Intent).Apply; ViewOf maps a folded intent to its view, for any
// reader that folded it already. Quarantine codes are events' decode codes
// and fsm's fold codes, plus the projector's own subject checks. The
// history is the events table (schema.go). A bounded LRU of folded intents saves re-reading the history, but SQL
// stays authoritative: a cache miss re-folds from the table, and the cache
// is dropped whenever the checkpoint in SQL is not the one this process
// wrote. Terminal intents are never kept in memory. A first event (version
// 1) that is neither in the batch nor in the cache is taken for a new
// intent's without a query; if its intent has a row after all (a damaged
// log repeating a first event), the batch is rolled back and applied again
// with every lookup made, so the outcome never depends on the shortcut.
//
// An event that cannot be applied (unknown schema or type, malformed,
// illegal transition, refused guard, version gap) is never a crash and never
// silently dropped: it is written to the quarantine table with its sequence,
// subject, a stable code and the reason, logged at warn level, counted in
// Stats, and the checkpoint moves past it.
//
// The schema is versioned (schema.go); views of another version are moved
// aside and rebuilt from the log by the node. Besides the lists by state,
// route, account and time with cursor paging, the counts per state and the
// manual-action queue with reasons and evidence, the projector answers the
// console's search by intent id or request id (search.go) and its per-route
// charts (flow.go).
//
// Rebuilding from an empty database gives the same views: Dump renders a
// canonical snapshot of every table for that comparison (tests, audit).
//
// projector imports events, fsm, ledger (its Reader, which reads the stream
// to its end), internal/durable, nats.go's jetstream and database/sql
// (its tests use testharness and ledger.Store to build a real log).
// It must never import: adapter/..., producer, consumers/..., service,
// api, mcp, node, cmd/..., fakeapi, testharness.
package projector
