// Package producer is settle's write path. Execute records an intent and
// makes its write as fsm.Decider says: intent first, WriteStarted
// acknowledged on the log, then at most one external call, then the
// classified outcome. Its Writer (write.go) carries out one write step;
// a reconciler makes its own Writer for the write steps it takes. An
// intent held after an accepted log loss is never recorded anew or
// written for (hold.go). The operator actions (Approve, Abandon, Resolve*) and
// the tool wrapper for agents (Call: keys from task and step) are
// appends through the same checks.
//
// The log itself (stream, CAS appends, lost acks, group commit, Load) is
// package ledger's; routes and their policy are package adapter's.
//
// producer imports ledger, fsm, adapter and events.
// It must never import: consumers/..., projector, service, api, mcp, node, cmd/..., testharness, fakeapi.
package producer
