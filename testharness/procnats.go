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
// shipped deploy/nats/n*.conf (JetStream with sync_interval: always, the
// account SETTLE with its users settle and reader), only addresses, store
// and routes changed. Every route between two nodes and
// every client link to a node goes through a Proxy the test controls, so
// a node can be partitioned from the others and from its clients:
//
//   - node i reaches node j at Route[i][j] (a proxy to j's cluster port);
//   - a node advertises a closed port as its cluster address, so no node
//     learns a direct address by gossip and routes around a cut;
//   - cluster no_advertise keeps client URLs out of the INFO clients get,
//     so a client keeps to the proxied URLs it was given (ClientURLs).
//
// The test itself reads through DirectURL, which no fault touches.
type NATSCluster struct {
	t     testing.TB
	Name  string
	Nodes []*NATSNode
	// Route[i][j] carries node i's route to node j (nil when i == j).
	Route [][]*Proxy
	// password is the NATS user settle's (deploy/nats: the account
	// SETTLE); every URL the cluster hands out carries it.
	password string
}

// NATSNode is one nats-server process of a NATSCluster.
type NATSNode struct {
	Proc  *Proc
	Name  string
	Store string // JetStream store directory
	Conf  string // configuration file
	// Client is the proxy clients reach the node through.
	Client        *Proxy
	clientPort    int
	clusterPort   int
	monitorPort   int
	advertisePort int
}

// NATSClusterOptions tune StartNATSCluster.
type NATSClusterOptions struct {
	// Nodes is the cluster size (default 3; 1 is a single server without
	// a cluster).
	Nodes int
	// Extra is appended to every node's configuration file (e.g. limits).
	Extra string
}

// StartNATSCluster builds nats-server and starts a cluster of real
// processes, waiting until every node is healthy.
func StartNATSCluster(t testing.TB, opt NATSClusterOptions) *NATSCluster {
	t.Helper()
	if opt.Nodes == 0 {
		opt.Nodes = 3
	}
	bin := BuildBinary(t, NATSServerPackage)
	c := &NATSCluster{t: t, Name: "settle"}
	n := opt.Nodes
	for i := 0; i < n; i++ {
		node := &NATSNode{Name: fmt.Sprintf("n%d", i+1), Store: filepath.Join(t.TempDir(), "store")}
		node.clientPort = freePort(t)
		node.clusterPort = freePort(t)
		node.monitorPort = freePort(t)
		node.advertisePort = freePort(t) // nothing listens there
		node.Client = StartProxy(t, "127.0.0.1:"+strconv.Itoa(node.clientPort))
		c.Nodes = append(c.Nodes, node)
	}
	c.Route = make([][]*Proxy, n)
	for i := range c.Route {
		c.Route[i] = make([]*Proxy, n)
		for j := 0; j < n; j++ {
			if i != j {
				c.Route[i][j] = StartProxy(t, "127.0.0.1:"+strconv.Itoa(c.Nodes[j].clusterPort))
			}
		}
	}
	c.password = randomHex(12)
	env := []string{"SETTLE_NATS_PASSWORD=" + c.password, "READER_NATS_PASSWORD=" + randomHex(12)}
	for i, node := range c.Nodes {
		var routes []string
		for j := 0; j < n; j++ {
			if i != j {
				routes = append(routes, c.Route[i][j].Addr())
			}
		}
		node.Conf = filepath.Join(filepath.Dir(node.Store), "nats.conf")
		// The shipped configuration (deploy/nats), with this test's
		// addresses, store and routes (procnatsconf.go).
		conf, err := renderNATSConf(i%deploy.Nodes+1, natsConfAddrs{client: node.clientPort, monitor: node.monitorPort,
			cluster: node.clusterPort, advertise: node.advertisePort, store: node.Store, routes: routes, single: n == 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(node.Conf, []byte(conf+"\n"+opt.Extra+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		node.Proc = StartProc(t, ProcSpec{Name: node.Name, Path: bin, Args: []string{"-c", node.Conf}, Env: env})
	}
	c.WaitHealthy(2*time.Minute, c.all()...)
	// Healthy is JetStream current with its meta group, which a quorum
	// gives: a node can be healthy while one of its routes is still being
	// made. The cluster is handed over whole.
	if n > 1 {
		c.WaitMeshed(time.Minute)
	}
	return c
}

// freePort returns a port for a process the harness starts. It is
// handed out once per test process from below the kernel's ephemeral
// range (which starts at 32768 on Linux): a port asked of the kernel
// (":0") and closed again can be handed to the next ":0" listener — a
// proxy of a test running in parallel — before the process it was meant
// for binds it, and a cluster then forms with another test's node (seen
// as a node never healthy, its routes reset). Each test process starts
// at its own offset; a port found taken is skipped.
func freePort(t testing.TB) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	if portNext == 0 {
		portNext = portLow + (os.Getpid()*37)%(portHigh-portLow)
	}
	for tries := 0; tries < portHigh-portLow; tries++ {
		p := portNext
		portNext++
		if portNext >= portHigh {
			portNext = portLow
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // taken
		}
		_ = ln.Close()
		return p
	}
	t.Fatal("no free port between 20000 and 32000")
	return 0
}

const portLow, portHigh = 20000, 32000

var (
	portMu   sync.Mutex
	portNext int
)

// url is a client URL of addr as the user settle.
func (c *NATSCluster) url(addr string) string {
	return "nats://settle:" + c.password + "@" + addr
}

func (c *NATSCluster) all() []int {
	out := make([]int, len(c.Nodes))
	for i := range out {
		out[i] = i
	}
	return out
}

// ClientURLs is the comma-separated list of every node's proxied client
// URL (what settle is given).
func (c *NATSCluster) ClientURLs() string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, c.url(n.Client.Addr()))
	}
	return strings.Join(out, ",")
}

