// Command mcpdrop sits between an MCP client and a stdio MCP server it
// starts, and loses a reply: usage mcpdrop TOOL FLAGFILE COMMAND ARGS...
// While FLAGFILE exists, the next tools/call of TOOL is forwarded to the
// server (the tool runs) and its response is dropped (FLAGFILE is
// removed); everything else passes through unchanged, one JSON-RPC
// message a line. Tests put it in front of published MCP servers.
//
// It must never import: testing, testharness, adapter/..., ledger, producer, consumers/..., mcp, cmd/....
package main
