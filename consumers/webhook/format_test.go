package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/testharness"
)

// The webhook deliverer refuses a stream of another log format before it
// creates its consumer, naming both formats.
func TestPrepareRefusesAnOlderLogFormat(t *testing.T) {
	n := testharness.StartNode(t)
	testharness.OlderStream(t, n.JS)
	d, err := New(n.JS, testConfig("http://127.0.0.1:1", &testharness.SyncBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	err = d.Prepare(context.Background())
	if !errors.Is(err, events.ErrLogFormat) || !strings.Contains(err.Error(), testharness.OlderFormatMessage) {
		t.Fatalf("prepare: %v, want %q", err, testharness.OlderFormatMessage)
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
