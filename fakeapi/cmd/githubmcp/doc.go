// Command githubmcp serves the GitHub-shaped MCP server of package
// fakeapi over stdio (stdio) or streamable HTTP (http ADDR), in front of
// the GitHub API at $GITHUB_API_URL with $GITHUB_PERSONAL_ACCESS_TOKEN.
// $GITHUB_MCP_FAULTS is the directory of pending faults
// (fakeapi.InjectMCPFault); while it holds a file refuse_start, the
// command exits 1 at once, and each start appends its pid to its file
// pids.
//
// It must never import: testing, testharness, adapter/..., ledger, producer, consumers/..., mcp, cmd/....
package main
