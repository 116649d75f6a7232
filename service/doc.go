// Package service is what a caller may do with intents, whatever
// protocol it speaks: submit (with per-process single-flight), wait until
// settled, get one, find a tool call's intent by task and step, list,
// list what waits for a human, the operator actions, and the figures
// over every intent. The HTTP API (package api) and the MCP server
// (package mcp) are its two transports: they authenticate, decode and
// answer in their protocol, and every rule about who may do what is
// here, once.
//
// It owns:
//   - Caller, the one caller type of every transport: a name, a tenant,
//     scopes (ScopeSubmit, ScopeRead, ScopeOperate) and route/account
//     limits. The API builds it from a bearer token (for /v1 and /mcp);
//     settle mcp from its flags. Every operation is the caller's tenant's:
//     request ids and task/step keys are scoped per tenant, route and
//     account (events.ScopedIntentID with the caller's tenant), and
//     another tenant's intent does not exist for it (ErrNotFound, never
//     its state);
//   - the vocabulary of operator actions (Actions: approve,
//     resolve_confirmed, resolve_not_executed, abandon) and of
//     resolutions (confirmed, not_executed, abandoned), and their checks
//     (a reason is required, a confirmed resolution names the external
//     object, a live URL is http(s) without credentials);
//   - Settled: the states ?wait= and wait_seconds wait for.
//
// Writes go through Intents (*producer.Producer); single intents are
// read from the log, lists and figures from Views (*projector.Projector).
//
// What a caller without the read scope is shown of a replay of its own
// request is its transport's choice (Submitted.Visible): the API refuses
// it (403), MCP answers the outcome without the receipt, so an agent is
// still told not to retry.
//
// service imports producer, projector, ledger, fsm and events (and,
// through producer, adapter).
// It must never import: api, mcp, node, cmd/..., consumers/..., embedded,
// adapter/httproute, fakeapi, testharness, testing.
package service
