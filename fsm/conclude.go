package fsm

import (
	"fmt"
	"strings"
	"time"

	"github.com/settle-dev/settle/events"
)

// ConcludeSearch turns one search's candidates (those of the intent's
// window) into the event that ends the ReconcileStarted step. listedAt is
// when the listing started (before its first page was read; zero: now):
// the window counts as closed only for a listing started after it closed,
// since a listing that straddled the window's end may have read its pages
// before a write made inside the window showed. 1 exact match
// → CandidateFound; 2+ → ManualActionRequired{duplicate_exact_matches}; a
// candidate our marker names that is not exact (edited, rewritten, moved)
// → ManualActionRequired{written_modified} at once, never a retry; 0 while
// the window is open → CheckDeferred; 0 after it → a near match hands off,
// otherwise SearchWindowElapsed.
func (d Decider) ConcludeSearch(i *Intent, caps events.Capabilities, now, listedAt time.Time, cands []Candidate) events.Data {
	if listedAt.IsZero() || listedAt.After(now) {
		listedAt = now
	}
	refs := make([]events.CandidateRef, len(cands))
	var exact, ours []int
	for k, c := range cands {
		refs[k] = Match(i, caps, c)
		if refs[k].Match {
			exact = append(exact, k)
		}
		if MarkedOurs(i, caps, c) {
			ours = append(ours, k) // every exact match on a marker route
		}
	}
	shown, omitted := boundRefs(refs, d.MaxCandidates)
	evidence := func() events.Evidence {
		return events.Evidence{Candidates: shown, CandidatesOmitted: omitted, Attempts: AttemptRefs(i), Queried: []string{"search by account and window"}}
	}
	switch {
	case len(ours) > 1 && len(exact) <= 1:
		return &events.ManualActionRequiredData{Reason: events.ReasonDuplicateExactMatches, Owner: "operators",
			Message:  fmt.Sprintf("%d objects of this account carry this intent's marker: the write executed more than once; nothing was picked or deleted", len(ours)),
			Evidence: evidence()}
	case len(exact) == 1:
		c := cands[exact[0]]
		if c.ExternalID == "" {
			return &events.ManualActionRequiredData{Reason: events.ReasonNoExternalID, Owner: "operators",
				Message: "one exact match, but the API gives no external id to read it back by", Evidence: evidence()}
		}
		return &events.CandidateFoundData{ExternalID: c.ExternalID, LiveURL: c.LiveURL, Source: events.SourceSearch,
			Candidates: shown, CandidatesOmitted: omitted, CreatedAt: c.CreatedAt, CorrelationID: c.CorrelationID, Account: c.AuthorID}
	case len(exact) > 1:
		return &events.ManualActionRequiredData{Reason: events.ReasonDuplicateExactMatches, Owner: "operators",
			Message:  fmt.Sprintf("%d exact matches: the write executed more than once; nothing was picked or deleted", len(exact)),
			Evidence: evidence()}
	case len(ours) == 1:
		ev := evidence()
		ev.Unverified = []string{"whether object " + cands[ours[0]].ExternalID + " as it stands (" + strings.Join(refs[ours[0]].Mismatch, ", ") + " differ) is the intended effect"}
		return &events.ManualActionRequiredData{Reason: events.ReasonWrittenModified, Owner: "operators",
			Message:  "an object carrying this intent's marker differs from the intent (edited after the write, or rewritten by the API): it is this intent's effect and is never written again",
			Evidence: ev}
	}
	from, to := Window(i)
	if listedAt.Before(to) {
		// Open for this listing (it may have closed while it ran: then
		// the next listing, started after it, looks at once).
		next := now.Add(d.backoff(i.Checks))
		if next.After(to) {
			next = to
			if next.Before(now) {
				next = now
			}
		}
		return &events.CheckDeferredData{Reason: events.DeferEventualConsistency, NextCheckAt: next, Candidates: shown, CandidatesOmitted: omitted}
	}
	for k, c := range cands {
		if near(c, refs[k]) {
			return &events.ManualActionRequiredData{Reason: events.ReasonNearMatch, Owner: "operators",
				Message:  "no exact match, but a candidate differs from the intent in one identity field only; a retry could duplicate it",
				Evidence: evidence()}
		}
	}
	if i.WriteProven {
		return &events.ManualActionRequiredData{Reason: events.ReasonWrittenUnverified, Owner: "operators",
			Message: "an attempt was proven written but no search found it before the window closed", Evidence: evidence()}
	}
	return &events.SearchWindowElapsedData{WindowFrom: from, WindowTo: to, Searches: i.Checks, Candidates: shown, CandidatesOmitted: omitted}
}

