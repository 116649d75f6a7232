package fsm

import (
	"cmp"
	"fmt"
	"slices"
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
	s := d.sortCandidates(i, caps, cands)
	if ev := d.searchFound(i, s); ev != nil {
		return ev
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
		return &events.CheckDeferredData{Reason: events.DeferEventualConsistency, NextCheckAt: next, Candidates: s.shown, CandidatesOmitted: s.omitted}
	}
	for k, c := range cands {
		if near(c, s.refs[k]) {
			return &events.ManualActionRequiredData{Reason: events.ReasonNearMatch, Owner: "operators",
				Message:  "no exact match, but a candidate differs from the intent in one identity field only (" + strings.Join(s.refs[k].Why, "; ") + "); a retry could duplicate it",
				Evidence: s.evidence(i)}
		}
	}
	if i.WriteProven {
		return &events.ManualActionRequiredData{Reason: events.ReasonWrittenUnverified, Owner: "operators",
			Message: "an attempt was proven written but no search found it before the window closed", Evidence: s.evidence(i)}
	}
	return &events.SearchWindowElapsedData{WindowFrom: from, WindowTo: to, Searches: i.Checks, Candidates: s.shown, CandidatesOmitted: s.omitted}
}

// sorted is one listing's candidates compared with the intent: exact
// matches, those our marker names, and (on a route without a marker)
// those that would be exact but were created inside the clock-skew
// allowance before the first attempt.
type sorted struct {
	cands                   []Candidate
	refs                    []events.CandidateRef
	exact, ours, insideSkew []int
	shown                   []events.CandidateRef
	omitted                 int
}

func (d Decider) sortCandidates(i *Intent, caps events.Capabilities, cands []Candidate) sorted {
	s := sorted{cands: cands, refs: make([]events.CandidateRef, len(cands))}
	for k, c := range cands {
		s.refs[k] = Match(i, caps, c)
		switch {
		case s.refs[k].Match:
			s.exact = append(s.exact, k)
		case slices.Equal(s.refs[k].Mismatch, []string{mismatchInsideSkew}):
			s.insideSkew = append(s.insideSkew, k)
		}
		if MarkedOurs(i, caps, c) {
			s.ours = append(s.ours, k) // every exact match on a marker route
		}
	}
	s.shown, s.omitted = boundRefs(s.refs, d.MaxCandidates)
	return s
}

func (s sorted) evidence(i *Intent) events.Evidence {
	return events.Evidence{Candidates: s.shown, CandidatesOmitted: s.omitted, Attempts: AttemptRefs(i), Queried: []string{"search by account and window"}}
}

// searchFound concludes from what a listing shows present, whatever the
// window: one exact match, several, one our marker names that differs,
// or a look-alike nothing tells from the write. Nil when none of these.
func (d Decider) searchFound(i *Intent, s sorted) events.Data {
	mayBeOurs := len(s.exact) + len(s.insideSkew)
	switch {
	case len(s.ours) > 1 && len(s.exact) <= 1:
		return duplicates(i, fmt.Sprintf("%d objects of this account carry this intent's marker", len(s.ours)), s.evidence(i))
	case mayBeOurs > 1:
		what := fmt.Sprintf("%d objects match the intent exactly", len(s.exact))
		if len(s.insideSkew) > 0 {
			what = fmt.Sprintf("%d objects match the intent (%d of them created inside clock_skew before the first attempt)", mayBeOurs, len(s.insideSkew))
		}
		return duplicates(i, what, s.evidence(i))
	case len(s.exact) == 1:
		c := s.cands[s.exact[0]]
		if c.ExternalID == "" {
			return &events.ManualActionRequiredData{Reason: events.ReasonNoExternalID, Owner: "operators",
				Message: "one exact match, but the API gives no external id to read it back by", Evidence: s.evidence(i)}
		}
		return &events.CandidateFoundData{ExternalID: c.ExternalID, LiveURL: c.LiveURL, Source: events.SourceSearch,
			Candidates: s.shown, CandidatesOmitted: s.omitted, CreatedAt: c.CreatedAt, CorrelationID: c.CorrelationID, Account: c.AuthorID}
	case len(s.insideSkew) == 1:
		ref := s.refs[s.insideSkew[0]]
		ev := s.evidence(i)
		ev.Unverified = []string{"whether object " + ref.ExternalID + " is this intent's write or a look-alike made just before it"}
		return &events.ManualActionRequiredData{Reason: events.ReasonAmbiguousMatch, Owner: "operators",
			Message:  "one object matches the intent, but it was " + ref.Why[0] + "; nothing was written again",
			Evidence: ev}
	case len(s.ours) == 1:
		k := s.ours[0]
		return writtenModified(s.refs[k], s.cands[k].ExternalID, s.evidence(i))
	}
	return nil
}

// duplicates hands off several objects that may each be the write. It
// says the write executed more than once only when settle made more than
// one attempt that could have written.
func duplicates(i *Intent, what string, ev events.Evidence) *events.ManualActionRequiredData {
	msg := what
	if n := i.WritingAttempts(); n > 1 {
		msg += fmt.Sprintf(", and settle made %d attempts that could have written: the write may have executed more than once", n)
	} else {
		msg += ", but settle made one attempt that could have written: at most one of them is its write (the others were made by someone else, or by the API)"
	}
	return &events.ManualActionRequiredData{Reason: events.ReasonDuplicateExactMatches, Owner: "operators",
		Message: msg + "; nothing was picked or deleted", Evidence: ev}
}

// writtenModified hands off an object our marker names that differs from
// the intent, saying what differs as read.
func writtenModified(ref events.CandidateRef, extID string, ev events.Evidence) *events.ManualActionRequiredData {
	ev.Unverified = []string{"whether object " + extID + " as it stands (" + strings.Join(ref.Mismatch, ", ") + " differ) is the intended effect"}
	return &events.ManualActionRequiredData{Reason: events.ReasonWrittenModified, Owner: "operators",
		Message:  "the object carrying this intent's marker differs from the intent as read (" + strings.Join(ref.Why, "; ") + "): it is this intent's effect and is never written again",
		Evidence: ev}
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
		return &events.TargetFailedData{Code: cmp.Or(st.Code, "target_failed"), PartialEffects: st.PartialEffects}
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
	var reason events.ManualReason
	var msg string
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
		ev.Evidence.Errors = keepLast(append(ev.Evidence.Errors, e), maxReadErrors+1)
		return ev
	}
	retryAfter = min(max(retryAfter, 0), MaxRetryAfter)
	return &events.CheckDeferredData{Reason: events.DeferReadFailed, Error: e, RetryAfter: events.Duration(retryAfter),
		NextCheckAt: now.Add(max(d.backoff(len(i.ReadErrors)+1), retryAfter))}
}