// DirectURLs lists the nodes' own client URLs (no proxy): the test reads
// the log through them.
func (c *NATSCluster) DirectURLs(nodes ...int) string {
	if len(nodes) == 0 {
		nodes = c.all()
	}
	var out []string
	for _, i := range nodes {
		out = append(out, c.url("127.0.0.1:"+strconv.Itoa(c.Nodes[i].clientPort)))
	}
	return strings.Join(out, ",")
}

// ClientLinks makes a new proxy to every node's client port, for one
// client of its own (a second settle process the test partitions alone
// from NATS), and returns their URL list and the proxies.
func (c *NATSCluster) ClientLinks() (string, []*Proxy) {
	var urls []string
	var links []*Proxy
	for _, n := range c.Nodes {
		p := StartProxy(c.t, "127.0.0.1:"+strconv.Itoa(n.clientPort))
		links = append(links, p)
		urls = append(urls, c.url(p.Addr()))
	}
	return strings.Join(urls, ","), links
}

// Kill9 kills node i with SIGKILL.
func (c *NATSCluster) Kill9(i int) { c.t.Helper(); c.Nodes[i].Proc.Kill9() }

// Stop stops node i with SIGTERM and waits for it.
func (c *NATSCluster) Stop(i int) {
	c.t.Helper()
	if code := c.Nodes[i].Proc.Term(time.Minute); code == -1 {
		c.t.Fatalf("%s did not stop after SIGTERM", c.Nodes[i].Name)
	}
}

// Start starts node i again with its store and configuration.
func (c *NATSCluster) Start(i int) { c.t.Helper(); c.Nodes[i].Proc.Start() }

// Wipe deletes node i's store (the node must be stopped): a node that
// comes back with an empty disk.
func (c *NATSCluster) Wipe(i int) {
	c.t.Helper()
	if c.Nodes[i].Proc.Running() {
		c.t.Fatalf("wipe %s: the node is running", c.Nodes[i].Name)
	}
	if err := os.RemoveAll(c.Nodes[i].Store); err != nil {
		c.t.Fatal(err)
	}
}

// Isolate cuts node i from every other node and from its clients.
func (c *NATSCluster) Isolate(i int) {
	for j := range c.Nodes {
		if j != i {
			c.Route[i][j].Cut()
			c.Route[j][i].Cut()
		}
	}
	c.Nodes[i].Client.Cut()
}

