// Package adapter is the port to external APIs, and the routes that use
// them. It defines the small interfaces an external system must offer
// (Writer, Searcher, Reader and the optional StatusQuerier; Preparer for a
// writer that renders a write apart from sending it, so that a retry sends
// the first attempt's recorded request), the capability flags that tell
// the reconciler which strategy a route supports, and the outcome
// classification of one HTTP attempt (CallError): not sent, rejected, or
// unknown — "key already used" (CodeKeyReused) being unknown, and
// RetryAfter the wait the API asked for. A listing whose end is not proven
// says so (ErrListingIncomplete): it never proves absence. Scrubber removes configured
// secret values (and any 8+ byte part of them) from the response-derived
// fields an adapter returns, before anything records them. JSONTime reads
// an external API's timestamps with their JSON escapes undone, which
// time.Time's UnmarshalJSON does not do (golang/go#47353).
//
// A Route names one configured external operation: its adapter and its
// policy (DefaultPolicy); ValidateRoute refuses a policy that could retry
// without a dedup proof.
//
// Routes are declared in YAML and compiled by adapter/httproute; an
// adapter written in Go (examples/goadapter) implements Adapter the same
// way, with a compile-time check.
//
// adapter imports events only, and its HTTP client never retries: attempts
// are counted in exactly one place, the producer, and are visible on the
// log.
// It must never import: fsm, ledger, producer, consumers/..., projector, api, mcp, cmd/..., testharness, fakeapi, github.com/nats-io/....
package adapter
