// Package audit replays the whole log and reports what breaks settle's
// invariants, with stable codes: illegal transitions and refused guards
// (the fsm's fold codes), two external ids for one intent, a retry
// without a claim or an operator release, an outcome without its
// WriteStarted, intents stuck past deadlines or leases, secret-looking
// text anywhere in an event or its headers, events this version cannot
// decode (events' decode codes), and, when given the projection, views
// that differ from the fold.
//
// Files by concern: audit.go (config, entry point, per-intent state),
// replay.go (the read of the stream with ledger.Reader, decoding ahead on
// several goroutines, eviction of finished intents), held.go (intents held
// after an accepted log loss: findings), checks.go (the invariants),
// secrets.go (the credential scan and masking), report.go (the report,
// timelines and their safe text).
//
// audit only reads: it imports events, fsm, ledger (its Reader, which
// reads the stream to its end), projector (the read-only view it
// compares) and nats.go.
// It must never import: adapter/..., producer, consumers/reconcile, consumers/receipts, api, mcp, node, cmd/..., testharness, fakeapi.
package audit
