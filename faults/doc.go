// Package faults holds settle's process-level fault scenarios (tests
// only): the real `settle` binary and real nats-server processes (a
// three-node cluster from the module version go.mod pins) run as separate
// OS processes on loopback, with a fake external API in a process of its
// own, and the tests kill, stop, restart, partition, fill and damage them
// (testharness/proc*.go, harness_test.go). After each scenario they assert what settle
// promises: every submit acknowledged with 2xx is on the log; at most one
// external effect per intent (counted by the fake); every intent terminal
// or visibly waiting with a reason; `settle audit` passes and the views
// equal the log.
//
// Links go through TCP proxies the tests cut (no root, no iptables); the
// full disk is a real tmpfs filled to ENOSPC. Scenarios: kill -9 of settle
// mid-burst; the API stopped then SIGTERM; the stream leader killed; a
// minority partitioned; a node restarted with its data and with an empty
// disk; two settles, one cut from NATS longer than its leases; the data
// disk full while serving; a truncated and a corrupted block file; block
// files deleted and the loss accepted, every acknowledged key resubmitted;
// the data directory's lock file deleted and a second serve started;
// clocks within and beyond the skew; a long run sampling the heap. On a
// damaged store settle is held to what it can promise there: every
// acknowledged intent is on the log or named, at start and by the audit.
// The scenarios run two at a time.
//
// `make test` runs one short scenario of each kind; `make faults` runs the
// whole suite and writes FAULTS.md (-faults.full -faults.report).
//
// faults imports testharness, fakeapi, events, fsm and ledger (to make
// the stream as serve does, before a scenario shapes its store), and
// nothing imports it.
//
// It must never import: api, mcp, producer, consumers/..., projector.
package faults
