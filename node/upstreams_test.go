package node

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/testharness"
)

var (
	_ Readier = (*httproute.Adapter)(nil)
	_ Closer  = (*httproute.Adapter)(nil)
)

// TestUpstreamDownIsNotReady: a route whose upstream MCP server cannot be
// started is named by /readyz's checks, which say why it is down, and
// Close stops it (a closed upstream is not ready either); an HTTP route
// adds no check.
func TestUpstreamDownIsNotReady(t *testing.T) {
	data := testharness.RouteFile(t, "github_mcp.yaml", "timeout: 10s", "timeout: 1s")
	route := testharness.CompileRoute(t, data, map[string]string{"GITHUB_MCP_SERVER": "/nonexistent/github-mcp-server",
		"GITHUB_API_URL": "http://127.0.0.1:1", "GITHUB_TOKEN": "ghp_unused_token_1234"})
	social := testharness.ExampleRoute(t, "social.yaml", testharness.At{Addr: "http://127.0.0.1:1", Secret: "social-secret-1234"})
	routes := []adapter.Route{route, social}
	checks := upstreamChecks(routes)
	if len(checks) != 1 || checks[0].Name != "upstream github_mcp_comment" {
		t.Fatalf("checks %+v", checks)
	}
	err := checks[0].Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "github_mcp_comment") {
		t.Fatalf("an upstream that cannot start: readiness %v, want the route named", err)
	}
	t.Logf("readiness: %v", err)
	if _, err := route.Adapter.(*httproute.Adapter).ListTools(context.Background()); err == nil {
		t.Fatal("a missing command listed its tools")
	}
	if err := checks[0].Check(context.Background()); err == nil {
		t.Fatal("an upstream that failed to start is ready")
	}
	closeAdapters(routes)
	if route.Adapter.(*httproute.Adapter).Ready() {
		t.Fatal("a closed upstream is ready")
	}
}
