// Package buildinfo reads what the Go toolchain stamped into the binary
// (runtime/debug.ReadBuildInfo): the module's version, the VCS revision it
// was built from and the Go version. The CLI prints it (settle --version)
// and /metrics exposes it (settle_build_info).
//
// It must never import: events, fsm, adapter/..., ledger, producer, consumers/..., projector, service, api, mcp, node, cmd/..., embedded, fakeapi, testharness.
package buildinfo
