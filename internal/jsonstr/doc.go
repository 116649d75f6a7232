// Package jsonstr holds the one check of a JSON string's Unicode that
// settle's transports (the API and MCP) share: encoding/json reads invalid
// UTF-8 and a lone surrogate escape ("\ud800") as U+FFFD without an
// error, so two different request ids, task ids or accounts would be read
// as one. A transport refuses such a string, naming the field, before it
// decodes it.
//
// It must never import: events, fsm, adapter/..., ledger, producer, service, consumers/..., projector, api, mcp, cmd/..., embedded, fakeapi, testharness.
package jsonstr
