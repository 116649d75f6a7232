package httproute_test

import (
	"testing"

	"github.com/settle-dev/settle/adapter/httproute"
)

func mcpEnv() map[string]string {
	return map[string]string{"GITHUB_MCP_SERVER": "/bin/false", "GITHUB_API_URL": "http://127.0.0.1:9", "GITHUB_TOKEN": secretToken,
		"MEMORY_MCP_SERVER": "/bin/false", "MEMORY_FILE_PATH": "/tmp/memory.jsonl"}
}

func TestMCPExamplesAreValid(t *testing.T) {
	for _, f := range []string{"github_mcp.yaml", "memory_mcp.yaml"} {
		if errs := httproute.Check(readExample(t, f), envOf(mcpEnv())); errs != nil {
			t.Fatalf("%s: %v", f, errs)
		}
	}
}

// TestUnsafeMCPRoutesAreRefused: the rules that refuse unsafe HTTP
// routes refuse MCP routes the same way, and a broken mcp section names
// its field.
func TestUnsafeMCPRoutesAreRefused(t *testing.T) {
	gh := readExample(t, "github_mcp.yaml")
	const route = "github_mcp_comment"
	for _, c := range []struct {
		name, field string
		data        []byte
		want        []string
	}{
		{"search without created_at when it may retry", "search.fields.created_at",
			mutate(t, gh, "        created_at: $.created_at\n", "", "      window_filter: none\n", ""), []string{"policy.retry is auto"}},
		{"marker never sent", "correlation.marker",
			mutate(t, gh, `body: "{{payload.body}}{{marker}}"`, `body: "{{payload.body}}"`), []string{"never sent"}},
		{"page listing without a proven end", "search.end",
			mutate(t, gh, "      end: empty_page\n", ""), []string{"does not prove the end"}},
		{"a page size asked for without pagination", "search.url",
			mutate(t, gh, "        page: \"{{page | number}}\"\n", "", "      end: empty_page\n", ""), []string{"no way to read the next page"}},
		{"a URL on an MCP step", "search.url",
			mutate(t, gh, "      tool: issue_read\n", "      tool: issue_read\n      url: \"{{base}}/x\"\n"), []string{"applies to HTTP routes"}},
		{"a write without its tool", "write.tool",
			mutate(t, gh, "      tool: add_issue_comment\n", ""), []string{"is required"}},
		{"an HTTP status in an MCP rule", "write.outcomes[0]",
			mutate(t, gh, `{text: "Validation Failed",`, `{status: [422],`), []string{"apply to HTTP routes"}},
		{"both command and url", "mcp",
			mutate(t, gh, "      args: [stdio]\n", "      args: [stdio]\n      url: http://127.0.0.1:9/mcp\n"), []string{"both"}},
		{"a credential in a header not from the environment", `mcp.headers.Authorization`,
			mutate(t, gh, "      command: ${env:GITHUB_MCP_SERVER}\n      args: [stdio]\n      env:\n        GITHUB_PERSONAL_ACCESS_TOKEN: ${env:GITHUB_TOKEN}\n        GITHUB_API_URL: ${env:GITHUB_API_URL}\n",
				"      url: http://127.0.0.1:9/mcp\n      headers:\n        Authorization: Bearer abc\n"), []string{"must come from the environment"}},
		{"a tool name that is not one", "search.tool",
			mutate(t, gh, "      tool: issue_read\n", "      tool: \"issue read\"\n"), []string{"is not a tool name"}},
	} {
		t.Run(c.name, func(t *testing.T) { oneError(t, c.data, mcpEnv(), route, c.field, c.want...) })
	}
}
