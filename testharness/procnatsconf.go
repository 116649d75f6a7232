package testharness

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
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

var (
	clusterBlock  = regexp.MustCompile(`(?ms)^cluster \{\n.*?^\}\n`)
	shippedRoutes = regexp.MustCompile(`(?m)(^ +nats-route://\S+\.internal:6222\n)+`)
)

// renderNATSConf is node n's configuration as deploy/nats/n<n>.conf ships
// it, with only the test's addresses, store directory and routes put in
// (and, in the cluster block, the advertised closed port and
// no_advertise that keep clients and peers on the proxies), or the
// cluster block removed for a single server. Everything else —
// sync_interval, limits, tags, accounts and users — is the shipped text.
// Each shipped text it replaces must be there exactly once: a changed
// file fails here, not silently.
func renderNATSConf(n int, a natsConfAddrs) (string, error) {
	conf, err := deploy.NATSConfig(n)
	if err != nil {
		return "", err
	}
	mismatch := func(what string, found, want int) error {
		return errors.Newf("deploy/nats/n%d.conf: %q found %d time(s), want %d: the test harness no longer matches the shipped file", n, what, found, want)
	}
	edits := [][2]string{
		{"\nlisten: 0.0.0.0:4222\n", fmt.Sprintf("\nlisten: 127.0.0.1:%d\n", a.client)},
		{"\nhttp: 127.0.0.1:8222", fmt.Sprintf("\nhttp: 127.0.0.1:%d", a.monitor)},
		{"  store_dir: /var/lib/nats\n", fmt.Sprintf("  store_dir: %q\n", a.store)},
	}
	if blocks := clusterBlock.FindAllString(conf, -1); len(blocks) != 1 {
		return "", mismatch("cluster", len(blocks), 1)
	}
	if a.single {
		conf = clusterBlock.ReplaceAllString(conf, "")
	} else {
		run := shippedRoutes.FindAllString(conf, -1)
		if k := strings.Count(conf, "nats-route://"); len(run) != 1 || k != deploy.Nodes || strings.Count(run[0], "nats-route://") != k {
			return "", mismatch("nats-route://", k, deploy.Nodes)
		}
		var routes strings.Builder
		for _, r := range a.routes {
			fmt.Fprintf(&routes, "    nats-route://%s\n", r)
		}
		edits = append(edits, [2]string{run[0], routes.String()}, [2]string{"\n  listen: 0.0.0.0:6222\n",
			fmt.Sprintf("\n  listen: 127.0.0.1:%d\n  advertise: \"127.0.0.1:%d\"\n  no_advertise: true\n", a.cluster, a.advertise)})
	}
	for _, e := range edits {
		if k := strings.Count(conf, e[0]); k != 1 {
			return "", mismatch(strings.TrimSpace(e[0]), k, 1)
		}
		conf = strings.Replace(conf, e[0], e[1], 1)
	}
	return conf, nil
}

// randomHex is n random bytes in hex (a password of the test's cluster).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
