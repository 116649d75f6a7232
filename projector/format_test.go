package projector

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/testharness"
)

// The projector refuses a stream of another log format when it opens,
// naming both formats, and projects nothing of it.
func TestOpenRefusesAnOlderLogFormat(t *testing.T) {
	testharness.RefusesOlderFormat(t, func(js jetstream.JetStream) error {
		_, err := Open(context.Background(), js, Config{DBPath: t.TempDir() + "/v.db", Logger: quietLogger()})
		return err
	})
}
