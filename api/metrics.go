package api

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/settle-dev/settle/fsm"
)

// ReconcileBuckets are the upper bounds (seconds) of the
// settle_reconcile_latency_seconds histogram.
var ReconcileBuckets = []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// Metrics holds the counters and the histogram the server exposes on
// /metrics next to the gauges it reads from the projector. It is safe for
// concurrent use; the zero value is not, use NewMetrics.
type Metrics struct {
	mu         sync.Mutex
	recBuckets []uint64 // cumulative per ReconcileBuckets bound
	recCount   uint64
	recSum     float64
	calls      map[[2]string]uint64 // route, outcome
	http       map[int]uint64       // status code
}

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	return &Metrics{recBuckets: make([]uint64, len(ReconcileBuckets)), calls: map[[2]string]uint64{}, http: map[int]uint64{}}
}

// ObserveReconcile records how long an unknown outcome took to settle
// (from unknown to a settled state), e.g. from the reconciler's step hook.
// Negative durations count as 0.
func (m *Metrics) ObserveReconcile(d time.Duration) {
	s := max(d.Seconds(), 0)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recCount++
	m.recSum += s
	for i, b := range ReconcileBuckets {
		if s <= b {
			m.recBuckets[i]++
		}
	}
}

// CountCall counts one external call of route with its outcome (e.g.
// confirmed, succeeded, rejected, unknown). Feed it from
// producer.Config.OnCall (see OutcomeLabel); the server does not count
// calls itself, so nothing is counted twice.
func (m *Metrics) CountCall(route, outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[[2]string{route, outcome}]++
}

func (m *Metrics) countHTTP(code int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.http[code]++
}

// labelValue escapes a Prometheus label value (backslash, quote, newline).
func labelValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func fmtFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// gauges are what /metrics reads from the projector.
type gauges struct {
	states     map[fsm.State]int
	oldest     time.Duration
	haveOldest bool
	checkpoint uint64
}

// writeExposition renders the Prometheus text exposition format 0.0.4.
func (m *Metrics) writeExposition(w io.Writer, g gauges) {
	b := &strings.Builder{}
	fmt.Fprintf(b, "# HELP settle_intents Intents per lifecycle state (projector view).\n# TYPE settle_intents gauge\n")
	states := make([]string, 0, len(g.states))
	for s := range g.states {
		states = append(states, string(s))
	}
	sort.Strings(states)
	for _, s := range states {
		fmt.Fprintf(b, "settle_intents{state=\"%s\"} %d\n", labelValue(s), g.states[fsm.State(s)])
	}
	age := 0.0
	if g.haveOldest {
		age = max(g.oldest.Seconds(), 0)
	}
	fmt.Fprintf(b, "# HELP settle_unknown_oldest_age_seconds Age of the oldest unsettled unknown outcome (0 when none).\n# TYPE settle_unknown_oldest_age_seconds gauge\nsettle_unknown_oldest_age_seconds %s\n", fmtFloat(age))
	fmt.Fprintf(b, "# HELP settle_projector_checkpoint_sequence Stream sequence the projector's views are at.\n# TYPE settle_projector_checkpoint_sequence gauge\nsettle_projector_checkpoint_sequence %d\n", g.checkpoint)

	m.mu.Lock()
	fmt.Fprintf(b, "# HELP settle_reconcile_latency_seconds Time from an unknown outcome to its settlement.\n# TYPE settle_reconcile_latency_seconds histogram\n")
	for i, bound := range ReconcileBuckets {
		fmt.Fprintf(b, "settle_reconcile_latency_seconds_bucket{le=\"%s\"} %d\n", fmtFloat(bound), m.recBuckets[i])
	}
	fmt.Fprintf(b, "settle_reconcile_latency_seconds_bucket{le=\"+Inf\"} %d\n", m.recCount)
	fmt.Fprintf(b, "settle_reconcile_latency_seconds_sum %s\nsettle_reconcile_latency_seconds_count %d\n", fmtFloat(m.recSum), m.recCount)

	fmt.Fprintf(b, "# HELP settle_external_calls_total External write calls by route and outcome.\n# TYPE settle_external_calls_total counter\n")
	keys := make([][2]string, 0, len(m.calls))
	for k := range m.calls {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	for _, k := range keys {
		fmt.Fprintf(b, "settle_external_calls_total{route=\"%s\",outcome=\"%s\"} %d\n", labelValue(k[0]), labelValue(k[1]), m.calls[k])
	}

	fmt.Fprintf(b, "# HELP settle_http_requests_total HTTP requests served by status code.\n# TYPE settle_http_requests_total counter\n")
	codes := make([]int, 0, len(m.http))
	for c := range m.http {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	for _, c := range codes {
		fmt.Fprintf(b, "settle_http_requests_total{code=\"%d\"} %d\n", c, m.http[c])
	}
	m.mu.Unlock()
	_, _ = io.WriteString(w, b.String())
}

// readGauges reads the projector's gauges.
func (s *Server) readGauges(ctx context.Context) (gauges, error) {
	var g gauges
	var err error
	if g.states, err = s.cfg.Projector.CountByState(ctx); err != nil {
		return g, err
	}
	if g.oldest, g.haveOldest, err = s.cfg.Projector.OldestUnknownAge(ctx, s.cfg.Now()); err != nil {
		return g, err
	}
	if g.checkpoint, err = s.cfg.Projector.Checkpoint(ctx); err != nil {
		return g, err
	}
	return g, nil
}
