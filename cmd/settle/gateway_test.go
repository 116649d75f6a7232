package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/mcp"
	"github.com/settle-dev/settle/service"
	"github.com/settle-dev/settle/testharness"
)

// TestMCPGatewayStdio: settle mcp (Main.Run, stdio pipes) over
// examples/routes/github_mcp.yaml offers the upstream's own tools; the
// route starts the in-repo GitHub-shaped MCP server (fakeapi/cmd/
// githubmcp) as its child. An agent's add_issue_comment whose reply the
// upstream loses is unknown, then confirmed through the upstream's read
// tool, the GitHub fake holding exactly one comment; the read tool is
// passed through; the same task and step in a new session of a restarted
// settle mcp are the same intent.
func TestMCPGatewayStdio(t *testing.T) {
	testharness.SkipShort(t, "builds the upstream MCP server and runs settle mcp twice")
	const token = "ghp_stdio_gateway_8a3c5e7b9d1f"
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(token))
	bin := filepath.Join(t.TempDir(), "githubmcp")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/settle-dev/settle/fakeapi/cmd/githubmcp").CombinedOutput(); err != nil {
		t.Fatalf("build githubmcp: %v\n%s", err, out)
	}
	faults := t.TempDir()
	routes := filepath.Join(t.TempDir(), "github_mcp.yaml")
	data := testharness.RouteFile(t, "github_mcp.yaml", "timeout: 10s", "timeout: 2s",
		"        GITHUB_API_URL: ${env:GITHUB_API_URL}\n", "        GITHUB_API_URL: ${env:GITHUB_API_URL}\n        GITHUB_MCP_FAULTS: ${env:GITHUB_MCP_FAULTS}\n")
	if err := os.WriteFile(routes, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"GITHUB_MCP_SERVER": bin, "GITHUB_API_URL": api.URL(), "GITHUB_TOKEN": token, "GITHUB_MCP_FAULTS": faults} {
		t.Setenv(k, v)
	}
	if err := fakeapi.InjectMCPFault(faults, "add_issue_comment", fakeapi.MCPDropReply); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	args := map[string]any{"owner": "octo-org", "repo": "hello-world", "issue_number": 7, "body": "Deployed v2",
		"task_id": "ship-9", "step_id": "announce"}
	want := events.ScopedIntentID(service.DefaultTenant, "github_mcp_comment", api.UserID(), events.ToolKey("ship-9", "announce", ""))

	cs, stop := startMCPStdio(t, routes, dataDir, api.UserID())
	if got := toolSet(t, cs); strings.Join(got, " ") != "add_issue_comment get_issue_comment issue_read pending status submit_github_mcp_comment" {
		t.Fatalf("tools %v", got)
	}
	res, a := callTool(t, cs, "add_issue_comment", args)
	if res.IsError || a.Outcome != mcp.OutcomeUnknown || a.IntentID != want {
		t.Fatalf("write: %+v", res)
	}
	for k := 0; k < 6 && a.Outcome == mcp.OutcomeUnknown; k++ {
		res, a = callTool(t, cs, "status", map[string]any{"intent_id": want, "wait_seconds": 30})
	}
	if res.IsError || a.Outcome != mcp.OutcomeConfirmed || a.Receipt == nil || api.Effects() != 1 {
		t.Fatalf("status: %+v; %d effects", res, api.Effects())
	}
	res, _ = callTool(t, cs, "issue_read", map[string]any{"method": "get_comments", "owner": "octo-org", "repo": "hello-world", "issue_number": 7})
	if b, _ := json.Marshal(res); res.IsError || !strings.Contains(string(b), "Deployed v2") {
		t.Fatalf("read: %+v", res)
	}
	stop()

	cs, stop = startMCPStdio(t, routes, dataDir, api.UserID())
	defer stop()
	res, a = callTool(t, cs, "add_issue_comment", args)
	if res.IsError || a.IntentID != want || !a.Replayed || a.Outcome != mcp.OutcomeConfirmed {
		t.Fatalf("after a restart: %+v", res)
	}
	if api.Effects() != 1 || api.Writes() != 1 {
		t.Fatalf("%d effects, %d writes", api.Effects(), api.Writes())
	}
}

// startMCPStdio runs settle mcp in this process on pipes and connects an
// SDK client; stop ends the session and waits for settle mcp to return.
func startMCPStdio(t *testing.T, routes, dataDir, account string) (*sdk.ClientSession, func()) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &testharness.SyncBuffer{}
	m := &Main{Stdin: inR, Stdout: outW, Stderr: stderr}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- m.Run(ctx, []string{"mcp", "--routes", routes, "--data", dataDir, "--accounts", account})
		outW.Close()
	}()
	cctx, ccancel := context.WithTimeout(ctx, time.Minute)
	defer ccancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "desktop-host", Version: "1"}, nil)
	cs, err := c.Connect(cctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		cancel()
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cs.Close()
		inW.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("settle mcp: %v\n%s", err, stderr.String())
			}
		case <-time.After(time.Minute):
			t.Errorf("settle mcp did not return\n%s", stderr.String())
		}
		cancel()
	}
	t.Cleanup(stop)
	return cs, stop
}
