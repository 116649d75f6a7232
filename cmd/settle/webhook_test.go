package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// serve's --webhook flags are checked before anything starts; errors name
// the flag and the variable, never the secret's value.
func TestWebhookFlagsCheck(t *testing.T) {
	const secret = "whsec-flag-test-0123456789abcdef"
	parse := func(args ...string) *webhookFlags {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		w := registerWebhook(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return w
	}
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	if err := parse().check(env(nil)); err != nil {
		t.Fatalf("no --webhook: %v", err)
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want []string
	}{
		{[]string{"--webhook", "https://h/x"}, nil, []string{"--webhook-secret-env", `"SETTLE_WEBHOOK_SECRET" is not set`}},
		{[]string{"--webhook", "https://h/x", "--webhook-secret-env", "HOOK"}, map[string]string{"HOOK": "short"}, []string{"Secret: 5 bytes", "$HOOK"}},
		{[]string{"--webhook", "ftp://h/x"}, map[string]string{"SETTLE_WEBHOOK_SECRET": secret}, []string{"URL", "ftp"}},
		{[]string{"--webhook", "https://u:" + secret + "@h/x"}, map[string]string{"SETTLE_WEBHOOK_SECRET": secret}, []string{"user info"}},
		{[]string{"--webhook", "https://h/x", "--webhook-from", "yesterday", "--webhook-timeout", "0s", "--webhook-max-inflight", "0"},
			map[string]string{"SETTLE_WEBHOOK_SECRET": secret}, []string{"From", "Timeout", "MaxInFlight"}},
	} {
		err := parse(c.args...).check(env(c.env))
		if err == nil {
			t.Errorf("%v: no error", c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v lacks %q", c.args, err, w)
			}
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%v: the secret is in the error: %v", c.args, err)
		}
	}
	w := parse("--webhook", "http://127.0.0.1:9000/settle", "--webhook-max-inflight", "2")
	if err := w.check(env(map[string]string{"SETTLE_WEBHOOK_SECRET": secret})); err != nil {
		t.Fatal(err)
	}
	if string(w.cfg.Secret) != secret || w.cfg.MaxInFlight != 2 || w.cfg.URL != "http://127.0.0.1:9000/settle" {
		t.Fatalf("config %+v", w.cfg)
	}
}
