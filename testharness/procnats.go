package testharness

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/deploy"
)

// NATSCluster is a cluster of real nats-server processes (the binary built
// from the module version go.mod pins) on loopback, each with its own
// store directory and configuration file, as an operator runs them: the
// shipped deploy/nats/n*.conf, only addresses, store and routes changed
// (renderNATSConf). Every route between two nodes and every client link
// to a node goes through a Proxy the test controls, so a node can be
// partitioned from the others and from its clients:
//
//   - node i reaches node j at Route[i][j] (a proxy to j's cluster port);
//   - a node advertises a closed port as its cluster address, so no node
//     learns a direct address by gossip and routes around a cut;
//   - cluster no_advertise keeps client URLs out of the INFO clients get,
//     so a client keeps to the proxied URLs it was given (ClientURLs).
//
// The test itself reads through DirectURLs, which no fault touches.
type NATSCluster struct {
	t     testing.TB
	Nodes []*NATSNode
	// Route[i][j] carries node i's route to node j (nil when i == j).
	Route    [][]*Proxy
	password string // the NATS user settle's, in every URL handed out
}

// NATSNode is one nats-server process of a NATSCluster.
type NATSNode struct {
	Proc  *Proc
	Name  string
	Store string // JetStream store directory
	// Client is the proxy clients reach the node through; Direct is the
	// node's own client address (host:port).
	Client *Proxy
	Direct string
	addrs  natsConfAddrs
}

// NATSClusterOptions tune StartNATSCluster.
type NATSClusterOptions struct {
	// Nodes is the cluster size (default 3; 1 is a single server without
	// a cluster).
	Nodes int
}

// NATSServerPackage is the main package of the nats-server binary: the
// module version go.mod pins, the same code settle embeds.
const NATSServerPackage = "github.com/nats-io/nats-server/v2"

// StartNATSCluster builds nats-server and starts a cluster of real
// processes, waiting until every node is healthy and, for a cluster,
// meshed (healthy only needs a quorum: a node can be healthy while one of
// its routes is still being made).
func StartNATSCluster(t testing.TB, opt NATSClusterOptions) *NATSCluster {
	t.Helper()
	n := opt.Nodes
	if n == 0 {
		n = 3
	}
	bin := BuildBinary(t, NATSServerPackage)
	c := &NATSCluster{t: t, password: randomHex(12), Route: make([][]*Proxy, n)}
	for i := 0; i < n; i++ {
		// advertise: nothing listens there.
		a := natsConfAddrs{client: freePort(t), monitor: freePort(t), cluster: freePort(t), advertise: freePort(t),
			store: filepath.Join(t.TempDir(), "store"), single: n == 1}
		direct := "127.0.0.1:" + strconv.Itoa(a.client)
		c.Nodes = append(c.Nodes, &NATSNode{Name: fmt.Sprintf("n%d", i+1), Store: a.store, Direct: direct,
			Client: StartProxy(t, direct), addrs: a})
	}
	for i := range c.Route {
		c.Route[i] = make([]*Proxy, n)
		for j, peer := range c.Nodes {
			if i != j {
				c.Route[i][j] = StartProxy(t, "127.0.0.1:"+strconv.Itoa(peer.addrs.cluster))
				c.Nodes[i].addrs.routes = append(c.Nodes[i].addrs.routes, c.Route[i][j].Addr())
			}
		}
	}
	env := []string{"SETTLE_NATS_PASSWORD=" + c.password, "READER_NATS_PASSWORD=" + randomHex(12)}
	for i, node := range c.Nodes {
		conf, err := renderNATSConf(i%deploy.Nodes+1, node.addrs)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(filepath.Dir(node.Store), "nats.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		node.Proc = StartProc(t, ProcSpec{Name: node.Name, Path: bin, Args: []string{"-c", path}, Env: env})
	}
	c.WaitHealthy(2 * time.Minute)
	if n > 1 {
		c.WaitMeshed(time.Minute)
	}
	return c
}

// freePort returns a port for a process the harness starts, from below
// the kernel's ephemeral range (32768 on Linux), each once per test
// process from an offset of its own: a ":0" port closed again can go to
// another test's ":0" listener before the process binds it, and a cluster
// then forms with another test's node.
func freePort(t testing.TB) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	if portNext == 0 {
		portNext = portLow + (os.Getpid()*37)%(portHigh-portLow)
	}
	for tries := 0; tries < portHigh-portLow; tries++ {
		p := portNext
		portNext = portLow + (portNext+1-portLow)%(portHigh-portLow)
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			_ = ln.Close()
			return p
		}
	}
	t.Fatal("no free port between 20000 and 32000")
	return 0
}

const portLow, portHigh = 20000, 32000

var (
	portMu   sync.Mutex
	portNext int
)

// URL is a client URL of addr (host:port) as the user settle.
func (c *NATSCluster) URL(addr string) string {
	return "nats://settle:" + c.password + "@" + addr
}

// ClientURLs lists every node's proxied client URL (what settle is
// given).
func (c *NATSCluster) ClientURLs() string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, c.URL(n.Client.Addr()))
	}
	return strings.Join(out, ",")
}

// DirectURLs lists the listed nodes' (all when none is) own client URLs
// (no proxy): the test reads the log through them.
func (c *NATSCluster) DirectURLs(nodes ...int) string {
	if len(nodes) == 0 {
		nodes = make([]int, len(c.Nodes))
		for i := range nodes {
			nodes[i] = i
		}
	}
	var out []string
	for _, i := range nodes {
		out = append(out, c.URL(c.Nodes[i].Direct))
	}
	return strings.Join(out, ",")
}

// Routes is how many peers node i has routes to (its /routez), or -1
// when its monitor does not answer.
func (c *NATSCluster) Routes(i int) int {
	var rz struct {
		Routes []struct {
			RemoteName string `json:"remote_name"`
		} `json:"routes"`
	}
	if err := c.Monitor(i, "/routez", &rz); err != nil {
		return -1
	}
	peers := map[string]bool{}
	for _, r := range rz.Routes {
		peers[r.RemoteName] = true
	}
	return len(peers)
}

// WaitMeshed waits until every node sees every other.
func (c *NATSCluster) WaitMeshed(timeout time.Duration) {
	c.t.Helper()
	c.waitAll(timeout, "meshed", func(i int) bool { return c.Routes(i) >= len(c.Nodes)-1 })
}

// WaitHealthy waits until every node says ok on its /healthz (JetStream
// enabled, current with its meta group, streams and consumers).
func (c *NATSCluster) WaitHealthy(timeout time.Duration) {
	c.t.Helper()
	c.waitAll(timeout, "healthy", func(i int) bool { return c.Monitor(i, "/healthz", &struct{}{}) == nil })
}

// waitAll polls until ok holds for every node, and fails the test with
// the output of those it does not hold for after timeout.
func (c *NATSCluster) waitAll(timeout time.Duration, what string, ok func(i int) bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var b strings.Builder
		for i, n := range c.Nodes {
			if !ok(i) {
				fmt.Fprintf(&b, "%s not %s:\n%s\n", n.Name, what, n.Proc.Tail(3000))
			}
		}
		if b.Len() == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("nats cluster not %s in %s\n%s", what, timeout, b.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Monitor decodes node i's monitoring endpoint path (/jsz, /routez, ...)
// into v; an answer other than 200 is an error.
func (c *NATSCluster) Monitor(i int, path string, v any) error {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d%s", c.Nodes[i].addrs.monitor, path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.Errorf("%s%s: %s", c.Nodes[i].Name, path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
