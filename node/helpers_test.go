package node

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// running is a node whose Run goes on until closeNode.
type running struct {
	*Node
	stop context.CancelFunc
	ran  chan error
}

func newFakeSocial(t testing.TB) *fakeapi.SocialAPI {
	api := fakeapi.NewSocialAPIServer(fakeapi.SocialConfig{})
	t.Cleanup(api.Close)
	return api
}

// openNode opens and runs a node on the fake social API; logs collects
// its log lines; edit changes the config first.
func openNode(t testing.TB, api *fakeapi.SocialAPI, logs *testharness.SyncBuffer, edit func(*Config)) *running {
	t.Helper()
	testharness.SkipShort(t, "an embedded nats-server")
	ad := testharness.ExampleRoute(t, "social.yaml", api).Adapter
	cfg := DefaultConfig()
	cfg.Command, cfg.Actor, cfg.Data = "test", "test", t.TempDir()
	cfg.Routes = []adapter.Route{{Name: "social_post", Adapter: ad, Policy: adapter.DefaultPolicy()}}
	cfg.Logger = NewLogger(logs, LogText, adapter.NewScrubber(api.Token()))
	if edit != nil {
		edit(&cfg)
	}
	n, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &running{Node: n, stop: stop, ran: make(chan error, 1)}
	go func() { r.ran <- n.Run(ctx) }()
	return r
}

// closeNode stops the node's Run and closes it.
func closeNode(r *running) {
	r.stop()
	<-r.ran
	r.Close()
}

// testNode is openNode, Started, and closed when t ends.
func testNode(t testing.TB, api *fakeapi.SocialAPI, logs *testharness.SyncBuffer, edit func(*Config)) *Node {
	t.Helper()
	r := openNode(t, api, logs, edit)
	t.Cleanup(func() { closeNode(r) })
	if err := r.Started(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r.Node
}

// startedOrDamaged waits (a minute at most) for Started.
func startedOrDamaged(t *testing.T, r *running) error {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	return r.Started(ctx)
}

// startStore starts an embedded server on data's store, as a node would.
func startStore(t *testing.T, data string) *embedded.Server {
	t.Helper()
	testharness.SkipShort(t, "an embedded nats-server")
	srv, err := embedded.Start(embedded.Config{Dir: filepath.Join(data, JetStreamDir), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}
