package main

import (
	"strings"
	"testing"
)

// TestTargetsTable checks the table's verdicts on made-up figures.
func TestTargetsTable(t *testing.T) {
	got := targetsTable(map[string]float64{
		"BenchmarkExecute/always/c256 intents/s":       5000,
		"BenchmarkAppendRawBatch/always events/s":      10000,
		"BenchmarkExecute/always/c1 p50_ms":            2.0,
		"BenchmarkAppendRaw/always p50_ms":             0.5,
		"BenchmarkReconcile/batched reads/intent":      1.03,
		"BenchmarkExecuteCluster/cluster/c1 intents/s": 100,
		"BenchmarkExecuteCluster/single/c1 intents/s":  400,
	})
	for _, want := range []string{
		"| 0.500 | ≥ 0.42 | PASS |",
		"| 4.000 | ≤ 2.3 | MISS |",
		"projection ÷ raw ordered read (HeapFinished log) | not measured |",
		"| 1.030 | ≤ 1.05 | PASS |",
		"| 100 ÷ 400 | 0.250 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

// TestMissingFiguresNamesEachOne: make bench-smoke's check that every
// target's figures are still reported under the names the table reads.
func TestMissingFiguresNamesEachOne(t *testing.T) {
	all := map[string]float64{}
	for _, tg := range targets {
		all[tg.num] = 1
		if tg.den != "" {
			all[tg.den] = 1
		}
	}
	if m := missingFigures(all); len(m) != 0 {
		t.Fatalf("missing %v from a complete set", m)
	}
	delete(all, "BenchmarkAppendRaw/always p50_ms")
	if m := missingFigures(all); len(m) != 1 || !strings.Contains(m[0], "BenchmarkAppendRaw/always p50_ms") {
		t.Fatalf("missing = %v, want the one deleted", m)
	}
}
