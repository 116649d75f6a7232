// Package faults holds settle's process-level fault scenarios (tests
// only): the real `settle` binary and real nats-server processes (a
// three-node cluster from the module version go.mod pins) run as separate
// OS processes on loopback, with a fake external API in a process of its
// own, and the tests kill, stop, restart, partition, fill and damage them
// (testharness/proc*.go). After each scenario they assert what settle
// promises: every submit acknowledged with 2xx is on the log; at most one
// external effect per intent (counted by the fake); every intent terminal
// or visibly waiting with a reason; `settle audit` passes and the views
// equal the log.
//
// `make test` runs one short scenario of each kind; `make faults` runs the
// whole suite and writes FAULTS.md (-faults.full -faults.report).
//
// faults imports testharness, events, fsm and ledger (to make the stream as
// serve does, before a scenario shapes its store), and nothing imports it.
//
// It must never import: api, mcp, producer, consumers/..., projector.
package faults
