package testharness

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// OlderFormatMessage is what every reader of the log says of the stream
// OlderStream makes.
const OlderFormatMessage = "stream SETTLE_INTENTS holds log format 1 (no settle.log_format in its metadata); " +
	"this build reads log format 2 only: run the build that wrote it, or start this build on a new data directory " +
	"(on an external NATS server: a new stream); see docs/deploy.md#upgrades"

// OlderStream makes the intents stream SETTLE_INTENTS as a build before
// log formats were versioned made it (no events.FormatMetadata in its
// metadata), holding one intent's first event.
func OlderStream(t testing.TB, js jetstream.JetStream) {
	t.Helper()
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SETTLE_INTENTS",
		Description: "settle intents: one subject per intent, every lifecycle event",
		Subjects:    []string{events.AllSubjects}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		Discard: jetstream.DiscardNew, Replicas: 1, Duplicates: 10 * time.Minute, DenyDelete: true, DenyPurge: true,
		MaxMsgSize: events.MaxEventSize + 4096, AllowAtomicPublish: true, AllowDirect: true,
		Metadata: map[string]string{"settle.intent_ids": "scoped"}}); err != nil {
		t.Fatal(err)
	}
	e := RecordedEvent("social_post", "old-1", adapter.DefaultPolicy(), time.Now().UTC())
	b, err := events.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, events.Subject("social_post", e.IntentID), b); err != nil {
		t.Fatal(err)
	}
}

// CheckOlderStreamUnchanged fails t unless the stream OlderStream made is
// as it left it: still no log format, one message.
func CheckOlderStreamUnchanged(t testing.TB, js jetstream.JetStream) {
	t.Helper()
	st, err := js.Stream(context.Background(), "SETTLE_INTENTS")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, n := st.CachedInfo().Config, st.CachedInfo().State.Msgs; cfg.Metadata[events.FormatMetadata] != "" || n != 1 {
		t.Fatalf("the refused stream changed: metadata %v, %d messages", cfg.Metadata, n)
	}
}

// RefusesOlderFormat starts a node whose intents stream is of an older
// log format (OlderStream) and fails t unless open, a reader of the log
// opening on it, refuses it with events.ErrLogFormat and
// OlderFormatMessage, having made no consumer and left the stream as it
// was.
func RefusesOlderFormat(t testing.TB, open func(js jetstream.JetStream) error) {
	t.Helper()
	n := StartNode(t)
	OlderStream(t, n.JS)
	err := open(n.JS)
	if !errors.Is(err, events.ErrLogFormat) || !strings.Contains(err.Error(), OlderFormatMessage) {
		t.Fatalf("opened on an older log format: %v, want %q", err, OlderFormatMessage)
	}
	st, err := n.JS.Stream(context.Background(), "SETTLE_INTENTS")
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().State.Consumers; c != 0 {
		t.Fatalf("%d consumers on a refused stream", c)
	}
	CheckOlderStreamUnchanged(t, n.JS)
}
