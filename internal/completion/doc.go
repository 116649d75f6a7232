// Package completion writes shell completion scripts (bash, zsh, fish)
// for a command line of subcommands, each with its own flags: settle
// completion prints them from the flags the subcommands declare.
//
// It must never import: events, fsm, adapter/..., ledger, producer, consumers/..., projector, service, api, mcp, node, cmd/..., embedded, fakeapi, testharness.
package completion
