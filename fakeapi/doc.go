// Package fakeapi holds fake external APIs served over real HTTP on
// loopback: a social network, a booking service, a payment processor,
// and GitHub, Slack and Stripe as their documentation describes them. Each
// counts its effects and fails on purpose (Next, NextFor: a response lost
// after the commit, a reset before it, delays, duplicates, look-alikes,
// visibility lag, read failures, rate limits). The GitHub, Slack and
// Stripe fakes also take each provider's documented habits as options
// (With...): installation tokens, private repositories, silent page caps,
// edits after creation, Slack's text rewriting and rate tier, Stripe's
// API versions, a clock that is off. NewGitHubMCPServer is an MCP server
// (official go-sdk) with the tools and answers of GitHub's own, in front
// of a GitHub API, with faults of its own.
//
// Tests start a fake with NewXAPI(t, ...), which closes it when the test
// ends; `settle demo` and examples/socialapi use NewXAPIServer. The
// package links no testing code (a test passes itself as a Cleaner).
//
// fakeapi imports events only.
// It must never import: testing, testharness, fsm, adapter/..., ledger, producer, consumers/..., projector, api, mcp, cmd/..., github.com/nats-io/....
package fakeapi
