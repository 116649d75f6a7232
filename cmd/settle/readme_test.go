package main

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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

// The README's quick start is safe to paste into an interactive bash:
// no exit (it would close the shell), a --max-time on every curl (a
// listener that never answers would hang it), one spelling of the key,
// serve without a line per request; the README still opens with make demo
// and make test, and says how to go install the CLI.
func TestReadmeQuickStartIsCopyPasteSafe(t *testing.T) {
	block := quickStart(t)
	exit := regexp.MustCompile(`(^|[\s;&|({])exit(\s|;|$)`)
	keys := map[string]bool{}
	for n, line := range strings.Split(block, "\n") {
		code, _, _ := strings.Cut(line, " # ")
		if exit.MatchString(code) {
			t.Errorf("line %d exits the shell: %q", n+1, line)
		}
		if strings.Contains(code, "curl ") && !strings.Contains(code, "--max-time") {
			t.Errorf("line %d: curl without --max-time: %q", n+1, line)
		}
		if strings.Contains(code, "--access-log") {
			t.Errorf("line %d: the quick start's serve logs every request: %q", n+1, line)
		}
		for _, m := range regexp.MustCompile(`Idempotency-Key: [^'"]*['"]?[^'"]*`).FindAllString(code, -1) {
			keys[m] = true
		}
	}
	if len(keys) != 1 {
		t.Errorf("the key is written %d ways: %v", len(keys), keys)
	}
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	head := strings.Join(strings.SplitN(string(b), "\n", 8)[:7], "\n")
	if !strings.Contains(head, "make demo") || !strings.Contains(head, "make test") {
		t.Errorf("README.md's first lines do not give make demo and make test:\n%s", head)
	}
	if !strings.Contains(string(b), "go install github.com/settle-dev/settle/cmd/settle@latest") {
		t.Error("README.md has no go install line")
	}
}

// The README's quick start runs as written — readiness waits, stopping
// serve by its pid, audit on serve's own --data — against the built
// binaries, in a directory laid out like the repository after make build.
func TestReadmeQuickStartRuns(t *testing.T) {
	t.Parallel() // processes and waits: overlaps the package's other long tests
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
	if strings.Contains(text, "http request") {
		t.Error("serve logged its requests into the quick start's output")
	}
	if t.Failed() {
		t.Log(text)
	}
}

// metricRow is one row of the README's metric table.
type metricRow struct {
	typ    string
	labels []string // sorted
}

// readmeMetrics reads the README's metric table (between the
// <!-- metrics --> markers).
func readmeMetrics(t *testing.T) map[string]metricRow {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "<!-- metrics -->\n")
	table, _, ok2 := strings.Cut(after, "<!-- /metrics -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no metric table between <!-- metrics --> markers")
	}
	out := map[string]metricRow{}
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[2:] {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("README metric row %q: want 4 cells", line)
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		var labels []string
		for _, l := range strings.Split(cells[2], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		out[name] = metricRow{typ: strings.TrimSpace(cells[1]), labels: labels}
	}
	return out
}

// metricNames are the settle_ metrics the module's code defines (a
// collector's Name or a Desc's name, outside tests and examples).
func metricNames(t *testing.T) []string {
	t.Helper()
	def := regexp.MustCompile(`(?:Name:\s*|NewDesc\()"(settle_[a-z_]+)"`)
	var out []string
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "../.." || d.Name() == "examples" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range def.FindAllSubmatch(src, -1) {
			out = append(out, string(m[1]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The README's metric table names every metric the code defines, and
// nothing else (the types and labels are compared with a live /metrics
// in TestServeEndToEndDroppedResponseSettlesWithOneEffect).
func TestReadmeMetricTableMatchesTheCode(t *testing.T) {
	rows := readmeMetrics(t)
	code := metricNames(t)
	if len(code) < 20 {
		t.Fatalf("found only %d metric definitions: %v", len(code), code)
	}
	for _, name := range code {
		if _, ok := rows[name]; !ok {
			t.Errorf("%s is defined in the code but not in README.md's metric table", name)
		}
	}
	for name := range rows {
		if !slices.Contains(code, name) {
			t.Errorf("README.md's metric table lists %s, which the code does not define", name)
		}
	}
}

// checkReadmeMetrics compares the settle_ families of a /metrics answer
// (parsed by client_golang's text parser) with the README's table: each
// is listed, with its type and labels.
func checkReadmeMetrics(t *testing.T, exposition string) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(exposition))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	rows := readmeMetrics(t)
	for name, f := range fams {
		if !strings.HasPrefix(name, "settle_") {
			continue
		}
		row, ok := rows[name]
		if !ok {
			t.Errorf("/metrics exposes %s, which README.md's table lacks", name)
			continue
		}
		if typ := strings.ToLower(f.GetType().String()); typ != row.typ {
			t.Errorf("%s is a %s; README.md says %s", name, typ, row.typ)
		}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName())
			}
			slices.Sort(labels)
			if !slices.Equal(labels, row.labels) {
				t.Errorf("%s has labels %v; README.md says %v", name, labels, row.labels)
				break
			}
		}
	}
}
