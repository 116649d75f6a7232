package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve's flags are checked before anything starts, every problem at
// once, each naming its flag and why.
func TestServeFlagsNameEveryProblem(t *testing.T) {
	for args, want := range map[string]string{
		"":                                       "",
		"--lease 5s":                             "",
		"--lease 500ms":                          "--lease: 500ms must be at least 1s",
		"--lease -1s":                            "--lease: -1s must be at least 1s",
		"--min-free-mb 0":                        "--min-free-mb: 0 must be ≥ 1",
		"--max-clock-offset -1s":                 "--max-clock-offset: -1s is negative",
		"--max-inflight 0":                       "--max-inflight: 0 must be ≥ 1",
		"--max-inflight 4 --lease 2m":            "",
		"--steps 1":                              "",
		"--steps 0":                              "--steps: 0 is outside 1..1024",
		"--steps 1025":                           "--steps: 1025 is outside 1..1024",
		"--log-format xml":                       `--log-format: "xml": want text or json`,
		"--steps 0 --lease 1ms --max-inflight 0": "--lease: 1ms must be at least 1s; --steps: 0 is outside 1..1024; --max-inflight: 0 must be ≥ 1",
	} {
		var f serveFlags
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.register(fs)
		if err := fs.Parse(append(strings.Fields(args), "--dev")); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		_, err := f.node.config("settle serve", "settle-api")
		problems := f.check()
		if err != nil {
			problems = append([]string{err.Error()}, problems...)
		}
		if got := strings.Join(problems, "; "); got != want {
			t.Errorf("%q: got %q, want %q", args, got, want)
		}
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
