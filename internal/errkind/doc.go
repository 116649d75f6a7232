// Package errkind wraps a cause under a sentinel so that both match (the
// standard library's errors.Is and cockroachdb/errors' alike), which
// cockroachdb/errors' Errorf, with one %w, cannot do: the "kind: cause"
// errors of ledger and producer (ErrInvalidRequest with the FieldError
// that names the field, ErrCorruptHistory with the decode error, ...).
//
// It must never import: events, fsm, adapter/..., ledger, producer, consumers/..., projector, api, mcp, cmd/..., embedded, fakeapi, testharness.
package errkind
