package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/internal/buildinfo"
	"github.com/settle-dev/settle/service"
)

// LatencyBuckets are the upper bounds (seconds) of the write and settle
// duration histograms: from a fast API call to an unknown outcome settled
// after an hour of eventual consistency.
var LatencyBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// RequestBuckets are the upper bounds (seconds) of the HTTP request and
// external call duration histograms: one request, up to a submit that
// waits (?wait=, at most MaxMaxWait) or an attempt's deadline.
var RequestBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Metrics holds what /metrics exposes, in its own Prometheus registry
// (client_golang: the exposition format, its escaping and content
// negotiation are the library's, not hand-written; names follow its
// conventions: a unit suffix, _total on counters, _duration_seconds on
// durations). Counters and histograms are fed by the server (HTTP
// requests, the writes of its submits) and by the caller's wiring
// (ObserveWrite, ObserveSettle, and ObserveCall as every route's
// adapter.CallObserver); the gauges over intents are read from the
// projector at each scrape. Safe for concurrent use; make one with
// NewMetrics.
type Metrics struct {
	reg         *prometheus.Registry
	scrape      sync.Mutex // one scrape reads the gauges and gathers at a time
	calls       *prometheus.CounterVec
	callTime    *prometheus.HistogramVec
	rateLimited *prometheus.CounterVec
	writes      *prometheus.HistogramVec
	settles     *prometheus.HistogramVec
	http        *prometheus.CounterVec
	httpTime    *prometheus.HistogramVec
	intents     *prometheus.GaugeVec
	oldest      prometheus.Gauge
	checkpnt    prometheus.Gauge
}

// NewMetrics returns empty metrics in a new registry (with the Go runtime
// and process collectors, and settle_build_info).
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "settle_external_calls_total",
			Help: "HTTP requests sent to external APIs, by route, kind (write, search, readback, status, identity) and outcome (the answer's status class 2xx..5xx, or not_sent, or unknown: written and no answer)."},
			[]string{"route", "kind", "outcome"}),
		callTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "settle_external_call_duration_seconds",
			Help:    "Duration of one HTTP request to an external API, answer read, by route and kind.",
			Buckets: RequestBuckets}, []string{"route", "kind"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "settle_external_rate_limited_total",
			Help: "Answers of external APIs refusing a request for their rate limit (429, or 403/503 with Retry-After), by route and kind."},
			[]string{"route", "kind"}),
		writes: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "settle_write_duration_seconds",
			Help:    "Duration of one external write attempt, from its acknowledged WriteStarted to its outcome, by route and outcome (confirmed, succeeded, rejected, unknown).",
			Buckets: LatencyBuckets}, []string{"route", "outcome"}),
		settles: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "settle_unknown_settle_duration_seconds",
			Help:    "Time from an unknown outcome to the intent's settlement (a settled state: confirmed, rejected, failed, abandoned, manual_action, awaiting_approval), by route and result: each intent once, at its first settlement after its first unknown outcome. Writes whose outcome was known at once are not counted.",
			Buckets: LatencyBuckets}, []string{"route", "result"}),
		http: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "settle_http_requests_total",
			Help: "HTTP requests served, by handler (the endpoint's pattern; other: no endpoint) and status code."}, []string{"handler", "code"}),
		httpTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "settle_http_request_duration_seconds",
			Help:    "Duration of serving one HTTP request, by handler.",
			Buckets: RequestBuckets}, []string{"handler"}),
		intents: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "settle_intents",
			Help: "Intents per lifecycle state and route (projector view)."}, []string{"state", "route"}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "settle_unknown_oldest_age_seconds",
			Help: "Age of the oldest unsettled unknown outcome (0 when none)."}),
		checkpnt: prometheus.NewGauge(prometheus.GaugeOpts{Name: "settle_projector_checkpoint_sequence",
			Help: "Stream sequence the projector's views are at."}),
	}
	bi := buildinfo.Read()
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "settle_build_info",
		Help:        "Always 1: the labels say which build of settle is running.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "goversion": bi.GoVersion}})
	build.Set(1)
	m.reg.MustRegister(m.calls, m.callTime, m.rateLimited, m.writes, m.settles, m.http, m.httpTime, m.intents, m.oldest, m.checkpnt, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveCall records one HTTP request to an external API: Metrics is
// the adapter.CallObserver the wiring sets on every route, and
// adapter.Do, which every adapter sends with, reports each request.
func (m *Metrics) ObserveCall(o adapter.CallObservation) {
	kind := string(o.Kind)
	m.calls.WithLabelValues(o.Route, kind, o.Outcome).Inc()
	m.callTime.WithLabelValues(o.Route, kind).Observe(max(o.Duration.Seconds(), 0))
	if o.RateLimited {
		m.rateLimited.WithLabelValues(o.Route, kind).Inc()
	}
}

var _ adapter.CallObserver = (*Metrics)(nil)

// ObserveWrite records one write attempt's duration (WriteStarted to its
// outcome) with its classified outcome (OutcomeLabel). The server
// observes the writes of its submits; the caller's wiring observes the
// reconcilers' retries. Negative durations count as 0.
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
// event, when that event is the first after it to leave the intent
// settled (fsm.Settled). ok is false for an intent that never had an
// unknown outcome, is not settled, or had settled already (a retryable
// rejection is a settlement; the resend that settles the intent again is
// not counted twice).
func SettleLatency(h []events.Event) (d time.Duration, result fsm.State, ok bool) {
	i := &fsm.Intent{State: fsm.None}
	unknown := -1
	for k, e := range h {
		if err := i.Apply(e); err != nil {
			return 0, "", false
		}
		switch {
		case unknown < 0:
			if e.Type == events.OutcomeUnknown {
				unknown = k
			}
		case k < len(h)-1 && fsm.Settled(i.State):
			return 0, "", false // settled before the last event: counted then
		}
	}
	if unknown < 0 || !fsm.Settled(i.State) {
		return 0, "", false
	}
	return h[len(h)-1].At.Sub(h[unknown].At), i.State, true
}

// countHTTP counts one served request of handler (a route's pattern,
// "other" when none matched).
func (m *Metrics) countHTTP(handler string, code int, d time.Duration) {
	m.http.WithLabelValues(handler, strconv.Itoa(code)).Inc()
	m.httpTime.WithLabelValues(handler).Observe(max(d.Seconds(), 0))
}

// readGauges sets the gauges from the figures over every intent, which
// only an unrestricted caller may read (service.Figures).
func (s *Server) readGauges(ctx context.Context, c *service.Caller) error {
	f, err := s.cfg.Service.Figures(ctx, *c)
	if err != nil {
		return err
	}
	m := s.metrics
	// Routes that left the views leave the gauge: it is set anew.
	m.intents.Reset()
	for route, states := range f.ByRouteState {
		for _, st := range fsm.AllStates() {
			if st != fsm.None {
				m.intents.WithLabelValues(string(st), route).Set(float64(states[st]))
			}
		}
		for st, n := range states {
			m.intents.WithLabelValues(string(st), route).Set(float64(n))
		}
	}
	age := 0.0
	if f.HaveUnknown {
		age = max(f.OldestUnknown.Seconds(), 0)
	}
	m.oldest.Set(age)
	m.checkpnt.Set(float64(f.Checkpoint))
	return nil
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, c *service.Caller) error {
	s.metrics.scrape.Lock()
	defer s.metrics.scrape.Unlock()
	if err := s.readGauges(r.Context(), c); err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).ServeHTTP(w, r)
	return nil
}
