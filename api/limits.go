package api

import (
	"context"
	"net/http"

	"github.com/cockroachdb/errors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/settle-dev/settle/ledger"
)

// DefaultMaxInFlight is Config.MaxInFlight's default: API requests served
// at once. Each holds a goroutine, its body and, for a submit, a write
// that may wait on the external API for its whole timeout; past the
// bound a request is refused at once (503, Retry-After) rather than
// queued without limit.
const DefaultMaxInFlight = 1024

// ReadyCheck is one more check of /readyz: Check returns nil when the
// part it watches works, or why it does not (a safe, operator-facing
// text: it is logged and its words reach the problem's detail).
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// inflight bounds concurrent API requests and counts them.
type inflight struct {
	slots chan struct{}
	gauge prometheus.Gauge
	shed  prometheus.Counter
}

func newInflight(max int, m *Metrics) *inflight {
	f := &inflight{
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "settle_api_inflight_requests",
			Help: "API requests being served now (bounded by MaxInFlight)."}),
		shed: prometheus.NewCounter(prometheus.CounterOpts{Name: "settle_api_shed_total",
			Help: "API requests refused with 503 because MaxInFlight were being served."}),
	}
	if max > 0 {
		f.slots = make(chan struct{}, max)
	}
	// Servers sharing one Metrics share these too.
	f.gauge = registerOnce(m, f.gauge).(prometheus.Gauge)
	f.shed = registerOnce(m, f.shed).(prometheus.Counter)
	return f
}

// registerOnce registers c, or returns the collector already registered
// under its name.
func registerOnce(m *Metrics, c prometheus.Collector) prometheus.Collector {
	if err := m.reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return are.ExistingCollector
		}
		panic(err)
	}
	return c
}

// acquire takes a slot; false when all are taken (the request is shed).
func (f *inflight) acquire() bool {
	if f.slots != nil {
		select {
		case f.slots <- struct{}{}:
		default:
			f.shed.Inc()
			return false
		}
	}
	f.gauge.Inc()
	return true
}

func (f *inflight) release() {
	f.gauge.Dec()
	if f.slots != nil {
		<-f.slots
	}
}

// overloaded is the answer to a request shed by the in-flight bound.
func overloaded(w http.ResponseWriter) *Problem {
	w.Header().Set("Retry-After", "1")
	return newProblem(http.StatusServiceUnavailable, ProbUnavailable, "the server is serving as many requests as it may; nothing was done; retry shortly")
}

// unavailableProblem answers a write refused before anything was
// appended because the log cannot take it (ledger.ErrLogUnavailable):
// why, in fixed words, and when to come back.
func unavailableProblem(w http.ResponseWriter, err error) *Problem {
	why := "the log cannot take writes now"
	switch {
	case errors.Is(err, ledger.ErrDiskFull):
		why = "the log's disk is full"
	case errors.Is(err, ledger.ErrClockOffset):
		why = "this server's clock is off by more than the allowed skew"
	case errors.Is(err, ledger.ErrLogDamaged):
		why = "the log lost events and this server refuses to write until an operator acts"
	case errors.Is(err, ledger.ErrNotConnected):
		why = "this server cannot reach the log (NATS)"
	case errors.Is(err, ledger.ErrLogVerifying):
		why = "the log is being verified after a start"
	}
	w.Header().Set("Retry-After", "5")
	return newProblem(http.StatusServiceUnavailable, ProbUnavailable, why+"; nothing was recorded or written; retry later")
}

// MustRegister adds collectors (the wiring's own gauges: reconciler
// pending, projector lag, the log's health) to the registry /metrics
// serves.
func (m *Metrics) MustRegister(cs ...prometheus.Collector) { m.reg.MustRegister(cs...) }
