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
// Messages are decoded and scanned on several goroutines and applied in
// stream order on one. A confirmed intent whose history was clean is
// dropped from memory (its id kept in a Bloom filter); a later message
// naming it folds it again from the stream first, so memory stays flat in
// finished intents and the report is the same (not with a projection
// check, which keeps every intent's view).
//
// It names damage (loss.go): a gap in an intent's versions (version_gap),
// sequences missing from the stream (stream_gap), a stream whose messages
// end before its state's last sequence, the views' checkpoint or the
// high-water mark (stream_behind, one range, so each lost sequence counts
// once), and, from the views, every acknowledged event the log lost
// (events_lost). Losses an operator accepted are counted apart
// (accepted_loss). Intents held after an accepted loss are findings
// (held.go, AuditReport.Held: marked or only gapped, whether what is left
// folds, handed off or not): what a broken history seems to break is the
// loss, and the marker excuses it. A held intent recorded anew or written
// for after its marker, before an operator released it, is a violation
// (held_written).
//
// settle audit runs it on a stopped serve's --data (under its lock, with
// the views and the high-water mark there) or on --nats-url, and exits
// non-zero on any violation.
//
// audit only reads: it imports events, fsm, ledger (its Reader, which
// reads the stream to its end), projector (the read-only view it
// compares) and nats.go.
// It must never import: adapter/..., producer, consumers/reconcile, consumers/receipts, api, mcp, node, cmd/..., testharness, fakeapi.
package audit
