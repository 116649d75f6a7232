// Command settle is the thin main of settle: flags and signals. main only
// turns signals into a cancelled context and errors into an exit code;
// Main.Run parses a command's flags into its checked configuration, so
// end-to-end tests call it directly. What runs is assembled by package
// cmd/settle/internal/app (serve, mcp, demo) or by node (audit and views
// rebuild on a stopped serve's --data, under the data directory's lock).
//
// Subcommands: demo, serve (it owns its --data directory through an
// exclusive lock for its whole life, and checks flags, routes and tokens
// before anything starts), audit, views rebuild,
// intents/approve/resolve/abandon (the CLI over the API), routes check
// and probe, mcp and completion. serve and mcp share the node's flags
// (nodeFlags). cmd wires every settle package; nothing imports cmd.
// It must never import: testing, testharness, internal/layering, examples/downstream, examples/socialapi, examples/webhook-receiver, examples/goadapter,
// bench.
package main
