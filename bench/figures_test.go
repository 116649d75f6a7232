package bench

import (
	"encoding/json"
	"os"
	"sync"
	"testing"
)

// figuresEnv names the file (JSON lines) into which every figure a
// benchmark of this package reports is also written, so that
// bench/targets can print the targets table of a whole make bench run.
// Unset, nothing is written.
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
// figure written last (the measured run) is the one bench/targets reads.
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
