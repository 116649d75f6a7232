package httproute_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

// memoryServer is the published reference memory MCP server
// (@modelcontextprotocol/server-memory), installed from npm into the
// repository's .cache/npm-mcp when missing. Without node or the package
// the test skips, and under CI=true fails.
func memoryServer(t *testing.T) string {
	t.Helper()
	unavailable := func(why string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("the published MCP server cannot be had: "+why, args...)
		}
		t.Skipf("the published MCP server cannot be had: "+why, args...)
	}
	if _, err := exec.LookPath("node"); err != nil {
		unavailable("node is not installed")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", ".cache", "npm-mcp"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "node_modules", ".bin", "mcp-server-memory")
	if _, err := os.Stat(bin); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			unavailable("npm is not installed")
		}
		if out, err := exec.Command(npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "@modelcontextprotocol/server-memory@2026.8.31").CombinedOutput(); err != nil {
			unavailable("npm install: %v: %s", err, out)
		}
	}
	return bin
}

// mcpDrop builds the reply-losing stdio proxy once per test binary.
func mcpDrop(t *testing.T) string {
	t.Helper()
	return buildTool(t, "mcpdrop")
}

// entities counts the entities named name in the memory server's file.
func entities(t *testing.T, file, name string) int {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct{ Type, Name string }
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == "entity" && e.Name == name {
			n++
		}
	}
	return n
}

// TestPublishedMCPServerLostReply: the reference memory server from npm,
// behind a stdio proxy that forwards settle's create_entities call (the
// entity is created) and loses its reply. The write is unknown; the
// reconciler finds the entity through read_graph by its marker, reads it
// back through open_nodes, and confirms it: one entity in the server's
// file.
func TestPublishedMCPServerLostReply(t *testing.T) {
	server := memoryServer(t)
	drop := mcpDrop(t)
	tmp := t.TempDir()
	flag, graph := filepath.Join(tmp, "drop"), filepath.Join(tmp, "memory.jsonl")
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	data := mutate(t, readExample(t, "memory_mcp.yaml"), "timeout: 10s", "timeout: 3s",
		"      command: ${env:MEMORY_MCP_SERVER}\n", "      command: ${env:MCP_DROP}\n      args: [create_entities, '${env:DROP_FLAG}', '${env:MEMORY_MCP_SERVER}']\n")
	env := map[string]string{"MEMORY_MCP_SERVER": server, "MEMORY_FILE_PATH": graph, "MCP_DROP": drop, "DROP_FLAG": flag}
	w := newE2EData(t, data, env, testharness.NewManualClock(rt0))
	t.Cleanup(func() { _ = w.route.Adapter.(*httproute.Adapter).Close() })

	res := w.execute("remember-1", "project", "", `{"name":"settle","note":"settles lost writes"}`)
	if i := w.intent(res.IntentID); countTypes(w.types(i), events.OutcomeUnknown) != 1 {
		t.Fatalf("the reply was not lost: %s, history %v", i.State, w.types(i))
	}
	i := w.settle(res.IntentID)
	ts := w.types(i)
	if n := entities(t, graph, "settle"); n != 1 || countTypes(ts, events.WriteStarted) != 1 || countTypes(ts, events.CandidateFound) != 1 {
		t.Fatalf("%d entities; history %v", n, ts)
	}
	if i.State != fsm.Confirmed || i.Receipt == nil || i.Receipt.ExternalID != "settle" {
		t.Fatalf("state %s, receipt %+v; history %v", i.State, i.Receipt, ts)
	}
	if b, _ := os.ReadFile(graph); !strings.Contains(string(b), "[settle:"+res.IntentID+"]") {
		t.Fatalf("the entity does not carry its marker: %s", b)
	}
}
