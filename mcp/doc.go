// Package mcp serves settle to AI agents over the Model Context Protocol,
// with the official Go SDK (github.com/modelcontextprotocol/go-sdk). An
// agent never calls a side-effecting API itself: it calls settle's tools,
// and every answer tells it the truth — confirmed, rejected, or unknown and
// settling (do not retry).
//
// MCP is a transport of package service: every tool call acts as its
// service.Caller (from the API's bearer token on /mcp, from settle mcp's
// flags on stdio) — its tenant, scopes and limits — and every rule on
// who may do what is the service's. It owns the protocol:
//   - the tools, generated per caller from the configured routes and the
//     caller's scopes and limits: submit_<route> (one per route, the
//     route's payload schema as the input schema, destructive per route),
//     status, pending, and approve/resolve only for the operate scope;
//   - the request ids of agent writes: derived inside settle from task id
//     and step id (and the hash of the payload as the route records it
//     when KeyIncludesPayload is set; producer.ToolRequestID), never taken
//     from the model, and scoped per tenant, route and account as the
//     API's, so a retried or restarted step is the same intent, a new task
//     id a new one, and another tenant's task and step its own;
//   - strict decoding of tool arguments (unknown, duplicate or mistyped
//     arguments are refused naming the argument; a payload is validated by
//     the route's own normalizer before anything is written, and the
//     refusal names the field);
//   - the answers: the lifecycle state mapped to an outcome and plain
//     guidance, a receipt when confirmed, and never a secret (every string
//     of a result is scrubbed of Config.Secrets and their 8-byte pieces
//     by adapter.Scrubber, ASCII case-insensitively);
//   - the gateway (gateway.go): the tools of a route's upstream MCP
//     server offered beside settle's own — its write tool as a settled
//     write, its reads passed through, tools listed unprotected passed
//     through with every answer saying so, any other not offered;
//   - the Tasks extension (tasks.go): a write still settling answered
//     with a task whose id is the intent id;
//   - a call's idempotencyKey (idemkey.go), used as the write's request id;
//   - the streamable-HTTP endpoint (stateless: every request is
//     authenticated by the Authenticator the wiring gives, the API's bearer
//     tokens in settle serve) and the server a stdio transport runs.
//
// Protocol errors are JSON-RPC errors on both transports (jsonrpc.go),
// and a malformed stdio line never ends the session. A lost response is never "failed"; the guidance of each
// outcome is quoted in docs/mcp.md (a test keeps them equal). pending
// lists the caller's tenant's intents from the views and reads each again
// from the log.
//
// Writes, reads and operator actions go through Service, an interface
// declared here (Submit, Get, FindStep, Pending, Act; *service.Service is
// one, itself over interfaces of the write path and the views): every
// rule of the log applies; an operator action appends to the intent as it
// was read (one read) and answers from it.
//
// mcp imports service, ledger, fsm, events, adapter and the
// SDK. Optional adapter methods (PayloadSchema, WriteMethod) are found
// through small interfaces defined here.
// It must never import: api, consumers/..., node, cmd/..., embedded,
// adapter/httproute, fakeapi, testharness, testing.
package mcp
