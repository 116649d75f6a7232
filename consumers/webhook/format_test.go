package webhook

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/testharness"
)

// The webhook deliverer refuses a stream of another log format before it
// creates its consumer, naming both formats.
func TestPrepareRefusesAnOlderLogFormat(t *testing.T) {
	testharness.RefusesOlderFormat(t, func(js jetstream.JetStream) error {
		d, err := New(js, testConfig("http://127.0.0.1:1", &testharness.SyncBuffer{}))
		if err != nil {
			t.Fatal(err)
		}
		return d.Prepare(context.Background())
	})
}