// ConcludeIncompleteSearch concludes from a listing whose end was not
// proven (adapter.ErrListingIncomplete; code is its safe code): what it
// read can prove our write present — one exact match, two or more, our
// marked object changed, an exact match without an id — never absent.
// Anything else is a failed read (ConcludeReadError), never "0
// candidates", a near match or a closed window.
func (d Decider) ConcludeIncompleteSearch(i *Intent, caps events.Capabilities, now, listedAt time.Time, cands []Candidate, code string) events.Data {
	ev := d.ConcludeSearch(i, caps, now, listedAt, cands)
	switch e := ev.(type) {
	case *events.CandidateFoundData:
		return ev
	case *events.ManualActionRequiredData:
		switch e.Reason {
		case events.ReasonDuplicateExactMatches, events.ReasonWrittenModified, events.ReasonNoExternalID:
			return ev
		}
	}
	return d.ConcludeReadError(i, caps, now, "search", code)
}

// StatusObservation is what a status query said (Found false: not found).
type StatusObservation struct {
	Found          bool
	State          string // completed | processing | failed
	ExternalID     string
	LiveURL        string
	Code           string
	PartialEffects []string
	// For a readback: the applied change's digest and versions.
	PayloadSHA256  string
	Version        string
	AppliedVersion string
	// CorrelationID is the intent the object's marker names (routes with
	// a correlation marker).
	CorrelationID string
	// Account is the account the API says the write belongs to ("" when
	// it does not say).
	Account string
}

// Status states of StatusObservation.State.
const (
	StatusCompleted  = "completed"
	StatusProcessing = "processing"
	StatusFailed     = "failed"
)

// ConcludeStatus turns a status query's answer into the event that ends
// the ReconcileStarted step.
func (d Decider) ConcludeStatus(i *Intent, caps events.Capabilities, now time.Time, st StatusObservation) events.Data {
	if !st.Found {
		visibleBy := i.LastAttempt().StartedAt.Add(caps.ReflectionDelay.D() + i.Recorded.Policy.ClockSkew.D())
		if now.Before(visibleBy) {
			return &events.CheckDeferredData{Reason: events.DeferReflectionDelay, NextCheckAt: visibleBy}
		}
		if i.WriteProven {
			return d.handoff(i, events.ReasonWrittenUnverified, "an attempt was proven written but the status query does not know it", caps)
		}
		return &events.StatusNotFoundData{ReflectionDelay: caps.ReflectionDelay, Queried: "status by request id"}
	}
	if ev := d.statusNotOurs(i, caps, st); ev != nil {
		return ev
	}
	switch st.State {
	case StatusCompleted:
		if st.ExternalID == "" {
			ev := d.handoff(i, events.ReasonNoExternalID, "the status query says completed but gives no external id to read it back by", caps)
			ev.Evidence.CurrentState = st.State
			return ev
		}
		return &events.CandidateFoundData{ExternalID: st.ExternalID, LiveURL: st.LiveURL, Source: events.SourceStatus, CorrelationID: st.CorrelationID, Account: st.Account}
	case StatusProcessing:
		deadline := i.ProcessingDeadline
		if deadline.IsZero() {
			deadline = now.Add(d.ProcessingDeadline)
		}
		if !now.Before(deadline) {
			ev := d.handoff(i, events.ReasonProcessingDeadline, "the target still says processing after the polling deadline; stays unverified, handed off", caps)
			ev.Evidence.CurrentState = st.State
			return ev
		}
		next := now.Add(d.jitter(d.PollCap(i.Polls + 1)))
		if next.After(deadline) {
			next = deadline
		}
		return &events.TargetProcessingData{Poll: i.Polls + 1, NextCheckAt: next, Deadline: deadline}
	case StatusFailed:
		code := st.Code
		if code == "" {
			code = "target_failed"
		}
		return &events.TargetFailedData{Code: code, PartialEffects: st.PartialEffects}
	}
	return d.ConcludeReadError(i, caps, now, "status", "unknown_status_state")
}

