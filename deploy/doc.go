// Package deploy holds what an operator installs next to the settle
// binary — the systemd unit (settle.service, settle.sysusers,
// settle.env.example) and the three-node nats-server cluster
// configuration (nats/n1.conf … n3.conf) — and embeds them, so that the
// tests start from the shipped files: testharness renders the cluster's
// configuration from NATSConfig, and this package's tests check the unit
// (with systemd-analyze where it is installed). docs/deploy.md explains
// them.
//
// deploy imports nothing of settle.
// It must never import: events, fsm, adapter/..., ledger, producer, consumers/..., projector, api, mcp, cmd/..., embedded, testharness, fakeapi.
package deploy

import (
	"embed"
	"fmt"

	"github.com/cockroachdb/errors"
)

//go:embed settle.service settle.sysusers settle.env.example nats/n1.conf nats/n2.conf nats/n3.conf
var files embed.FS

// Nodes is the cluster's size: NATSConfig(1) … NATSConfig(Nodes).
const Nodes = 3

// NATSConfig is node n's nats-server configuration (n in 1..Nodes).
func NATSConfig(n int) (string, error) {
	if n < 1 || n > Nodes {
		return "", errors.Newf("deploy: node %d: the cluster has nodes 1..%d", n, Nodes)
	}
	b, err := files.ReadFile(fmt.Sprintf("nats/n%d.conf", n))
	return string(b), err
}
