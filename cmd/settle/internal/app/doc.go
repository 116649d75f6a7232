// Package app assembles settle's processes from their checked
// configurations: Serve (a node behind the HTTP API and /mcp, stopped
// gracefully), MCPStdio (a node and one MCP session on stdio) and Demo (a
// node on an embedded store against the fake social API). It owns the
// order things start and stop in: tracing, the node (node.Open), the
// service both transports share, the transports, then the node's loops on
// a context of their own, stopped after the transports let their
// in-flight requests finish. cmd/settle parses flags into these
// configurations; end-to-end tests drive the binary's Main.Run.
//
// It must never import: testing, testharness, internal/layering, bench, examples/downstream, examples/socialapi, examples/webhook-receiver, examples/goadapter.
package app
