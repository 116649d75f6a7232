package receipts

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/testharness"
)

// A downstream subscriber refuses a stream of another log format before
// it creates its consumer, naming both formats.
func TestSubscribeRefusesAnOlderLogFormat(t *testing.T) {
	n := testharness.StartNode(t)
	testharness.OlderStream(t, n.JS)
	_, err := Subscribe(context.Background(), n.JS, SubscribeConfig{Durable: "announcer"}, func(context.Context, Delivery) error {
		t.Error("a delivery from a stream of another format")
		return nil
	})
	if !errors.Is(err, events.ErrLogFormat) || !strings.Contains(err.Error(), testharness.OlderFormatMessage) {
		t.Fatalf("subscribe: %v, want %q", err, testharness.OlderFormatMessage)
	}
	st, err := n.JS.Stream(context.Background(), "SETTLE_INTENTS")
	if err != nil {
		t.Fatal(err)
	}
	if st.CachedInfo().State.Consumers != 0 {
		t.Fatalf("%d consumers on a refused stream", st.CachedInfo().State.Consumers)
	}
	testharness.CheckOlderStreamUnchanged(t, n.JS)
}
