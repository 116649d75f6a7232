// Command settle is the thin main of settle: flags, signals and wiring.
// main only turns signals into a cancelled context and errors into an exit
// code; Main.Run does the work, so end-to-end tests call it directly.
//
// Subcommands: demo (the whole story on an embedded server against a fake
// API), serve (the service; it owns its --data directory through an
// exclusive lock for its whole life, and checks flags, routes and tokens
// before anything starts), audit and views rebuild (on a stopped serve's
// --data, under the same lock), intents/approve/resolve/abandon (the CLI
// over the API), routes check and probe, mcp (one MCP session on stdio
// over the same node as serve) and completion. serve, mcp and demo share
// the node's flags and mount a transport on a node.Node. cmd wires every
// settle package; nothing imports cmd. The demo's fake API is package
// fakeapi, so the binary links no test code.
// The demo compiles examples/routes/social.yaml, embedded by package
// examples/routes.
// It must never import: testing, testharness, internal/layering, examples/downstream, examples/socialapi, examples/webhook-receiver, examples/goadapter,
// bench.
package main
