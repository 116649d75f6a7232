package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/ledger"
)

// serve's fault flags are checked before anything starts, each error
// naming its flag and why.
func TestFaultFlagsValidate(t *testing.T) {
	for args, want := range map[string]string{
		"":                            "",
		"--lease 5s":                  "",
		"--lease 500ms":               "--lease: 500ms must be at least 1s",
		"--lease -1s":                 "--lease: -1s must be at least 1s",
		"--min-free-mb 0":             "--min-free-mb: 0 must be ≥ 1",
		"--max-clock-offset -1s":      "--max-clock-offset: -1s is negative",
		"--max-inflight 0":            "--max-inflight: 0 must be ≥ 1",
		"--max-inflight 4 --lease 2m": "",
		"--steps 1":                   "",
		"--steps 0":                   "--steps: 0 is outside 1..1024",
		"--steps 1025":                "--steps: 1025 is outside 1..1024",
	} {
		var f faultFlags
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.register(fs)
		if err := fs.Parse(strings.Fields(args)); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		err := f.validate()
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", args, err)
		case want != "" && (err == nil || err.Error() != want):
			t.Errorf("%q: got %v, want %q", args, err, want)
		}
	}
}

// Opening the store is retried only when nobody answered in time (a
// cluster electing the stream's leader), never on a refusal.
func TestStoreTimeoutRetriesOnlyTimeouts(t *testing.T) {
	wrap := func(err error) error {
		return errors.WithHint(errors.Wrapf(err, "open store: stream %s", "SETTLE_INTENTS"), "hint")
	}
	for err, want := range map[error]bool{
		wrap(context.DeadlineExceeded):             true,
		wrap(nats.ErrTimeout):                      true,
		wrap(nats.ErrNoResponders):                 true,
		wrap(jetstream.ErrJetStreamNotEnabled):     false,
		wrap(errors.New("insufficient resources")): false,
	} {
		if got := storeTimeout(err); got != want {
			t.Errorf("%v: retried %v, want %v", err, got, want)
		}
	}
}

// serve and mcp publish every append alone on an embedded server that does
// not fsync every write (atomic batches cost it more than the lone publishes
// they replace); with fsync always, and on a server settle did not start,
// the group commit decides; --group-commit measured and off override it.
func TestStoreConfigFollowsTheEmbeddedServersSync(t *testing.T) {
	group := ledger.DefaultStoreConfig().BatchMax
	const url = "nats://127.0.0.1:4222"
	for _, c := range []struct {
		natsURL      string
		dur          embedded.Durability
		replicas     int
		groupCommit  string
		wantBatchMax int
	}{
		{"", embedded.SyncDefault, 1, groupCommitAuto, 1},
		{"", embedded.SyncAlways, 1, groupCommitAuto, group},
		{"", "", 1, groupCommitAuto, group},
		{url, embedded.SyncDefault, 3, groupCommitAuto, group},
		{url, embedded.SyncAlways, 3, groupCommitAuto, group},
		{"", embedded.SyncDefault, 1, groupCommitMeasured, group},
		{"", embedded.SyncAlways, 1, groupCommitOff, 1},
		{url, embedded.SyncAlways, 3, groupCommitOff, 1},
	} {
		sc := storeConfig(c.natsURL, c.dur, c.replicas, c.groupCommit)
		if sc.BatchMax != c.wantBatchMax || sc.Replicas != c.replicas {
			t.Errorf("storeConfig(%q, %q, %d, %q): BatchMax %d, Replicas %d; want %d, %d", c.natsURL, c.dur, c.replicas, c.groupCommit, sc.BatchMax, sc.Replicas, c.wantBatchMax, c.replicas)
		}
		if err := sc.Validate(); err != nil {
			t.Errorf("storeConfig(%q, %q, %d, %q): %v", c.natsURL, c.dur, c.replicas, c.groupCommit, err)
		}
	}
	for v, ok := range map[string]bool{"auto": true, "measured": true, "off": true, "": false, "on": false, "OFF": false} {
		if err := checkGroupCommit(v); (err == nil) != ok {
			t.Errorf("checkGroupCommit(%q) = %v", v, err)
		}
	}
	if err := checkGroupCommit("on"); err == nil || err.Error() != `"on": want auto, measured or off` {
		t.Errorf("checkGroupCommit(on) = %v", err)
	}
}

// serve refuses a --group-commit it does not know before anything starts
// (no data directory made, no server started), naming the flag.
func TestServeAndMCPRefuseAnUnknownGroupCommit(t *testing.T) {
	for _, c := range []struct{ cmd string }{{"serve"}, {"mcp"}} {
		var out, errb bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader("")}
		data := filepath.Join(t.TempDir(), "data")
		args := []string{c.cmd, "--data", data, "--routes", "../../examples/routes/social.yaml", "--group-commit", "on"}
		if c.cmd == "serve" {
			args = append(args, "--dev", "--addr", "127.0.0.1:0")
		}
		err := m.Run(t.Context(), args)
		if err == nil || !strings.Contains(err.Error(), c.cmd+`: --group-commit: "on": want auto, measured or off`) {
			t.Fatalf("%s --group-commit on: %v\n%s", c.cmd, err, errb.String())
		}
		if _, serr := os.Stat(data); !os.IsNotExist(serr) {
			t.Errorf("%s: the data directory was made (%v)", c.cmd, serr)
		}
	}
}
