package deploy_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/settle-dev/settle/deploy"
	"github.com/settle-dev/settle/testharness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testharness.RemoveBinaries()
	os.Exit(code)
}

// unit parses a systemd unit: section -> key -> values (a key may
// repeat; continuation lines are joined).
func unit(t *testing.T, text string) map[string]map[string][]string {
	t.Helper()
	out := map[string]map[string][]string{}
	sec := ""
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(text, "\\\n", " ")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			sec = strings.Trim(line, "[]")
			out[sec] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || sec == "" {
				t.Fatalf("settle.service: not a key=value line in a section: %q", line)
			}
			out[sec][k] = append(out[sec][k], strings.Join(strings.Fields(v), " "))
		}
	}
	return out
}

// The unit runs settle serve the way docs/deploy.md says: a user of its
// own, secrets from an EnvironmentFile, --data the one writable path,
// restarted on failure, stopped with SIGTERM and given the time its drain
// takes, hardened.
func TestSystemdUnit(t *testing.T) {
	text, err := deploy.File("settle.service")
	if err != nil {
		t.Fatal(err)
	}
	u := unit(t, text)
	svc := u["Service"]
	for k, want := range map[string]string{
		"User": "settle", "Group": "settle", "EnvironmentFile": "/etc/settle/settle.env",
		"Restart": "on-failure", "KillSignal": "SIGTERM", "StateDirectory": "settle", "StateDirectoryMode": "0700",
		"ReadWritePaths": "/var/lib/settle", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "ProtectProc": "invisible", "CapabilityBoundingSet": "", "UMask": "0077",
	} {
		if got := svc[k]; len(got) != 1 || got[0] != want {
			t.Errorf("[Service] %s = %q, want %q", k, got, want)
		}
	}
	start := strings.Join(svc["ExecStart"], " ")
	for _, want := range []string{"/usr/local/bin/settle serve", "--data /var/lib/settle", "--nats-url ${SETTLE_NATS_URL}", "--replicas 3"} {
		if !strings.Contains(start, want) {
			t.Errorf("ExecStart %q lacks %q", start, want)
		}
	}
	// The drain: up to 60 s for in-flight requests, the webhook's attempts
	// (10 s), 15 s for the views to catch up.
	stop, err := time.ParseDuration(strings.Join(svc["TimeoutStopSec"], ""))
	if err != nil || stop < 85*time.Second {
		t.Errorf("TimeoutStopSec %q: must cover serve's drain (85 s)", svc["TimeoutStopSec"])
	}
	if u["Install"]["WantedBy"][0] != "multi-user.target" {
		t.Errorf("[Install] %v", u["Install"])
	}
	users, err := deploy.File("settle.sysusers")
	if err != nil || !regexp.MustCompile(`(?m)^u settle - ".*" /var/lib/settle$`).MatchString(users) {
		t.Errorf("settle.sysusers does not create the user settle: %q %v", users, err)
	}
	env, err := deploy.File("settle.env.example")
	if err != nil || !strings.Contains(env, "\nSETTLE_NATS_URL=nats://settle:") {
		t.Errorf("settle.env.example lacks SETTLE_NATS_URL: %v", err)
	}

	// systemd's own check, where systemd is installed: no warning at all
	// (verify exits 0 on unknown keys and bad values, so its output is
	// what counts), and an exposure of at most 2.0 of 10.
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: the unit's keys are checked above, not systemd's parse")
		return
	}
	self, err := os.Executable() // an executable for ExecStart to name
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "settle.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(text, "/usr/local/bin/settle", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := execCommand(sa, "verify", path)
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	if out, err := execCommand(sa, "security", "--offline=yes", "--threshold=20", path); err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0: %v\n%s", err, out)
	}
}

func execCommand(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// The three node files differ only in the node's name and zone, and
// nats-server reads each as settle needs it: JetStream with fsync before
// every ack, the cluster "settle" with routes to all three, the account
// SETTLE with JetStream and its users settle and reader.
func TestNATSConfigs(t *testing.T) {
	t.Setenv("SETTLE_NATS_PASSWORD", "p1")
	t.Setenv("READER_NATS_PASSWORD", "p2")
	var first []string
	for n := 1; n <= deploy.Nodes; n++ {
		text, err := deploy.NATSConfig(n)
		if err != nil {
			t.Fatal(err)
		}
		var rest []string
		for _, line := range strings.Split(text, "\n") {
			if !strings.HasPrefix(line, "server_name:") && !strings.HasPrefix(line, "server_tags:") && !strings.HasPrefix(line, "# settle's log: node") {
				rest = append(rest, line)
			}
		}
		if first == nil {
			first = rest
		} else if strings.Join(rest, "\n") != strings.Join(first, "\n") {
			t.Errorf("n%d.conf differs from n1.conf in more than server_name and server_tags", n)
		}
		path := filepath.Join(t.TempDir(), "n.conf")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		o, err := server.ProcessConfigFile(path)
		if err != nil {
			t.Fatalf("n%d.conf: %v", n, err)
		}
		if o.ServerName != "n"+string(rune('0'+n)) || !o.JetStream || !o.SyncAlways || o.StoreDir != "/var/lib/nats" ||
			o.Cluster.Name != "settle" || len(o.Routes) != 3 || o.JetStreamUniqueTag != "az:" || len(o.Tags) != 1 {
			t.Errorf("n%d.conf as nats-server reads it: name %q jetstream %v sync_always %v store %q cluster %q routes %d unique_tag %q tags %v",
				n, o.ServerName, o.JetStream, o.SyncAlways, o.StoreDir, o.Cluster.Name, len(o.Routes), o.JetStreamUniqueTag, o.Tags)
		}
		users := map[string]*server.User{}
		for _, u := range o.Users {
			users[u.Username] = u
		}
		if users["settle"] == nil || users["settle"].Password != "p1" || users["settle"].Account.Name != "SETTLE" || users["settle"].Permissions != nil {
			t.Errorf("n%d.conf: user settle %+v", n, users["settle"])
		}
		if r := users["reader"]; r == nil || r.Password != "p2" || r.Permissions == nil || r.Permissions.Publish == nil ||
			len(r.Permissions.Publish.Allow) == 0 || strings.Contains(strings.Join(r.Permissions.Publish.Allow, " "), "settle.intents") {
			t.Errorf("n%d.conf: user reader %+v", n, r)
		}
	}
}
