// Package fakeapi holds fake external APIs served over real HTTP on
// loopback — a social network, a booking service, a payment processor,
// and GitHub, Slack and Stripe as their documentation describes them —
// that count their effects (writes, per key or request) and fail on
// purpose (a response lost after the commit, a reset before it, delays,
// duplicates, look-alikes, visibility lag, read failures, rate limits),
// globally or for one intent's writes. The GitHub, Slack and Stripe fakes
// also have each provider's documented habits as small options (With...),
// so that a test or a seeded simulation can switch them on: installation
// tokens, private repositories, silent page caps, edits after creation,
// Slack's link and entity rewriting and history rate tier, Stripe's API
// versions, and an API clock that is off (its Date header included).
// NewGitHubMCPServer is an MCP server on the official go-sdk in front of
// a GitHub API, with the tools, arguments and answers of GitHub's own MCP
// server and faults of its own (lost replies, crashes, slow calls,
// garbage and wrong-shaped answers).
//
// Tests start them with NewXAPI(t, ...), which closes the server when the
// test ends; `settle demo` and examples/socialapi start one with
// NewXAPIServer. The package links no testing code (a test passes itself
// as a Cleaner), so the settle binary can serve the demo's fake.
//
// fakeapi imports events only.
// It must never import: testing, testharness, fsm, adapter/..., ledger, producer, consumers/..., projector, api, mcp, cmd/..., github.com/nats-io/....
package fakeapi
