package fsm

import (
	"slices"
	"time"

	"github.com/settle-dev/settle/events"
)

// Candidate is an external object as a search, a status query or a
// readback saw it, reduced to what the decision needs. PayloadSHA256 is the
// canon/v1 digest of its payload in the intent's shape ("" when it could
// not be hashed); Resembles is the route's opinion that the payload is a
// damaged copy of the intent's (adapter.Resembler).
type Candidate struct {
	ExternalID    string
	LiveURL       string
	AuthorID      string
	ParentID      string
	Visibility    string
	CreatedAt     time.Time
	PayloadSHA256 string
	CorrelationID string
	Resembles     bool
}

// MarkedOurs reports a candidate whose correlation marker names this
// intent on a route that writes one, by the intent's account (the
// account's immutable id): an effect of this intent, whatever its payload,
// parent or creation time say. (A marker quoted by another author is not
// proof: that candidate is at most a near match.)
func MarkedOurs(i *Intent, caps events.Capabilities, c Candidate) bool {
	return caps.Correlation && c.CorrelationID == i.ID && c.AuthorID == i.Recorded.Account
}

// Match compares a candidate with the intent's identity: author (the
// account's immutable id), canonical payload digest, parent, the
// correlation marker on routes that write one, and the creation time (an
// object older than the first attempt is never ours — unless its marker
// names this intent: only our write can carry it, so a creation time
// that looks older says the API's clock is behind ours).
func Match(i *Intent, caps events.Capabilities, c Candidate) events.CandidateRef {
	ref := events.CandidateRef{ExternalID: c.ExternalID, LiveURL: c.LiveURL, CreatedAt: c.CreatedAt}
	if c.AuthorID != i.Recorded.Account {
		ref.Mismatch = append(ref.Mismatch, "author")
	}
	if c.PayloadSHA256 == "" || c.PayloadSHA256 != i.Recorded.PayloadSHA256 {
		ref.Mismatch = append(ref.Mismatch, "payload")
	}
	if c.ParentID != i.Recorded.ParentExternalID {
		ref.Mismatch = append(ref.Mismatch, "parent")
	}
	if caps.Correlation && c.CorrelationID != i.ID {
		ref.Mismatch = append(ref.Mismatch, "correlation")
	}
	if i.PreExisting(c.CreatedAt) && !(caps.Correlation && c.CorrelationID == i.ID) {
		ref.Mismatch = append(ref.Mismatch, "pre_existing")
	}
	ref.Match = len(ref.Mismatch) == 0
	return ref
}

// near reports a candidate that could be our write, altered: it differs in
// one identity field only (author, parent, a payload the route calls a
// damaged copy, or a missing correlation marker). A candidate created
// before our first attempt, or whose marker names another intent, is
// provably someone else's and never near.
func near(c Candidate, ref events.CandidateRef) bool {
	if ref.Match || slices.Contains(ref.Mismatch, "pre_existing") {
		return false
	}
	m := ref.Mismatch
	if slices.Contains(m, "correlation") {
		if c.CorrelationID != "" {
			return false
		}
		if len(m) == 1 {
			return true // our write with its marker stripped?
		}
		m = slices.DeleteFunc(slices.Clone(m), func(s string) bool { return s == "correlation" })
	}
	if len(m) != 1 {
		return false
	}
	switch m[0] {
	case "author", "parent":
		return true
	case "payload":
		return c.Resembles
	}
	return false
}

// boundRefs keeps at most max candidates, exact matches first.
func boundRefs(refs []events.CandidateRef, max int) ([]events.CandidateRef, int) {
	if len(refs) <= max {
		return refs, 0
	}
	out := make([]events.CandidateRef, 0, max)
	for _, r := range refs {
		if r.Match && len(out) < max {
			out = append(out, r)
		}
	}
	for _, r := range refs {
		if !r.Match && len(out) < max {
			out = append(out, r)
		}
	}
	return out, len(refs) - len(out)
}
