// Package api is settle's HTTP surface: the JSON API over intents
// (submit with Idempotency-Key semantics, read, list, operator actions),
// bearer-token authentication with a tenant, scopes and route/account
// limits, health and readiness probes, Prometheus metrics (client_golang,
// in the server's own registry), the OpenAPI 3.1 document (every response
// of every endpoint, validated in a test) and the operator console (one
// embedded HTML page). HTTPServer applies the read, header and idle
// limits; every query is checked (known parameters, each once, at most
// MaxQueryParams) before a handler runs.
//
// Request ids are scoped per tenant, route and account (the producer's
// events.ScopedIntentID); a replay shows the intent as it is now, and only
// to a token that may read it. Another tenant's intent is 404.
//
// The API depends on small interfaces it declares: Intents (the write path
// and the log: *producer.Producer), Views (the read model:
// *projector.Projector) and Log (what /readyz checks: *ledger.Store).
// Writes go through Intents (Execute and the operator actions), so every
// rule of the log applies: intent first, CAS appends, refusal of illegal
// transitions; Execute validates the request, the API validates no field
// of it again. A submit answers with the intent as Execute left it on the
// log, and a GET or an operator action reads the intent once (by id) and
// folds it once: single intents are never stale; lists, counts and metrics
// read the views. Its HTTP-semantics tests run over an in-memory Intents,
// without NATS.
//
// Secrets: a token's secret is kept only as its SHA-256 digest and
// compared in constant time; the Authorization header is never logged,
// echoed or recorded. Log lines carry errors only through SafeError
// (cockroachdb/redact: the parts marked safe), and RedactingHandler does
// the same for every error attribute a wiring's logger receives. Operator events name the token's Name (in dev mode
// the operator the request names, or "dev").
//
// api imports producer, ledger, projector, fsm and events.
// It must never import: consumers/..., mcp, node, cmd/..., embedded,
// adapter/httproute, adapter/social, adapter/booking, adapter/payment,
// fakeapi, testharness, testing.
package api
