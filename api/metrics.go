package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/service"
)

// LatencyBuckets are the upper bounds (seconds) of the write and settle
// latency histograms: from a fast API call to an unknown outcome settled
// after an hour of eventual consistency.
var LatencyBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// Metrics holds what /metrics exposes, in its own Prometheus registry
// (client_golang: the exposition format, its escaping and content
// negotiation are the library's, not hand-written). Counters and
// histograms are fed by the server and by the caller's wiring
// (CountCall, ObserveWrite, ObserveSettle); the gauges over intents are
// read from the projector at each scrape. Safe for concurrent use; make
// one with NewMetrics.
type Metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	writes   *prometheus.HistogramVec
	settles  *prometheus.HistogramVec
	http     *prometheus.CounterVec
	intents  *prometheus.GaugeVec
	oldest   prometheus.Gauge
	checkpnt prometheus.Gauge
}

// NewMetrics returns empty metrics in a new registry (with the Go runtime
// and process collectors).
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "settle_external_calls_total",
			Help: "External write calls by route and outcome (confirmed, succeeded, rejected, unknown)."}, []string{"route", "outcome"}),
		writes: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "settle_write_latency_seconds",
			Help:    "Duration of one external write attempt, from its acknowledged WriteStarted to its outcome, by route and outcome.",
			Buckets: LatencyBuckets}, []string{"route", "outcome"}),
		settles: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "settle_settle_latency_seconds",
			Help:    "Time from an unknown outcome to the intent's settlement (confirmed, failed, abandoned or handed to a human: manual_action), by route and result. Writes whose outcome was known at once are not counted.",
			Buckets: LatencyBuckets}, []string{"route", "result"}),
		http: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "settle_http_requests_total",
			Help: "HTTP requests served by status code."}, []string{"code"}),
		intents: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "settle_intents",
			Help: "Intents per lifecycle state (projector view)."}, []string{"state"}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "settle_unknown_oldest_age_seconds",
			Help: "Age of the oldest unsettled unknown outcome (0 when none)."}),
		checkpnt: prometheus.NewGauge(prometheus.GaugeOpts{Name: "settle_projector_checkpoint_sequence",
			Help: "Stream sequence the projector's views are at."}),
	}
	m.reg.MustRegister(m.calls, m.writes, m.settles, m.http, m.intents, m.oldest, m.checkpnt,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// CountCall counts one external call of route with its outcome (e.g.
// confirmed, succeeded, rejected, unknown). Feed it from
// producer.Config.OnCall (see OutcomeLabel); the server does not count
// calls itself, so nothing is counted twice.
func (m *Metrics) CountCall(route, outcome string) {
	m.calls.WithLabelValues(route, outcome).Inc()
}

// ObserveWrite records one write attempt's duration (WriteStarted to its
// outcome). The server observes the writes of its submits; the caller's
// wiring observes the reconcilers' retries. Negative durations count as 0.
func (m *Metrics) ObserveWrite(route, outcome string, d time.Duration) {
	m.writes.WithLabelValues(route, outcome).Observe(max(d.Seconds(), 0))
}

// ObserveSettle records how long an unknown outcome took to settle, with
// the state it settled in. Feed it with SettleLatency.
func (m *Metrics) ObserveSettle(route, result string, d time.Duration) {
	m.settles.WithLabelValues(route, result).Observe(max(d.Seconds(), 0))
}

// observeSubmitWrite records the write a submit's Execute made: the last
// attempt of its history, when it started and ended in this history.
func (m *Metrics) observeSubmitWrite(route string, h []events.Event) {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Type != events.WriteStarted {
			continue
		}
		for _, o := range h[i+1:] {
			if o.AttemptID == h[i].AttemptID && IsOutcome(o.Type) {
				m.ObserveWrite(route, OutcomeLabel(o.Type), o.At.Sub(h[i].At))
				return
			}
		}
		return
	}
}

// IsOutcome reports whether t closes a write attempt.
func IsOutcome(t events.Type) bool {
	switch t {
	case events.WriteConfirmed, events.WriteSucceeded, events.WriteRejected, events.OutcomeUnknown:
		return true
	}
	return false
}

// SettleLatency reads, from an intent's history, how long its unknown
// outcome took to settle: from the first OutcomeUnknown to the last
// event, when that event left the intent settled (confirmed, failed,
// abandoned, manual_action). ok is false for an intent that never had an
// unknown outcome or is not settled.
func SettleLatency(h []events.Event) (d time.Duration, result fsm.State, ok bool) {
	if len(h) == 0 {
		return 0, "", false
	}
	i, err := fsm.Fold(h)
	if err != nil {
		return 0, "", false
	}
	switch i.State {
	case fsm.Confirmed, fsm.Failed, fsm.Abandoned, fsm.ManualAction:
	default:
		return 0, "", false
	}
	for _, e := range h {
		if e.Type == events.OutcomeUnknown {
			return h[len(h)-1].At.Sub(e.At), i.State, true
		}
	}
	return 0, "", false
}

func (m *Metrics) countHTTP(code int) {
	m.http.WithLabelValues(strconv.Itoa(code)).Inc()
}

// readGauges sets the gauges from the figures over every intent, which
// only an unrestricted caller may read (service.Figures).
func (s *Server) readGauges(ctx context.Context, c *service.Caller) error {
	f, err := s.cfg.Service.Figures(ctx, *c)
	if err != nil {
		return err
	}
	states, oldest, haveOldest, cp := f.ByState, f.OldestUnknown, f.HaveUnknown, f.Checkpoint
	m := s.metrics
	for _, st := range fsm.AllStates() {
		if st != fsm.None {
			m.intents.WithLabelValues(string(st)).Set(float64(states[st]))
		}
	}
	for st, n := range states {
		m.intents.WithLabelValues(string(st)).Set(float64(n))
	}
	age := 0.0
	if haveOldest {
		age = max(oldest.Seconds(), 0)
	}
	m.oldest.Set(age)
	m.checkpnt.Set(float64(cp))
	return nil
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, c *service.Caller) error {
	if err := s.readGauges(r.Context(), c); err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).ServeHTTP(w, r)
	return nil
}
