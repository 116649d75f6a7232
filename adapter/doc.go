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
// policy (DefaultPolicy: one retry after an attempt that may have
// executed, five resends after proven rejections); ValidateRoute refuses a
// policy that could retry without a dedup proof, naming the field — a
// route whose key is its only proof and whose retention cannot cover one
// attempt (retention ≤ margin + attempt deadline + 2 × skew).
//
// Routes declared in YAML are built by adapter/httproute; code that must
// talk to an API no route file describes implements these interfaces in
// Go (examples/goadapter is one small adapter), with a compile-time check.
//
// Do sends every request of every adapter: one call is one attempt. The
// client never retries and net/http may not either: its Transport resends
// a request a reused connection lost after writing it when the request is
// replayable (a body it can get again, and an Idempotency-Key header), so
// Do clears GetBody and moves a bodyless request's key headers to
// lower-case keys, which net/http does not look up (the wire carries the
// same header). Redirects are not followed. An adapter's transport
// (NewTransport, under NewHTTPClient and a route's MCP upstream over HTTP)
// keeps a connection per concurrent call, up to MaxIdleConnsPerHost per
// host, where http.DefaultTransport keeps 2. Whether a request was written
// is observed with httptrace, never guessed. The producer and the
// reconciler mark each call's context (Calling: route and kind — write,
// search, readback, status, identity), and Do reports every request to the
// route's CallObserver (the process's metrics).
//
// adapter imports events only, and its HTTP client never retries: attempts
// are counted in exactly one place, the producer, and are visible on the
// log.
// It must never import: fsm, ledger, producer, consumers/..., projector, api, mcp, cmd/..., testharness, fakeapi, github.com/nats-io/....
package adapter
