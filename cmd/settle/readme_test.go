package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// quickStart returns the README's quick-start shell block (between the
// <!-- quickstart --> markers).
func quickStart(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	_, after, ok := strings.Cut(s, "<!-- quickstart -->\n```sh\n")
	block, _, ok2 := strings.Cut(after, "```\n<!-- /quickstart -->")
	if !ok || !ok2 || strings.TrimSpace(block) == "" {
		t.Fatal("README.md has no quick-start block between <!-- quickstart --> markers")
	}
	return block
}

// The README's quick start runs as written — readiness waits, stopping
// serve by its pid, audit on serve's own --data — against the built
// binaries, in a directory laid out like the repository after make build.
func TestReadmeQuickStartRuns(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "od", "sed", "grep", "mktemp"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing; .ci/run installs what the quick start needs", tool)
			}
			t.Skipf("%s is not installed (apt-get install %s)", tool, tool)
		}
	}
	script := quickStart(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(settleBinary(t), filepath.Join(dir, "bin", "settle")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-race", "-o", filepath.Join(dir, "bin", "socialapi"), "../../examples/socialapi").CombinedOutput(); err != nil {
		t.Fatalf("build socialapi: %v\n%s", err, out)
	}
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(examples, filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-eu", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SETTLE_API=http://"+freeAddr(t), "NATS_LISTEN="+freeAddr(t), "TMPDIR="+t.TempDir())
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("the quick start failed: %v\n%s", err, text)
	}
	for _, want := range []string{
		"route(s) OK",
		`"state":"confirmed"`,
		"idempotent-replayed: true",
		"\n422\n",
		"ReadbackPassed",
		"result: OK",
		"posts: 1 request(s), 1 effect(s)",
		"operator console: http://",
	} {
		if !strings.Contains(strings.ToLower(text), strings.ToLower(want)) {
			t.Errorf("the quick start's output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}
