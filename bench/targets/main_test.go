package main

import (
	"strings"
	"testing"
)

// TestTargetsTable checks the table's verdicts on made-up figures, and
// that a target whose figures the run lacks is "not measured", never
// PASS.
func TestTargetsTable(t *testing.T) {
	got := targetsTable(map[string]float64{
		"BenchmarkExecute/always/c256 intents/s":         5000,
		"BenchmarkAppendRawBatch/always events/s":        10000,
		"BenchmarkExecute/always/c256 cpu_us/intent":     200,
		"BenchmarkLoneParts execute_p50_ms":              1.1,
		"BenchmarkLoneParts hand_p50_ms":                 1.0,
		"BenchmarkHeapFinished projection/raw":           0.45,
		"BenchmarkReconcile/batched reads/intent":        1.03,
		"BenchmarkExecuteCluster/cluster/c1 intents/s":   100,
		"BenchmarkExecuteCluster/single/c1 intents/s":    400,
		"BenchmarkExecuteCluster/cluster/c256 intents/s": 3000,
	})
	for _, want := range []string{
		"| 0.500 | ≥ 0.42 | PASS |",
		"| 200 | 200.000 | ≤ 180 | MISS |",
		"| 1.1 ÷ 1 | 1.100 | ≤ 1.1 | PASS |",
		"| 0.45 | 0.450 | ≥ 0.4 | PASS |",
		"audit ÷ raw ordered read (HeapFinished log) | not measured |",
		"one settle node, 256 callers: intents/s | not measured |",
		"| 1.030 | ≤ 1.05 | PASS |",
		"| 100 ÷ 400 | 0.250 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "not measured") != 3 {
		t.Errorf("want 3 targets not measured (audit, cluster, reconcile rate):\n%s", got)
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
	delete(all, "BenchmarkLoneParts hand_p50_ms")
	if m := missingFigures(all); len(m) != 1 || !strings.Contains(m[0], "BenchmarkLoneParts hand_p50_ms") {
		t.Fatalf("missing = %v, want the one deleted", m)
	}
	// The cluster at another caller count (make bench-smoke's 2) names
	// the same figures; another benchmark's name does not.
	all["BenchmarkLoneParts hand_p50_ms"] = 1
	for _, k := range []string{"BenchmarkExecuteCluster/cluster/c256 intents/s", "BenchmarkExecuteCluster/single/c256 intents/s"} {
		delete(all, k)
		all[strings.Replace(k, "/c256", "/c2", 1)] = 1
	}
	if m := missingFigures(all); len(m) != 0 {
		t.Fatalf("missing %v with the cluster's figures at 2 callers", m)
	}
	delete(all, "BenchmarkExecuteCluster/single/c2 intents/s")
	all["BenchmarkExecuteClusterX/single/c2 intents/s"] = 1
	if m := missingFigures(all); len(m) != 1 || !strings.Contains(m[0], "single/c256") {
		t.Fatalf("missing = %v, want the single node's figure", m)
	}
}
