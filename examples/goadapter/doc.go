// Package goadapter is an adapter written in Go instead of declared in
// YAML: a minimal adapter.Adapter for a guestbook over the social API of
// package fakeapi (POST /v1/posts, a listing by account and window, a
// readback by id). It is what code that cannot be a route file starts
// from: implement adapter.Adapter, classify each failure with the
// helpers of package adapter (adapter.Do never retries), and give every
// record the payload shape of the intent so that their hashes compare.
//
// It must never import: fsm, ledger, producer, consumers/..., projector, service, api, mcp, node, cmd/..., embedded, fakeapi, testharness.
package goadapter
