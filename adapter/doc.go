// Package adapter is the port to external APIs. It defines the small
// interfaces an external system must offer (Writer, Searcher, Reader and the
// optional StatusQuerier), the capability flags that tell the reconciler
// which strategy a route supports, and the outcome classification of one
// HTTP attempt (CallError): not sent, rejected, or unknown. Scrubber
// removes configured secret values (and any 8+ byte part of them) from the
// response-derived fields an adapter returns, before anything records them.
//
// Each concrete API lives in its own sub-package (adapter/social, ...), with
// a compile-time check that it implements Adapter.
//
// adapter imports events only. It must never import NATS, the fsm, the
// producer or the consumers, and its HTTP client never retries: attempts are
// counted in exactly one place, the producer, and are visible on the log.
package adapter
