// Package fsm owns the intent lifecycle: the transition table
// (Transitions, on looplab/fsm; docs/lifecycle.md is generated from it),
// the guards the table alone cannot express, Fold, which rebuilds an
// intent from its history and refuses an illegal history with an error
// naming the event, its version and the state (FoldCode is its stable
// code), and the decision function (Decider), the only place that decides
// what happens to an intent next; and the two rules every reader asks:
// whether an intent is settled (settled.go: Settled, Reconciled) and
// whether it is held after an accepted log loss (hold.go: LossHeld,
// LossHandoff). The fold carries everything a view of the intent needs
// (UnknownSince included), so a reader folds once.
//
// # Guards
//
// Beyond the table: attempts are numbered 1, 2, ... with attempt ids to
// match; every WriteStarted carries the intent's idempotency key and the
// first attempt's recorded request; a second attempt needs a won claim
// (its owner writes, strictly inside its lease) or an operator's release;
// a claim needs a retry policy other than never, an Approved first when
// the policy says approval, a retryable rejection when it follows one,
// and the API's Retry-After passed; an outcome names the open attempt; a
// readback receipt holds only passing checks and the intent's payload
// digest; intent id and key are derived again from the recorded fields.
// IntentRecorded freezes the route's policy and capabilities (key and
// retention, status query, search and whether it is authoritative,
// correlation marker, declared readback checks), so every judgement
// depends on the log alone, and the guards hold the safety rules below
// too: no caller can append around the decider.
//
// # The decision function
//
// The decider is split by the question each part answers: decide.go
// (what a step is, the Decider's settings, the search window), next.go
// (what happens next: Next and the write, retry and hand-off steps),
// match.go (is this object ours: Candidate, Match, MarkedOurs),
// conclude.go (what a search or status query proved) and readback.go
// (does the object found hold up). The fold is fold.go, the guards
// guard.go.
//
// Decider.Next(intent, caps, now) returns one step: wait until T, done,
// append this event, write (append the WriteStarted, call once, append
// the outcome), reconcile (run the route's read-only query) or verify
// (read the object back). What a read saw goes to ConcludeSearch (with
// the time the listing started), ConcludeIncompleteSearch,
// ConcludeStatus, ConcludeReadback, ConcludeStatusReadback or
// ConcludeReadFailure, which return the event to append. Next and the
// Conclude functions are pure and deterministic (their inputs are the
// folded intent, the frozen capabilities, the observations a caller made
// and the time it passes; the only randomness is the poll jitter, whose
// result is recorded); every event they return is accepted by Apply.
//
// # Rules (and the hand-off reason each breaks into)
//
//   - No retry after a proven write: after WriteSucceeded, WriteConfirmed
//     or an exact match, the intent is confirmed by readback, by an
//     operator, or handed off (written_unverified when it cannot be read
//     back before its window closes, nor by one more readback after it).
//   - A retry needs a dedup proof that covers its attempt: the idempotency
//     key valid (retention from the first attempt, minus margin and skew)
//     until the claim's lease end plus attempt_deadline plus the skew, or
//     an authoritative search whose window closed with no exact match. A
//     status query's "not found" alone is no proof (no_dedup_proof); a key
//     whose retention passed or is unknown hands off
//     (key_retention_expired). Resends after a proven rejection (not sent,
//     429, 425) need none: backoff with jitter inside resend_budget, apart
//     from retry_budget, which counts retries after an attempt that may
//     have executed.
//   - "Key already used" (adapter.CodeKeyReused) proves an earlier request
//     arrived: recorded unknown, never resent (key_reused).
//   - The API's Retry-After (retry_after on the event) is honoured by
//     resends, claims and rechecks, capped at MaxRetryAfter and, for
//     writes, by the expiry. No write and no claim at or after expires_at:
//     an expired intent is Abandoned (effect_possible when an attempt may
//     have executed).
//   - An exact match needs author, payload digest and parent equal, the
//     correlation marker naming the intent where the route writes one, and
//     a creation time not before the first attempt minus the skew (an
//     older look-alike is pre_existing) unless our marker names it. One
//     exact match is verified by readback; two or more hand off
//     (duplicate_exact_matches), nothing picked; a candidate differing in
//     one identity field is a near match (near_match), never a retry.
//   - An object our marker names, by the intent's account, is ours
//     whatever its payload, parent or time says; if it differs from the
//     intent it is handed off at once with what was read where it differs
//     (written_modified). A parent the API shows empty on such an object
//     (a pull request's comment has no issue_url) is no difference: the
//     write's request named the parent. A marker quoted by another author
//     proves nothing.
//   - A payload equal to the intent's once both are normalised as the
//     route declares (Candidate.Normalised: the API's documented
//     rewritings, payload.normalize) is the intent's payload.
//   - On a route without a marker, an object that would be an exact
//     match but was created inside the clock-skew allowance before the
//     first attempt is ambiguous_match: the write, or a look-alike made
//     just before it; never confirmed, never written again. With another
//     exact match beside it, the two are duplicates.
//   - A hand-off names what was seen (each candidate's creation time
//     against the first attempt, author, parent as read and from which
//     field, and why each check failed: events.CandidateRef), never a
//     cause it did not see: duplicates say the write may have executed
//     more than once only when more than one attempt could have written.
//   - A status answer naming another account or another intent is
//     status_not_ours; a completed answer without the marker the route
//     writes is status_unverifiable; neither is confirmed.
//   - Absence is proven: a listing whose end is not proven can show a
//     write present, never absent; the window counts as closed only for a
//     listing started after it closed.
//   - Never stuck: a result without an external id (no_external_id), reads
//     failing past read_failing_after (read_failing), a target processing
//     past its deadline (processing_deadline), partial effects, a route
//     with neither query nor search (no_query_no_dedup), an intent held
//     after a log loss (log_events_lost): each is a hand-off with its
//     evidence. A malformed listing or a failed probe is a read failure,
//     never "0 candidates".
//
// Contract: Fold and Apply are deterministic and pure. They read only the
// events (their recorded times, never the wall clock), do no I/O, and the
// same history always folds to the same Intent, so any reader (worker,
// projector, audit) can replay the log and agree. The looplab/fsm machine is
// built without callbacks (a callback that re-enters the machine deadlocks
// it); an Intent is restored by folding, never by mutating the machine.
// Intents are not safe for concurrent mutation; fold a private copy.
//
// fsm imports events and looplab/fsm only.
// It must never import: adapter/..., ledger, producer, consumers/...,
// projector, api, mcp, cmd/..., embedded, fakeapi, testharness,
// github.com/nats-io/....
package fsm