// Heal undoes Isolate(i).
func (c *NATSCluster) Heal(i int) {
	for j := range c.Nodes {
		if j != i {
			c.Route[i][j].Heal()
			c.Route[j][i].Heal()
		}
	}
	c.Nodes[i].Client.Heal()
}

// Routes is how many routes node i reports (its /routez), or -1 when its
// monitor does not answer.
func (c *NATSCluster) Routes(i int) int {
	var rz struct {
		NumRoutes int `json:"num_routes"`
		Routes    []struct {
			RemoteName string `json:"remote_name"`
		} `json:"routes"`
	}
	if err := c.monitor(i, "/routez", &rz); err != nil {
		return -1
	}
	peers := map[string]bool{}
	for _, r := range rz.Routes {
		peers[r.RemoteName] = true
	}
	return len(peers)
}

// WaitIsolated waits until node i sees no peer and no peer sees it: the
// cut is real (no route found its way around the proxies).
func (c *NATSCluster) WaitIsolated(i int, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok := c.Routes(i) == 0
		for j := range c.Nodes {
			if j != i && c.Nodes[j].Proc.Running() && c.Routes(j) != len(c.Nodes)-2 {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s still has routes %s after the cut", c.Nodes[i].Name, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitMeshed waits until every listed node sees every other listed node.
func (c *NATSCluster) WaitMeshed(timeout time.Duration, nodes ...int) {
	c.t.Helper()
	c.waitAll(timeout, 100*time.Millisecond, nodes, func(i, n int) bool { return c.Routes(i) >= n-1 }, func(nodes []int) string {
		return fmt.Sprintf("nats cluster: nodes %v not meshed in %s", nodes, timeout)
	})
}

// waitAll waits until ok holds for every listed node (all when none is;
// n is how many), polling every poll, and fails the test with why's
// message after timeout.
func (c *NATSCluster) waitAll(timeout, poll time.Duration, nodes []int, ok func(i, n int) bool, why func(nodes []int) string) {
	c.t.Helper()
	if len(nodes) == 0 {
		nodes = c.all()
	}
	deadline := time.Now().Add(timeout)
	for {
		all := true
		for _, i := range nodes {
			all = all && ok(i, len(nodes))
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s", why(nodes))
		}
		time.Sleep(poll)
	}
}

// Healthy reports whether node i's /healthz says ok (JetStream enabled,
// current with its meta group, streams and consumers).
func (c *NATSCluster) Healthy(i int) bool {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", c.Nodes[i].monitorPort))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// WaitHealthy waits until every listed node is healthy.
func (c *NATSCluster) WaitHealthy(timeout time.Duration, nodes ...int) {
	c.t.Helper()
	c.waitAll(timeout, 200*time.Millisecond, nodes, func(i, _ int) bool { return c.Healthy(i) }, func(nodes []int) string {
		var b strings.Builder
		for _, i := range nodes {
			fmt.Fprintf(&b, "%s healthy=%v\n%s\n", c.Nodes[i].Name, c.Healthy(i), c.Nodes[i].Proc.Tail(3000))
		}
		return fmt.Sprintf("nats cluster not healthy in %s\n%s", timeout, b.String())
	})
}

// StreamLeader is the index of the node leading stream (by its /jsz), or
// -1 when no running node says it leads.
func (c *NATSCluster) StreamLeader(stream string) int {
	for i, n := range c.Nodes {
		if !n.Proc.Running() {
			continue
		}
		var jsz struct {
			AccountDetails []struct {
				Streams []struct {
					Name    string `json:"name"`
					Cluster struct {
						Leader string `json:"leader"`
					} `json:"cluster"`
				} `json:"stream_detail"`
			} `json:"account_details"`
		}
		if err := c.monitor(i, "/jsz?streams=true", &jsz); err != nil {
			continue
		}
		for _, a := range jsz.AccountDetails {
			for _, s := range a.Streams {
				if s.Name == stream && s.Cluster.Leader == n.Name {
					return i
				}
			}
		}
	}
	return -1
}

func (c *NATSCluster) monitor(i int, path string, v any) error {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d%s", c.Nodes[i].monitorPort, path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.Errorf("%s%s: %s", c.Nodes[i].Name, path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
