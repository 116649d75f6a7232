// Package bench holds settle's end-to-end benchmarks and nothing else:
// its tests import everything and nothing imports it. Every benchmark runs
// against a real embedded nats-server with a b.TempDir() file store and,
// where an external API is involved, the fake social API over real HTTP
// on loopback. Nothing is mocked.
//
// Each figure is reported next to a baseline measured in the same run and
// node, 250ms just before and just after each timed loop: raw sequential
// JetStream publishes of the same encoded events, in a stream configured
// like settle's, without Nats-Msg-Id or the per-subject CAS header
// (raw_events/s). The ratios (ratio_vs_raw, ratio_vs_raw_append) divide by
// it, so a shared machine's drift between benchmarks does not enter them.
//
//	go test -run '^$' -bench . -benchmem -benchtime 2s ./bench/
//
// Every figure is also written to $SETTLE_BENCH_FIGURES when it is set
// (make bench sets it), and bench/targets prints the targets from them.
// BENCHMARKS.md at the repository root records a run and reads it.
//
// It must never import: cmd/..., examples/....
package bench
