// Package telemetry owns settle's OpenTelemetry traces: the process's
// tracer, set up from the standard OTEL_* environment variables (OTLP over
// HTTP or gRPC, off when none asks for it), the spans the write path, the
// reconcilers, the transports and the webhook start through it, their
// attribute names (settle.intent_id, settle.route, settle.state, ...), and
// the W3C traceparent a caller sends, an intent records and a route may
// forward.
//
// When tracing is off (the default) Start is one atomic load and returns
// the caller's context and a Span whose methods do nothing: no span, no
// context, no allocation. Every string attribute passes the process's
// scrubber (Setup's Scrub) before it is recorded.
//
// It must never import: adapter/..., api, cmd/..., consumers/..., embedded, events, fakeapi, fsm, ledger, mcp, node, producer, projector, service/..., testharness, testing.
package telemetry
