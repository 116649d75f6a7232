package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/settle-dev/settle/internal/buildinfo"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb}
	err = m.Run(t.Context(), args)
	return out.String(), errb.String(), err
}

// settle --version, -v and version print the version and the commit of
// the build (exit 0).
func TestVersionPrintsVersionAndCommit(t *testing.T) {
	want := buildinfo.Read()
	for _, args := range [][]string{{"--version"}, {"-v"}, {"version"}} {
		out, _, err := runCLI(t, args...)
		if err != nil || !strings.HasPrefix(out, "settle "+want.Version+" (commit "+want.Revision+", "+want.GoVersion+")") {
			t.Errorf("%v: %v %q", args, err, out)
		}
	}
}

// -h and --help on every subcommand print its usage and each of its flags
// on stdout and are no error (exit 0); nothing runs: routes check -h opens
// no file named -h, intents show -h needs no ID and no server.
func TestEveryCommandHelpPrintsItsFlags(t *testing.T) {
	wantFlags := map[string][]string{
		"serve": {"-routes", "-dev", "-addr", "-access-log", "-data", "-tokens"}, "mcp": {"-routes", "-scopes"},
		"intents list": {"-api", "-state", "-route", "-json"}, "intents show": {"-api", "-json", "-token-env"},
		"approve": {"-reason", "-operator", "-api"}, "resolve": {"-resolution", "-reason", "-external-id", "-live-url"},
		"abandon": {"-reason", "-api"}, "audit": {"-data", "-nats-url"}, "views rebuild": {"-data"},
		"routes check": {"-offline"}, "routes probe": {"-route", "-external-id"}, "demo": {"-keep"},
	}
	for _, c := range commands {
		for _, h := range []string{"-h", "--help"} {
			args := append(strings.Fields(c), h)
			if c == "intents show" || c == "approve" {
				args = append(strings.Fields(c), "in_x", h) // after the ID too
			}
			out, errs, err := runCLI(t, args...)
			if err != nil || errs != "" {
				t.Errorf("%v: %v, stderr %q", args, err, errs)
				continue
			}
			if !strings.Contains(out, "settle "+c) {
				t.Errorf("%v: no usage line: %q", args, out)
			}
			for _, f := range wantFlags[c] {
				if !strings.Contains(out, "  "+f+" ") && !strings.Contains(out, "  "+f+"\n") {
					t.Errorf("%v: flag %s not listed:\n%s", args, f, out)
				}
			}
		}
	}
	// Groups answer help with their subcommands; no subcommand is a usage error.
	for _, g := range []string{"intents", "routes", "views"} {
		if out, _, err := runCLI(t, g, "--help"); err != nil || !strings.Contains(out, "settle "+g+" ") {
			t.Errorf("%s --help: %v %q", g, err, out)
		}
		if _, _, err := runCLI(t, g); err != errUsage {
			t.Errorf("%s: %v, want a usage error", g, err)
		}
	}
	if _, errs, err := runCLI(t, "intents", "show"); err != errUsage || !strings.Contains(errs, "-json") {
		t.Errorf("intents show without ID: %v, stderr %q (want the usage with flags)", err, errs)
	}
	if _, errs, err := runCLI(t, "routes", "check", "-h", filepath.Join(t.TempDir(), "missing.yaml")); err != nil || errs != "" {
		t.Errorf("routes check -h FILE: %v %q", err, errs)
	}
}

// The main binary exits 0 on -h (not 2).
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"routes", "check", "-h"}, {"serve", "--help"}, {"--version"}} {
		cmd := exec.Command(settleBinary(t), args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("settle %v: %v\n%s", args, err, out)
		}
	}
}

// settle completion prints a script for bash, zsh and fish naming every
// subcommand and the flags they declare; bash's parses (bash -n) and
// completes; zsh's and fish's parse where those shells are installed.
func TestCompletionScripts(t *testing.T) {
	scripts := map[string]string{}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, errs, err := runCLI(t, "completion", sh)
		if err != nil {
			t.Fatalf("completion %s: %v %s", sh, err, errs)
		}
		for _, want := range []string{"serve", "intents", "show", "rebuild", "probe", "completion", "access-log", "offline", "resolution"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s script lacks %q", sh, want)
			}
		}
		scripts[sh] = out
	}
	if _, _, err := runCLI(t, "completion", "tcsh"); err == nil {
		t.Error("completion tcsh: no error")
	}
	dir := t.TempDir()
	for sh, text := range scripts {
		path := filepath.Join(dir, "settle."+sh)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := exec.LookPath(sh); err != nil {
			if sh == "bash" {
				t.Fatal("bash is not installed")
			}
			t.Logf("%s is not installed: its script is not parsed", sh)
			continue
		}
		if out, err := exec.Command(sh, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v\n%s", sh, err, out)
		}
	}
	complete := func(words ...string) string {
		script := "source " + filepath.Join(dir, "settle.bash") + "\nCOMP_WORDS=(" + strings.Join(words, " ") + ")\n" +
			"COMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n_settle\necho \"${COMPREPLY[@]}\"\n"
		out, err := exec.Command("bash", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"settle", "rou"}, "routes"},
		{[]string{"settle", "routes", "ch"}, "check"},
		{[]string{"settle", "routes", "check", "--off"}, "--offline"},
		{[]string{"settle", "serve", "--access"}, "--access-log"},
		{[]string{"settle", "resolve", "in_x", "--resol"}, "--resolution"},
	} {
		if got := complete(c.words...); got != c.want {
			t.Errorf("complete %v: %q, want %q", c.words, got, c.want)
		}
	}
}
