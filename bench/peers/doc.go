// Package peers measures settle beside two peers on one one-step workload
// against the same fake API, in one run (make bench-peers): DBOS Transact Go
// on PostgreSQL and the Temporal dev server. It is its own Go module so the
// main module never depends on the peers; run.sh starts PostgreSQL and the
// Temporal dev server in a temporary directory. It must never be imported
// by settle's own packages.
package peers
