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
// The API is a transport of package service: a token authenticates as a
// service.Caller (name, tenant, scopes, route/account limits), and every
// operation — submit with single-flight and ?wait=, get, list, the
// operator actions, the figures of /metrics — is the service's, with the
// service's rules on who may do what; the API keeps HTTP's part: routing,
// authentication, decoding the body and the query, problems, headers.
// Request ids are scoped per tenant, route and account
// (events.ScopedIntentID); a replay shows the intent as it is now, and
// only to a token that may read it (403 otherwise). Another tenant's
// intent is 404. Authenticate gives the same caller to the surfaces
// mounted beside the API (the MCP endpoint).
//
// The API depends on two interfaces it declares: Service
// (*service.Service) and Log (what /readyz checks: *ledger.Store). Single
// intents are read from the log and never stale; lists, counts and
// metrics read the views.
//
// Submit follows the IETF Idempotency-Key draft: the request id comes from
// the body or the Idempotency-Key header (sf-string or bare). The first
// submit answers 201 whatever the write's outcome (its state says it); a
// replay 200 with Idempotent-Replayed: true; another payload 422; an
// intent still in flight 409 unless ?wait= (bounded). Errors are RFC 9457
// problems naming the field, header or query parameter. A body's strings
// that are not valid Unicode are refused naming the field
// (internal/jsonstr), a body with a Content-Encoding other than identity
// is refused (415, internal/contentcoding), headers are bounded (431).
//
// README's table lists every metric, and a test compares it with the
// code and a live /metrics; HTTP requests are counted by the endpoint's
// pattern, never the client's path. The console (/console) is one
// embedded page, its inline script and style pinned by hash in its CSP,
// that reads only the public API.
//
// Secrets: a token's secret is kept only as its SHA-256 digest and
// compared in constant time; the Authorization header is never logged,
// echoed or recorded. Log lines carry errors only through SafeError
// (cockroachdb/redact: the parts marked safe). Operator events name the
// token's Name (in dev mode the operator the request names, or "dev").
//
// api imports service, producer, ledger, projector, fsm and events.
// It must never import: consumers/..., mcp, node, cmd/..., embedded,
// adapter/httproute, fakeapi, testharness, testing.
package api
