// Package adapter is the port to external APIs, and the routes that use
// them. It defines the small interfaces an external system must offer
// (Writer, Searcher, Reader, the optional StatusQuerier and Preparer), the
// capability flags that tell the reconciler which strategy a route
// supports, and the classification of one HTTP attempt (CallError): not
// sent, rejected, or unknown. A listing whose end is not proven says so
// (ErrListingIncomplete): it never proves absence. Scrubber removes
// configured secrets from what an adapter returns before anything records
// it.
//
// A Route names one configured external operation: its adapter and its
// policy; ValidateRoute refuses a policy that could retry without a dedup
// proof. Routes declared in YAML are built by adapter/httproute; code that
// must talk to an API no route file describes implements these interfaces
// in Go (examples/goadapter is one small adapter).
//
// Do sends every request of every adapter: one call is one attempt, and
// neither the client nor net/http retries it (noReplay); redirects are not
// followed. Whether a request was written is observed with httptrace,
// never guessed. Callers mark each call's context (Calling), and Do
// reports every request to the route's CallObserver. Attempts are thus
// counted in exactly one place, the producer, and are visible on the log.
//
// adapter imports events only.
// It must never import: fsm, ledger, producer, consumers/..., projector, api, mcp, cmd/..., testharness, fakeapi, github.com/nats-io/....
package adapter
