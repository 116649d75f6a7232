package main

import (
	"context"
	"flag"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/consumers/webhook"
)

// webhookFlags are serve's --webhook flags: settlements pushed to an HTTP
// endpoint, signed (consumers/webhook).
type webhookFlags struct {
	url, secretEnv, from string
	timeout, maxRetry    time.Duration
	inFlight             int
	cfg                  webhook.Config // built by check
}

// registerWebhook adds the flags to serve's.
func registerWebhook(fs *flag.FlagSet) *webhookFlags {
	w := &webhookFlags{}
	d := webhook.DefaultConfig()
	fs.StringVar(&w.url, "webhook", "", "POST each settlement (confirmed, rejected, failed, manual action, abandoned), signed, to this `URL`")
	fs.StringVar(&w.secretEnv, "webhook-secret-env", "SETTLE_WEBHOOK_SECRET", "environment `VARIABLE` holding the webhook signing secret (at least 16 bytes)")
	fs.StringVar(&w.from, "webhook-from", d.From, "where a new webhook consumer starts: new (settlements from now on) | all (every settlement on the log)")
	fs.DurationVar(&w.timeout, "webhook-timeout", d.Timeout, "a delivery attempt not answered 2xx within this `duration` has failed and is retried")
	fs.DurationVar(&w.maxRetry, "webhook-max-retry-delay", d.MaxRetryDelay, "longest pause between two attempts of one settlement (`duration`)")
	fs.IntVar(&w.inFlight, "webhook-max-inflight", d.MaxInFlight, "requests to the webhook endpoint at once")
	return w
}

// check builds the deliverer's configuration before anything starts:
// errors name the flags and the variable, never the secret's value.
func (w *webhookFlags) check(env func(string) (string, bool)) error {
	if w.url == "" {
		return nil
	}
	secret, ok := env(w.secretEnv)
	if !ok || secret == "" {
		return errors.Errorf("--webhook-secret-env: environment variable %q is not set (the webhook signing secret)", w.secretEnv)
	}
	c := webhook.DefaultConfig()
	c.URL, c.Secret, c.From, c.Timeout, c.MaxRetryDelay, c.MaxInFlight = w.url, webhook.Secret(secret), w.from, w.timeout, w.maxRetry, w.inFlight
	c.MaxPending = max(c.MaxPending, c.MaxInFlight)
	if err := c.Validate(); err != nil {
		return errors.Errorf("--webhook (secret from $%s): %w", w.secretEnv, err)
	}
	w.cfg = c
	return nil
}

// start runs the deliverer until ctx ends (on wg) and exports its
// counters on /metrics; nothing without --webhook.
func (w *webhookFlags) start(ctx context.Context, wg *sync.WaitGroup, js jetstream.JetStream, metrics *api.Metrics, logger *slog.Logger) {
	if w.url == "" {
		return
	}
	c := w.cfg
	c.Logger = logger
	d, err := webhook.New(js, c)
	if err != nil { // check validated the same configuration
		logger.Error("webhook: not started", "err", err)
		return
	}
	// The consumer exists before serve takes requests: a new one starts
	// after the log's last event (--webhook-from new) and misses none of
	// this process's settlements. If NATS cannot make it now, Run does.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := d.Prepare(pctx); err != nil {
		logger.Warn("webhook: consumer not made yet; trying again while serving", "err", err)
	}
	cancel()
	metrics.MustRegister(webhookCollector{d})
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = d.Run(ctx)
	}()
}

// webhookCollector exports a deliverer's Stats.
type webhookCollector struct{ d *webhook.Deliverer }

var (
	whDeliveries = prometheus.NewDesc("settle_webhook_deliveries_total",
		"Webhook deliveries by result: delivered (answered 2xx, acked), failed (an attempt without a 2xx: retried), dropped (a malformed event).",
		[]string{"result"}, nil)
	whInFlight = prometheus.NewDesc("settle_webhook_inflight_requests", "Webhook requests in flight.", nil, nil)
	whPending  = prometheus.NewDesc("settle_webhook_pending_events",
		"Events the webhook consumer has not finished, as it last reported: not yet read (of every type) plus read and waiting for a 2xx.", nil, nil)
	whLast = prometheus.NewDesc("settle_webhook_last_delivered_timestamp_seconds",
		"When the webhook endpoint last answered 2xx (0: never since start).", nil, nil)
)

func (webhookCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- whDeliveries
	ch <- whInFlight
	ch <- whPending
	ch <- whLast
}

func (c webhookCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.d.Stats()
	ch <- prometheus.MustNewConstMetric(whDeliveries, prometheus.CounterValue, float64(s.Delivered), "delivered")
	ch <- prometheus.MustNewConstMetric(whDeliveries, prometheus.CounterValue, float64(s.Failed), "failed")
	ch <- prometheus.MustNewConstMetric(whDeliveries, prometheus.CounterValue, float64(s.Dropped), "dropped")
	ch <- prometheus.MustNewConstMetric(whInFlight, prometheus.GaugeValue, float64(s.InFlight))
	ch <- prometheus.MustNewConstMetric(whPending, prometheus.GaugeValue, float64(s.Pending))
	last := 0.0
	if !s.LastDelivered.IsZero() {
		last = float64(s.LastDelivered.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(whLast, prometheus.GaugeValue, last)
}
