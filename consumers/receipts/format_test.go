package receipts

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/testharness"
)

// A downstream subscriber refuses a stream of another log format before
// it creates its consumer, naming both formats.
func TestSubscribeRefusesAnOlderLogFormat(t *testing.T) {
	testharness.RefusesOlderFormat(t, func(js jetstream.JetStream) error {
		_, err := Subscribe(context.Background(), js, SubscribeConfig{Durable: "announcer"}, func(context.Context, Delivery) error {
			t.Error("a delivery from a stream of another format")
			return nil
		})
		return err
	})
}
