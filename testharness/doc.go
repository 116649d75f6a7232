// Package testharness holds what tests and benchmarks run against:
// embedded nats-server nodes (single, restartable, and 3-node clusters on
// loopback, each with a t.TempDir() store), a manual clock, hand-built
// histories on a real stream (HandLog: legal events through the fsm, and
// planted ones the audit must find), and example routes compiled against
// a fake API (package fakeapi's).
//
// Faults are injected by wrapping what production code takes, never by
// fields of its configs: BatchFaults and LaggingCopy wrap a JetStream
// (lost batch commits and acks; a reader's lagging copy), LossyAPI
// relays the JetStream API and loses chosen answers.
//
// proc*.go runs the real settle and nats-server binaries as OS processes
// (built once, the cluster configured from package deploy's files), every
// cluster link through a TCP proxy a test can cut.
//
// It never mocks NATS. Only tests and benchmarks import it: the settle
// binary never links it, nor package testing.
//
// It must never import: consumers/..., api, mcp, cmd/....
package testharness
