package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// figure is one line of the figures file (bench's report).
type figure struct {
	Bench string  `json:"bench"`
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
}

func main() {
	requireAll := flag.Bool("require-all", false, "fail (exit 1) when a target's figures are missing from the file, printing nothing else")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), "Usage: go run ./bench/targets [--require-all] FIGURES.jsonl\n\n"+
			"Prints the targets table of one make bench run from the figures its benchmarks wrote\n"+
			"(SETTLE_BENCH_FIGURES). A missed target is printed as MISS, not failed: the figures of\n"+
			"a shared machine are reported, not judged by make.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	figs, err := readFigures(flag.Arg(0))
	if err != nil {
		fmt.Fprintf(os.Stderr, "targets: %v\n", err)
		os.Exit(1)
	}
	if *requireAll {
		if missing := missingFigures(figs); len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "targets: %s lacks the figures %s (was a benchmark renamed?)\n", flag.Arg(0), strings.Join(missing, ", "))
			os.Exit(1)
		}
		return
	}
	fmt.Print(targetsTable(figs))
}

// missingFigures lists the figures a target needs that figs lacks. A
// figure of a caller count (/c256) is there when the benchmark reported
// it at any count: make bench-smoke runs the cluster at 2 callers.
func missingFigures(figs map[string]float64) []string {
	var out []string
	for _, tg := range targets {
		for _, k := range []string{tg.num, tg.den} {
			if k != "" && !reported(figs, k) {
				out = append(out, fmt.Sprintf("%q", k))
			}
		}
	}
	return out
}

// callers is the caller count of a figure's name.
var callers = regexp.MustCompile(`/c[0-9]+( |$)`)

// reported says whether figs has k, or k at another caller count.
func reported(figs map[string]float64, k string) bool {
	if _, ok := figs[k]; ok {
		return true
	}
	if !callers.MatchString(k) {
		return false
	}
	want := callers.ReplaceAllString(k, "/c#$1")
	for f := range figs {
		if callers.ReplaceAllString(f, "/c#$1") == want {
			return true
		}
	}
	return false
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

// targets are the performance targets, each taken within one make bench run.
var targets = []target{
	{"fsync always, 256 callers: settled intents/s ÷ raw atomic-batch events/s",
		"BenchmarkExecute/always/c256 intents/s", "BenchmarkAppendRawBatch/always events/s", true, 0.42},
	{"fsync always, 256 callers: process CPU per intent, µs",
		"BenchmarkExecute/always/c256 cpu_us/intent", "", false, 180},
	{"lone intent p50 ÷ its two publishes and POST made by hand, interleaved",
		"BenchmarkLoneParts execute_p50_ms", "BenchmarkLoneParts hand_p50_ms", false, 1.1},
	{"projection ÷ raw ordered read (HeapFinished log)",
		"BenchmarkHeapFinished projection/raw", "", true, 0.4},
	{"audit ÷ raw ordered read (HeapFinished log)",
		"BenchmarkHeapFinished audit/raw", "", true, 0.7},
	{"cluster (3 nodes, R3) ÷ single node, one settle node, 256 callers: intents/s",
		"BenchmarkExecuteCluster/cluster/c256 intents/s", "BenchmarkExecuteCluster/single/c256 intents/s", true, 0.6},
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
	{"two settle processes on the cluster, 256 callers: total ÷ one",
		"BenchmarkExecuteCluster/cluster2/c256 intents/s", "BenchmarkExecuteCluster/cluster/c256 intents/s", true, 0},
	{"raw atomic batches of 256 ÷ of 100, fsync always: events/s",
		"BenchmarkAppendRawBatch/always-256 events/s", "BenchmarkAppendRawBatch/always events/s", true, 0},
	{"lone intent p50 ÷ one synced publish p50",
		"BenchmarkExecute/always/c1 p50_ms", "BenchmarkAppendRaw/always p50_ms", false, 0},
	{"the hand sequence's p50 ÷ one synced publish p50",
		"BenchmarkLoneParts hand_p50_ms", "BenchmarkAppendRaw/always p50_ms", false, 0},
	{"fsync always, 256 callers: messages per atomic batch",
		"BenchmarkExecute/always/c256 msgs/batch", "", true, 0},
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
	sb.WriteString("\ntargets, each taken within this run:\n\n")
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
		fmt.Fprintf(&sb, "\n(the HeapFinished log: %.0f finished intents, %.0f events)\n", n, figs["BenchmarkHeapFinished events_in_log"])
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
