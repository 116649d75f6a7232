package testharness

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/ledger"
)

// apiAttempt bounds one JetStream API request of the helpers that try
// again while a cluster forms (CreateStream, OpenStoreWhenReady).
const apiAttempt = 10 * time.Second

// CreateStream creates a stream on a cluster that may have just formed,
// as settle's store does: an attempt left unanswered (a meta leader that
// never answers, seen under load with every node healthy and meshed) or
// refused because the cluster cannot place the stream yet is made again
// for two minutes; any other error fails t. Creating a stream with the
// same configuration again is no change.
func CreateStream(t testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for tries := 1; ; tries++ {
		ctx, cancel := context.WithTimeout(context.Background(), apiAttempt)
		_, err := js.CreateStream(ctx, cfg)
		cancel()
		switch {
		case err == nil:
			return
		case !ledger.ClusterNotReady(err):
			t.Fatalf("create stream %s: %v", cfg.Name, err)
		case time.Now().After(deadline):
			t.Fatalf("create stream %s: %d tries in 2 minutes, the last: %v", cfg.Name, tries, err)
		default:
			t.Logf("create stream %s: %v; trying again", cfg.Name, err)
			time.Sleep(time.Second)
		}
	}
}
