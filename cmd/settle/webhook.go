package main

import (
	"flag"
	"time"

	"github.com/cockroachdb/errors"

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

// config is the deliverer's configuration check built (nil without
// --webhook): the node runs it (node.Config.Webhook).
func (w *webhookFlags) config() *webhook.Config {
	if w.url == "" {
		return nil
	}
	c := w.cfg
	return &c
}
