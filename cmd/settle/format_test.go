package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/node"
	"github.com/settle-dev/settle/testharness"
)

// olderStream makes, in data's store, the intents stream as a build before
// log formats were versioned made it (no settle.log_format in its
// metadata), holding one intent's first event, and returns the store
// directory.
func olderStream(t *testing.T, data string) string {
	t.Helper()
	store := filepath.Join(data, node.JetStreamDir)
	srv, err := embedded.Start(embedded.Config{Dir: store, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	js := testharness.JetStreamOf(t)(srv.Connect())
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SETTLE_INTENTS",
		Description: "settle intents: one subject per intent, every lifecycle event",
		Subjects:    []string{events.AllSubjects}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		Discard: jetstream.DiscardNew, Replicas: 1, Duplicates: 10 * time.Minute, DenyDelete: true, DenyPurge: true,
		MaxMsgSize: events.MaxEventSize + 4096, AllowAtomicPublish: true, AllowDirect: true,
		Metadata: map[string]string{"settle.intent_ids": "scoped"}}); err != nil {
		t.Fatal(err)
	}
	e := testharness.RecordedEvent("social_post", "old-1", adapter.DefaultPolicy(), time.Now().UTC())
	b, err := events.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, events.Subject("social_post", e.IntentID), b); err != nil {
		t.Fatal(err)
	}
	return store
}

// A stream of another log format is refused at start by serve, mcp and
// the audit, each with the message naming both formats and what to do:
// nothing reports ready, nothing is read or changed.
func TestAnOlderLogFormatIsRefusedByServeMCPAndAudit(t *testing.T) {
	testharness.SkipShort(t, "embedded nats-servers")
	api := fakeapi.NewSocialAPIServer(fakeapi.SocialConfig{})
	t.Cleanup(api.Close)
	t.Setenv("SOCIAL_BASE_URL", api.URL())
	t.Setenv("SOCIAL_TOKEN", api.Token())
	data := t.TempDir()
	store := olderStream(t, data)
	const want = "stream SETTLE_INTENTS holds log format 1 (no settle.log_format in its metadata); " +
		"this build reads log format 2 only: run the build that wrote it, or start this build on a new data directory (on an external NATS server: a new stream); see docs/deploy.md#upgrades"
	routes := "../../examples/routes/social.yaml"
	for _, c := range []struct {
		name string
		args []string
	}{
		{"serve", []string{"serve", "--dev", "--addr", "127.0.0.1:0", "--data", data, "--routes", routes}},
		{"mcp", []string{"mcp", "--data", data, "--routes", routes}},
		{"audit", []string{"audit", "--data", data}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := m.Run(ctx, c.args)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("settle %s: %v, want an error saying %q\nstdout: %s\nstderr: %s", c.name, err, want, out.String(), errb.String())
			}
			if strings.Contains(out.String(), "serving") || strings.Contains(out.String(), "result:") {
				t.Fatalf("settle %s went on:\n%s", c.name, out.String())
			}
		})
	}
	// The stream is as the older build left it.
	srv, err := embedded.Start(embedded.Config{Dir: store, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	st, err := testharness.JetStreamOf(t)(srv.Connect()).Stream(context.Background(), "SETTLE_INTENTS")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, n := st.CachedInfo().Config, st.CachedInfo().State.Msgs; cfg.Metadata[events.FormatMetadata] != "" || n != 1 {
		t.Fatalf("the refused stream changed: metadata %v, %d messages", cfg.Metadata, n)
	}
}
