// Package producer is settle's write path. Execute records an intent and
// makes its write as fsm.Decider says: intent first, WriteStarted
// acknowledged on the log, then at most one external call, then the
// classified outcome. TakeWrite carries out one write step for the
// reconciler too. The operator actions (Approve, Abandon, Resolve*) and
// the tool wrapper for agents (Call: keys from task and step) are
// appends through the same checks.
//
// The log itself (stream, CAS appends, lost acks, group commit, Load) is
// package ledger's; routes and their policy are package adapter's.
//
// producer imports ledger, fsm, adapter and events.
// It must never import: consumers/..., projector, api, mcp, node, cmd/..., testharness, fakeapi.
package producer
