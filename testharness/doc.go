// Package testharness holds what tests and benchmarks run against: embedded
// nats-server nodes (single, restartable, and 3-node clusters on loopback,
// each with a t.TempDir() store), fake external APIs served over real HTTP
// that count effects and fail on purpose, a seeded simulation and the
// invariant checks it asserts.
//
// It never mocks NATS. Only tests, benchmarks and the self-contained
// `settle demo` import it; the settle service (serve) never does.
package testharness
