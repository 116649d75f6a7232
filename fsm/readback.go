package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/settle-dev/settle/events"
)

// Readback is a successful read of the object an intent points at: Found
// false when the API says it does not exist (yet); ProbeStatus is the HTTP
// status of a credential-free GET of its live URL (0: no URL to probe).
type Readback struct {
	Found       bool
	Object      Candidate
	ProbeStatus int
}

// ConcludeReadback checks the object found (or answered) against every
// identity field; all must hold for a receipt.
func (d Decider) ConcludeReadback(i *Intent, caps events.Capabilities, now time.Time, rb Readback) events.Data {
	if !rb.Found {
		return &events.CheckDeferredData{Reason: events.DeferReadbackNotVisible, NextCheckAt: now.Add(d.backoff(i.Checks + 1))}
	}
	o := rb.Object
	liveURL := cmp.Or(o.LiveURL, i.LiveURL)
	required := RequiredChecks(caps)
	ref := Match(i, caps, o)
	var checks []events.Check
	if slices.Contains(required, "url") {
		urlCheck := events.Check{Name: "url", Detail: "no live URL"}
		if liveURL != "" {
			urlCheck.OK = rb.ProbeStatus == 200
			urlCheck.Detail = fmt.Sprintf("HTTP %d", rb.ProbeStatus)
		}
		checks = append(checks, urlCheck)
	}
	checks = append(checks, identityChecks(ref, o)...)
	if slices.Contains(required, "visibility") {
		checks = append(checks, events.Check{Name: "visibility", OK: o.Visibility == "public", Detail: "visibility " + quoteOrNone(o.Visibility)})
	}
	if caps.Correlation {
		checks = append(checks, events.Check{Name: "correlation", OK: o.CorrelationID == i.ID, Detail: "marker names " + quoteOrNone(o.CorrelationID)})
	}
	if slices.Contains(ref.Mismatch, mismatchPreExisting) {
		checks = append(checks, events.Check{Name: "created", Detail: "created " + o.CreatedAt.UTC().Format(time.RFC3339) + ", before the first attempt"})
	}
	if c, ok := idCheck(i, o.ExternalID); ok {
		checks = append(checks, c)
	}
	extID := cmp.Or(o.ExternalID, i.ExternalID)
	if MarkedOurs(i, caps, o) && (slices.Contains(ref.Mismatch, "payload") || slices.Contains(ref.Mismatch, "parent")) {
		// Our own effect, changed since: the search path's rule.
		ref.ExternalID = extID
		ev := d.handoff(i, events.ReasonWrittenModified, "", caps)
		ev.Evidence.Candidates = []events.CandidateRef{ref}
		ev.Evidence.Checks = checks
		return writtenModified(ref, extID, ev.Evidence)
	}
	return conclude(i, extID, liveURL, checks, now)
}

// identityChecks are the author, payload and parent checks of a readback,
// each saying what was read.
func identityChecks(ref events.CandidateRef, o Candidate) []events.Check {
	why := func(kind, fallback string) string {
		for k, m := range ref.Mismatch {
			if m == kind && k < len(ref.Why) {
				return ref.Why[k]
			}
		}
		return fallback
	}
	payload := "canon/v1 sha256 of body and assets"
	if len(ref.Normalised) > 0 {
		payload = "canon/v1 sha256 after the route's normalisations (" + strings.Join(ref.Normalised, ", ") + ")"
	}
	parent := "parent " + quoteOrNone(o.ParentID)
	for _, w := range ref.Why {
		if strings.HasPrefix(w, "parent read as empty") {
			parent = w
		}
	}
	return []events.Check{
		{Name: "author", OK: !slices.Contains(ref.Mismatch, "author"), Detail: "author_id " + quoteOrNone(o.AuthorID)},
		{Name: "payload", OK: !slices.Contains(ref.Mismatch, "payload"), Detail: why("payload", payload)},
		{Name: "parent", OK: !slices.Contains(ref.Mismatch, "parent"), Detail: why("parent", parent)},
	}
}

// ConcludeStatusReadback verifies, on a status route, that the applied
// change equals the approved one; the applied and current versions are
// recorded apart (a later change by someone else is not re-applied).
func (d Decider) ConcludeStatusReadback(i *Intent, caps events.Capabilities, now time.Time, st StatusObservation) events.Data {
	if !st.Found {
		return &events.CheckDeferredData{Reason: events.DeferReadbackNotVisible, NextCheckAt: now.Add(d.backoff(i.Checks + 1))}
	}
	checks := []events.Check{
		{Name: "status", OK: st.State == StatusCompleted, Detail: "state " + st.State},
		{Name: "payload", OK: st.PayloadSHA256 != "" && st.PayloadSHA256 == i.Recorded.PayloadSHA256, Detail: "the applied change equals the approved change"},
	}
	if st.Account != "" {
		checks = append(checks, events.Check{Name: "account", OK: st.Account == i.Recorded.Account, Detail: "account " + quoteOrNone(st.Account)})
	}
	if caps.Correlation {
		checks = append(checks, events.Check{Name: "correlation", OK: st.CorrelationID == i.ID, Detail: "marker names " + quoteOrNone(st.CorrelationID)})
	}
	if st.AppliedVersion != "" {
		detail := "applied version " + st.AppliedVersion
		if st.Version != "" && st.Version != st.AppliedVersion {
			detail += "; current version " + st.Version + " (changed later by another writer, not re-applied)"
		}
		checks = append(checks, events.Check{Name: "version", OK: true, Detail: detail})
	}
	if c, ok := idCheck(i, st.ExternalID); ok {
		checks = append(checks, c)
	}
	extID := cmp.Or(st.ExternalID, i.ExternalID)
	if extID == "" {
		ev := d.handoff(i, events.ReasonNoExternalID, "the status query gives no external id to name the receipt by", caps)
		ev.Evidence.Checks = checks
		return ev
	}
	return conclude(i, extID, st.LiveURL, checks, now)
}

// idCheck is the failed "id" check of a readback whose object names
// another id than the one found (the read answered with another object,
// or the API gives the same object ids of another form): never a receipt
// of this intent (the guard refuses a ReadbackPassed naming another id),
// so a hand-off with the evidence rather than a conclusion refused at
// every check.
func idCheck(i *Intent, read string) (events.Check, bool) {
	if read == "" || i.ExternalID == "" || read == i.ExternalID {
		return events.Check{}, false
	}
	return events.Check{Name: "id", Detail: fmt.Sprintf("read back %s, found %s", quoteOrNone(read), quoteOrNone(i.ExternalID))}, true
}

func conclude(i *Intent, extID, liveURL string, checks []events.Check, now time.Time) events.Data {
	var failed []string
	for _, c := range checks {
		if !c.OK {
			failed = append(failed, c.Name)
		}
	}
	if len(failed) > 0 {
		return &events.ReadbackFailedData{ExternalID: extID, Checks: checks, Failed: failed}
	}
	attempt := ""
	if a := i.LastAttempt(); a != nil {
		attempt = a.ID
	}
	return &events.ReadbackPassedData{Receipt: events.Receipt{
		ExternalID: extID, LiveURL: liveURL, Checks: checks, ReadbackAt: now.UTC(),
		PayloadSHA256: i.Recorded.PayloadSHA256, Source: events.SourceReadback,
		IdempotencyKey: i.Recorded.IdempotencyKey, RequestID: i.Recorded.RequestID, AttemptID: attempt,
	}}
}

func quoteOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", s)
}
