// Package producer is settle's JetStream writer. It owns the stream (file
// storage, deny delete and purge, dedup window), Append with Nats-Msg-Id =
// <intent_id>:<version> and per-subject compare-and-swap, the resolution of
// lost acks by reading the log, Load of an intent's history, and Execute:
// intent first, WriteStarted acknowledged, then the external call, then the
// classified outcome.
//
// Only producer, consumers, projector and wiring touch nats.go. producer
// imports events, fsm, adapter and nats.go; it must never import consumers,
// projector, api or testharness.
package producer
