package testharness

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/deploy"
)

// natsConfAddrs are what a test's node changes in the shipped
// configuration: its addresses (all on loopback), its store, the routes
// to its peers (each through a proxy), and the closed port it advertises.
type natsConfAddrs struct {
	client, monitor, cluster, advertise int
	store                               string
	routes                              []string // host:port of the proxies to the other nodes
	single                              bool     // a server without a cluster
}

// renderNATSConf is node n's configuration as deploy/nats/n<n>.conf ships
// it, with only the test's addresses, store directory and routes put in
// (and, in the cluster block, the advertised closed port and
// no_advertise that keep clients and peers on the proxies), or the
// cluster block removed for a single server. Everything else —
// sync_interval, limits, tags, accounts and users — is the shipped text.
// Each shipped line it replaces must be there exactly once: a changed
// file fails here, not silently.
func renderNATSConf(n int, a natsConfAddrs) (string, error) {
	src, err := deploy.NATSConfig(n)
	if err != nil {
		return "", err
	}
	lines := strings.Split(src, "\n")
	replaced := map[string]int{}
	var out []string
	inCluster, routesDone := false, false
	for _, line := range lines {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "cluster {"):
			inCluster = true
			replaced["cluster"]++
			if a.single {
				continue
			}
		case inCluster && line == "}":
			inCluster = false
			if a.single {
				continue
			}
		}
		if inCluster && a.single {
			continue
		}
		key := ""
		switch {
		case !inCluster && t == "listen: 0.0.0.0:4222":
			key, line = "client listen", fmt.Sprintf("listen: 127.0.0.1:%d", a.client)
		case !inCluster && strings.HasPrefix(t, "http: 127.0.0.1:8222"):
			key, line = "http", fmt.Sprintf("http: 127.0.0.1:%d", a.monitor)
		case t == "store_dir: /var/lib/nats":
			key, line = "store_dir", fmt.Sprintf("  store_dir: %q", a.store)
		case inCluster && t == "listen: 0.0.0.0:6222":
			key = "cluster listen"
			line = fmt.Sprintf("  listen: 127.0.0.1:%d\n  advertise: \"127.0.0.1:%d\"\n  no_advertise: true", a.cluster, a.advertise)
		case inCluster && strings.HasPrefix(t, "nats-route://") && strings.HasSuffix(t, ".internal:6222"):
			replaced["route"]++
			if !routesDone {
				routesDone = true
				for _, r := range a.routes {
					out = append(out, "    nats-route://"+r)
				}
			}
			continue
		}
		if key != "" {
			replaced[key]++
		}
		out = append(out, line)
	}
	want := map[string]int{"client listen": 1, "http": 1, "store_dir": 1, "cluster": 1, "cluster listen": 1, "route": deploy.Nodes}
	if a.single {
		want["cluster listen"], want["route"] = 0, 0
	}
	for k, v := range want {
		if replaced[k] != v {
			return "", errors.Newf("deploy/nats/n%d.conf: %q found %d time(s), want %d: the test harness no longer matches the shipped file", n, k, replaced[k], v)
		}
	}
	return strings.Join(out, "\n"), nil
}

// randomHex is n random bytes in hex (a password of the test's cluster).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
