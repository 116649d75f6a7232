package testharness

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
)

// OpenStore opens the log on js with the default configuration, changed
// by mod.
func OpenStore(t testing.TB, js jetstream.JetStream, mod ...func(*ledger.StoreConfig)) *ledger.Store {
	t.Helper()
	cfg := ledger.DefaultStoreConfig()
	for _, m := range mod {
		m(&cfg)
	}
	s, err := ledger.OpenStore(context.Background(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// BatchMin opens a store whose group commit batches every flush of at
// least min messages (OpenStore's mod).
func BatchMin(min int) func(*ledger.StoreConfig) {
	return func(c *ledger.StoreConfig) { c.BatchMin = min }
}

// RawHistory reads every message of an intent's subject with its headers.
func RawHistory(t testing.TB, s *ledger.Store, route, intentID string) []*jetstream.RawStreamMsg {
	t.Helper()
	var out []*jetstream.RawStreamMsg
	seq := uint64(1)
	for {
		m, err := s.Stream().GetMsg(context.Background(), seq, jetstream.WithGetMsgSubject(events.Subject(route, intentID)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
		seq = m.Sequence + 1
	}
}

// Dir is the node's JetStream store directory.
func (n *Node) Dir() string { return n.cfg.Dir }

// ConnectJS connects to url (closed when the test ends) and returns its
// JetStream context.
func ConnectJS(t testing.TB, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	return JetStreamOf(t)(nats.Connect(url, opts...))
}

// OpenStoreWhenReady opens the store with cfg on js, trying again (each
// attempt bounded by apiAttempt, as CreateStream's) while a cluster still
// elects its leaders, until ctx ends.
func OpenStoreWhenReady(ctx context.Context, t testing.TB, js jetstream.JetStream, cfg ledger.StoreConfig) *ledger.Store {
	t.Helper()
	for {
		actx, cancel := context.WithTimeout(ctx, apiAttempt)
		s, err := ledger.OpenStore(actx, js, cfg)
		cancel()
		if err == nil {
			return s
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // the meta leader may still be settling
	}
}
