// Package bench holds settle's end-to-end benchmarks and nothing else: its
// tests import everything (ledger, producer, consumers, embedded,
// testharness, the route of examples/routes/social.yaml) and nothing
// imports it.
//
// Every benchmark runs against a real embedded nats-server with a
// b.TempDir() file store and, where an external API is involved, the fake
// social API over real HTTP on loopback. Nothing is mocked.
//
// Each figure is reported next to a baseline measured in the same run, on
// the same node, around the measurement: raw sequential JetStream publishes
// of the same encoded events (about 600 bytes) to one subject per intent,
// in a stream configured like settle's, without Nats-Msg-Id and without the
// per-subject CAS header, for 250ms just before and 250ms just after each
// timed loop (raw_events/s). The ratios (ratio_vs_raw, ratio_vs_raw_append)
// divide by it, so a shared machine's drift between benchmarks does not
// enter them; noise during the timed loop itself still does.
//
//	go test -run '^$' -bench . -benchmem -benchtime 2s ./bench/
//
// Every figure is also written to $SETTLE_BENCH_FIGURES when it is set
// (make bench sets it), and bench/targets prints the targets from them,
// each a ratio of two figures of the run.
// BenchmarkExecuteCluster runs settle nodes against nats-server
// processes (a single server and a 3-node cluster).
//
// BENCHMARKS.md at the repository root records a run and reads it.
//
// It must never import: cmd/..., examples/....
package bench
