// Package producer is settle's JetStream writer. It owns the stream (file
// storage, deny delete and purge, dedup window), Append with Nats-Msg-Id =
// <intent_id>:<version> and per-subject compare-and-swap, the resolution of
// lost acks by reading the log (each Append call's own append id tells its
// message from a competitor's identical one), the group commit of
// concurrent appends into JetStream atomic batches (batch.go), Load of an
// intent's history, and Execute: the write path of fsm.Decider — intent first, WriteStarted
// acknowledged, then at most one external call, then the classified
// outcome. TakeWrite carries out one write step for the reconciler too.
//
// Only producer, consumers, projector and wiring touch nats.go. producer
// imports events, fsm, adapter and nats.go; it must never import consumers,
// projector, api or testharness.
package producer
