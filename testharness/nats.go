package testharness

import (
	"flag"
	"runtime"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/embedded"
)

// Node is one embedded nats-server with JetStream and a t.TempDir() store,
// plus a client connection. Restart keeps the store and the port.
type Node struct {
	t   testing.TB
	Srv *embedded.Server
	NC  *nats.Conn
	JS  jetstream.JetStream
	cfg embedded.Config
}

// StartNode starts a single node (fsync always unless durability says
// otherwise) listening on loopback, and connects to it (skipped under
// -short).
func StartNode(t testing.TB, durability ...embedded.Durability) *Node {
	t.Helper()
	SkipShort(t, "an embedded nats-server")
	cfg := embedded.DefaultConfig(t.TempDir())
	if len(durability) > 0 {
		cfg.Durability = durability[0]
	}
	n := &Node{t: t, cfg: cfg}
	n.start()
	t.Cleanup(n.Stop)
	return n
}

func (n *Node) start() {
	n.t.Helper()
	srv, err := embedded.Start(n.cfg)
	if err != nil {
		n.t.Fatalf("start nats-server: %v", err)
	}
	n.Srv = srv
	restoreBlockProfile()
	n.cfg.Port = srv.Port()
	nc, js := n.Connect()
	n.NC, n.JS = nc, js
}

// Connect opens another connection (a second "process").
func (n *Node) Connect() (*nats.Conn, jetstream.JetStream) {
	n.t.Helper()
	nc, err := n.Srv.Connect()
	return nc, JetStreamOf(n.t)(nc, err)
}

// URL is the client URL.
func (n *Node) URL() string { return n.Srv.ClientURL() }

// Restart stops the server (the store stays) and starts it again on the
// same port; NC and JS are replaced by fresh ones.
func (n *Node) Restart() { n.RestartAfter(func(string) {}) }

// RestartAfter restarts the server as Restart, running damage on its
// stopped store (its directory) in between.
func (n *Node) RestartAfter(damage func(dir string)) {
	n.t.Helper()
	n.NC.Close()
	n.Srv.Stop()
	damage(n.cfg.Dir)
	n.start()
}

// Stop stops the server (at the test's end already).
func (n *Node) Stop() {
	if n.NC != nil {
		n.NC.Close()
	}
	if n.Srv != nil && n.Srv.Running() {
		n.Srv.Stop()
	}
}

// StartCluster starts a real 3-node cluster on loopback, each node with its
// own t.TempDir() store (skipped under -short).
func StartCluster(t testing.TB, durability embedded.Durability) *embedded.Cluster {
	t.Helper()
	SkipShort(t, "a 3-node nats-server cluster")
	c, err := embedded.StartCluster("settle-test", []string{t.TempDir(), t.TempDir(), t.TempDir()}, durability)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// SkipShort skips t under go test -short (the fast tier), naming what it
// needs that the fast tier leaves out (a nats-server, the built binary).
func SkipShort(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: needs %s (make test runs it)", needs)
	}
}

// JetStreamOf takes a connection as nats.Connect returns it, fails t on
// its error, closes it when t ends, and returns its JetStream context:
// JetStreamOf(t)(nats.Connect(url)).
func JetStreamOf(t testing.TB) func(*nats.Conn, error) jetstream.JetStream {
	return func(nc *nats.Conn, err error) jetstream.JetStream {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
}

// restoreBlockProfile sets the block profile rate go test's -blockprofile
// asked for again: a starting nats-server turns it off.
func restoreBlockProfile() {
	if f := flag.Lookup("test.blockprofile"); f == nil || f.Value.String() == "" {
		return
	}
	rate := 1
	if f := flag.Lookup("test.blockprofilerate"); f != nil {
		if r, err := strconv.Atoi(f.Value.String()); err == nil && r > 0 {
			rate = r
		}
	}
	runtime.SetBlockProfileRate(rate)
}
