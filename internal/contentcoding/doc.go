// Package contentcoding holds the one check of a request's
// Content-Encoding that settle's HTTP surfaces (the API and /mcp) share:
// they read bodies as sent and decode no content coding, so a body
// labelled with one is refused (415) whether or not it is compressed,
// never read as if the label were absent.
//
// It must never import: events, fsm, adapter/..., ledger, producer, service, consumers/..., projector, api, mcp, cmd/..., embedded, fakeapi, testharness.
package contentcoding
