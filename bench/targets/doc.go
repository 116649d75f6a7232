// Command targets prints the targets table of one make bench run: each
// of the performance targets as a ratio of two figures the benchmarks of
// ./bench/ reported in the same run (SETTLE_BENCH_FIGURES, JSON lines), or
// one such figure, marked PASS or MISS ("not measured" when the run
// lacks a figure), and the ratios with no target under it. With
// --require-all it only checks that every target's figures are in the
// file (make bench-smoke: a renamed benchmark cannot empty the table
// unseen).
//
// It must never import: adapter/..., api, cmd/..., consumers/..., events, fsm, ledger, node, producer, projector, testharness.
package main
