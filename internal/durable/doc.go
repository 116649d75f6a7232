// Package durable owns writing small files so that they survive a crash of
// the machine: a file replaced atomically and synced, with its directory
// (WriteFile), and syncs of a file or a directory already written. The
// data dir's high-water mark and the projector's unsynced-catch-up marker
// are written with it.
//
// durable imports only the standard library and cockroachdb/errors.
// It must never import: events, fsm, ledger, producer, projector, adapter/..., consumers/..., api, mcp, cmd/..., fakeapi, testharness.
package durable