// statusNotOurs hands off a status answer that is not (or cannot be
// checked to be) this intent's write: one naming another account (a
// request id is not unique across accounts), one whose marker names
// another intent, and a completed one without a marker on a route that
// writes one. Nil when the answer may be ours. Such an answer is never a
// conclusion the guards would refuse: a step that cannot conclude would
// be taken again and again.
func (d Decider) statusNotOurs(i *Intent, caps events.Capabilities, st StatusObservation) *events.ManualActionRequiredData {
	ref := events.CandidateRef{ExternalID: st.ExternalID, LiveURL: st.LiveURL}
	var reason, msg string
	switch {
	case st.Account != "" && st.Account != i.Recorded.Account:
		ref.Mismatch = []string{"account"}
		reason, msg = events.ReasonStatusNotOurs, "the status query answered with a write of another account ("+quoteOrNone(st.Account)+") under the same request id: it says nothing of this intent's write"
	case caps.Correlation && st.CorrelationID != "" && st.CorrelationID != i.ID:
		ref.Mismatch = []string{"correlation"}
		reason, msg = events.ReasonStatusNotOurs, "the status query answered with a write whose marker names another intent: it says nothing of this intent's write"
	case caps.Correlation && st.CorrelationID == "" && st.State == StatusCompleted:
		ref.Mismatch = []string{"correlation"}
		reason, msg = events.ReasonStatusUnverifiable, "the status query says completed, but its answer carries no marker where the route writes one: it cannot be checked to be this intent's write"
	default:
		return nil
	}
	ev := d.handoff(i, reason, msg, caps)
	ev.Evidence.CurrentState = st.State
	ev.Evidence.Candidates = []events.CandidateRef{ref}
	return ev
}

// ConcludeReadError records a failed external read (what: search, status,
// get, probe; code: a safe error code): look again later, or, once reads
// have failed for longer than the policy's ReadFailingAfter, hand off with
// the last errors. A read failure never counts as "not found".
func (d Decider) ConcludeReadError(i *Intent, caps events.Capabilities, now time.Time, what, code string) events.Data {
	return d.ConcludeReadFailure(i, caps, now, what, code, 0)
}

// ConcludeReadFailure is ConcludeReadError for a read the API answered
// with a wait (Retry-After, or a declared rate-limit reset): the next
// check is no earlier than retryAfter (capped at MaxRetryAfter), which is
// recorded.
func (d Decider) ConcludeReadFailure(i *Intent, caps events.Capabilities, now time.Time, what, code string, retryAfter time.Duration) events.Data {
	e := what + ": " + code
	since := i.ReadFailingSince
	if since.IsZero() {
		since = now
	}
	if now.Sub(since) >= i.Recorded.Policy.ReadFailingBound() {
		ev := d.handoff(i, events.ReasonReadFailing, fmt.Sprintf("external reads have failed since %s", since.UTC().Format(time.RFC3339)), caps)
		ev.Evidence.Errors = append(ev.Evidence.Errors, e)
		if n := len(ev.Evidence.Errors); n > maxReadErrors+1 {
			ev.Evidence.Errors = ev.Evidence.Errors[n-maxReadErrors-1:]
		}
		return ev
	}
	retryAfter = min(max(retryAfter, 0), MaxRetryAfter)
	return &events.CheckDeferredData{Reason: events.DeferReadFailed, Error: e, RetryAfter: events.Duration(retryAfter),
		NextCheckAt: now.Add(max(d.backoff(len(i.ReadErrors)+1), retryAfter))}
}

// Readback is a successful read of the object an intent points at: Found
// false when the API says it does not exist (yet); ProbeStatus is the HTTP
