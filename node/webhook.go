package node

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/consumers/webhook"
)

// openWebhook makes the deliverer of Config.Webhook (none without it) and
// its consumer, before the node takes requests: a new consumer starts
// after the log's last event (From "new") and misses none of this
// process's settlements. If NATS cannot make it now, Run does.
func (n *Node) openWebhook(ctx context.Context) error {
	if n.cfg.Webhook == nil {
		return nil
	}
	c := *n.cfg.Webhook
	c.Logger = n.cfg.Logger
	d, err := webhook.New(n.js, c)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := d.Prepare(pctx); err != nil {
		n.cfg.Logger.Warn("webhook: consumer not made yet; trying again while serving", "err", err)
	}
	cancel()
	n.metrics.MustRegister(webhookCollector{d})
	n.hook = d
	return nil
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
