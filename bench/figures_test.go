package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// figuresEnv names the file (JSON lines) into which every figure a
// benchmark of this package reports is also written, so that TestTargets
// can print the targets table of a whole make bench run. Unset, nothing is
// written.
const figuresEnv = "SETTLE_BENCH_FIGURES"

// figure is one reported metric of one benchmark.
type figure struct {
	Bench string  `json:"bench"` // b.Name(), e.g. BenchmarkExecute/always/c256
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
}

var figuresMu sync.Mutex

// report is b.ReportMetric, and a line in $SETTLE_BENCH_FIGURES. A
// benchmark runs several times while the framework grows b.N; the
// figure written last (the measured run) is the one TestTargets reads.
func report(b *testing.B, value float64, unit string) {
	b.Helper()
	b.ReportMetric(value, unit)
	path := os.Getenv(figuresEnv)
	if path == "" {
		return
	}
	line, err := json.Marshal(figure{Bench: b.Name(), Unit: unit, Value: value})
	if err != nil {
		b.Fatal(err)
	}
	figuresMu.Lock()
	defer figuresMu.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatalf("%s: %v", figuresEnv, err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		b.Fatalf("%s: %v", figuresEnv, err)
	}
}

// readFigures reads the last value of every (benchmark, unit) in path.
func readFigures(path string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var fg figure
		if err := json.Unmarshal(sc.Bytes(), &fg); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[fg.Bench+" "+fg.Unit] = fg.Value
	}
	return out, sc.Err()
}

// target is one row of the targets table: a ratio of two figures of the
// same run (den empty: the figure itself), and its bound.
type target struct {
	what     string
	num, den string // "benchmark unit"
	atLeast  bool
	bound    float64
}

// targets are issue 27's, each taken within one make bench run.
var targets = []target{
	{"fsync always, 256 callers: settled intents/s ÷ raw atomic-batch events/s",
		"BenchmarkExecute/always/c256 intents/s", "BenchmarkAppendRawBatch/always events/s", true, 0.42},
	{"lone intent p50 ÷ one synced publish p50",
		"BenchmarkExecute/always/c1 p50_ms", "BenchmarkAppendRaw/always p50_ms", false, 2.3},
	{"projection ÷ raw ordered read (HeapFinished log)",
		"BenchmarkHeapFinished projection/raw", "", true, 0.3},
	{"reconcile, batched search, lost responses: intents/s",
		"BenchmarkReconcile/batched intents/s", "", true, 1000},
	{"reconcile: external reads per intent",
		"BenchmarkReconcile/batched reads/intent", "", false, 1.05},
}

// informational rows: ratios with no target, printed under the table
// when their figures are there.
var informational = []target{
	{"cluster (3 nodes, R3) ÷ single node, 1 caller: intents/s",
		"BenchmarkExecuteCluster/cluster/c1 intents/s", "BenchmarkExecuteCluster/single/c1 intents/s", true, 0},
	{"cluster ÷ single node, 64 callers: intents/s",
		"BenchmarkExecuteCluster/cluster/c64 intents/s", "BenchmarkExecuteCluster/single/c64 intents/s", true, 0},
	{"cluster ÷ single node, 256 callers: intents/s",
		"BenchmarkExecuteCluster/cluster/c256 intents/s", "BenchmarkExecuteCluster/single/c256 intents/s", true, 0},
	{"two settle processes on the cluster, 256 callers: total ÷ one",
		"BenchmarkExecuteCluster/cluster2/c256 intents/s", "BenchmarkExecuteCluster/cluster/c256 intents/s", true, 0},
}

// TestTargets prints the targets table of the run whose figures are in
// $SETTLE_BENCH_FIGURES (make bench sets it and runs this last); without
// the variable it skips. A missed target is printed as MISS, not failed:
// the figures of a shared machine are reported, not judged by make.
func TestTargets(t *testing.T) {
	path := os.Getenv(figuresEnv)
	if path == "" {
		t.Skipf("%s is not set: make bench sets it", figuresEnv)
	}
	figs, err := readFigures(path)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print(targetsTable(figs))
}

// targetsTable renders the targets (PASS, MISS, or "not measured" when a
// figure is missing from the run) and the informational ratios.
func targetsTable(figs map[string]float64) string {
	var sb strings.Builder
	value := func(tg target) (float64, string, bool) {
		num, ok := figs[tg.num]
		if !ok {
			return 0, "", false
		}
		if tg.den == "" {
			return num, fmt.Sprintf("%.4g", num), true
		}
		den, ok := figs[tg.den]
		if !ok || den == 0 {
			return 0, "", false
		}
		return num / den, fmt.Sprintf("%.4g ÷ %.4g", num, den), true
	}
	sb.WriteString("\ntargets (issue 27), each taken within this run:\n\n")
	sb.WriteString("| target | figures | value | bound | |\n|---|---|---:|---:|---|\n")
	for _, tg := range targets {
		op := "≤"
		if tg.atLeast {
			op = "≥"
		}
		v, from, ok := value(tg)
		if !ok {
			fmt.Fprintf(&sb, "| %s | not measured | | %s %g | — |\n", tg.what, op, tg.bound)
			continue
		}
		verdict := "MISS"
		if (tg.atLeast && v >= tg.bound) || (!tg.atLeast && v <= tg.bound) {
			verdict = "PASS"
		}
		fmt.Fprintf(&sb, "| %s | %s | %.3f | %s %g | %s |\n", tg.what, from, v, op, tg.bound, verdict)
	}
	if n, ok := figs["BenchmarkHeapFinished finished_intents"]; ok {
		fmt.Fprintf(&sb, "\n(the HeapFinished log: %.0f finished intents, %.0f events)\n", n, 3*n)
	}
	var info []string
	for _, tg := range informational {
		if v, from, ok := value(tg); ok {
			info = append(info, fmt.Sprintf("| %s | %s | %.3f |", tg.what, from, v))
		}
	}
	if len(info) > 0 {
		sb.WriteString("\n| ratio (no target) | figures | value |\n|---|---|---:|\n")
		sb.WriteString(strings.Join(info, "\n") + "\n")
	}
	return sb.String()
}

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
