// Package api is settle's HTTP surface: the JSON API over intents
// (submit with Idempotency-Key semantics, read, list, operator actions),
// bearer-token authentication with scopes and route/account limits,
// health and readiness probes, Prometheus metrics written by hand, the
// OpenAPI 3.1 document and the operator console (one embedded HTML page).
//
// Writes go through producer.Producer (Execute and the operator actions),
// so every rule of the log applies: intent first, CAS appends, refusal of
// illegal transitions. Single-intent reads (GET /v1/intents/{id}, submit
// replays, ?wait=) fold the intent's history from the log, so they are
// never stale; lists, counts and metrics read the projector's views.
//
// Secrets: a token's secret is kept only as its SHA-256 digest and
// compared in constant time; the Authorization header is never logged,
// echoed or recorded. Operator events name the token's Name (in dev mode
// the operator the request names, or "dev").
//
// api imports producer, projector, fsm and events. It must never import
// consumers, embedded or testharness (its tests may).
package api
