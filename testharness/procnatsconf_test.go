package testharness

import (
	"strings"
	"testing"

	"github.com/settle-dev/settle/deploy"
)

// The cluster tests run the shipped configuration: only the addresses,
// the store and the routes differ, everything settle relies on
// (sync_interval: always, the account and its users) is the file's.
func TestRenderNATSConfKeepsTheShippedFile(t *testing.T) {
	for n := 1; n <= deploy.Nodes; n++ {
		src, err := deploy.NATSConfig(n)
		if err != nil {
			t.Fatal(err)
		}
		a := natsConfAddrs{client: 21001, monitor: 21002, cluster: 21003, advertise: 21004, store: "/tmp/x/store",
			routes: []string{"127.0.0.1:21100", "127.0.0.1:21101"}}
		got, err := renderNATSConf(n, a)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"listen: 127.0.0.1:21001", "http: 127.0.0.1:21002", `store_dir: "/tmp/x/store"`,
			"listen: 127.0.0.1:21003", `advertise: "127.0.0.1:21004"`, "no_advertise: true",
			"nats-route://127.0.0.1:21100", "nats-route://127.0.0.1:21101", "sync_interval: always",
			"{user: settle, password: $SETTLE_NATS_PASSWORD}", `"$JS.API.CONSUMER.MSG.NEXT.SETTLE_INTENTS.*"`} {
			if !strings.Contains(got, want) {
				t.Errorf("n%d: rendered configuration lacks %q:\n%s", n, want, got)
			}
		}
		for _, gone := range []string{"0.0.0.0", ".internal:6222", "/var/lib/nats", ":8222"} {
			if strings.Contains(got, gone) {
				t.Errorf("n%d: rendered configuration still holds %q", n, gone)
			}
		}
		// Every other line is the shipped one.
		kept := 0
		for _, line := range strings.Split(src, "\n") {
			if strings.Contains(got, line) {
				kept++
			}
		}
		if total := len(strings.Split(src, "\n")); kept != total-7 {
			t.Errorf("n%d: %d of %d shipped lines kept, want all but the 7 replaced", n, kept, total)
		}
		single, err := renderNATSConf(n, natsConfAddrs{client: 1, monitor: 2, store: "/s", single: true})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(single, "cluster {") || strings.Contains(single, "nats-route") || !strings.Contains(single, "sync_interval: always") {
			t.Errorf("n%d single:\n%s", n, single)
		}
	}
	if _, err := renderNATSConf(4, natsConfAddrs{}); err == nil {
		t.Error("node 4 rendered")
	}
}
