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
// damaged copy of the intent's (adapter.Resembler); Normalised names the
// route's declared normalisations under which its payload equals the
// intent's (adapter.PayloadComparer; nil when it does not, or the route
// declares none); ParentFrom is the field the route read ParentID from.
type Candidate struct {
	ExternalID    string
	LiveURL       string
	AuthorID      string
	ParentID      string
	ParentFrom    string
	Visibility    string
	CreatedAt     time.Time
	PayloadSHA256 string
	Normalised    []string
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

// Mismatch kinds of events.CandidateRef besides the identity fields.
const (
	// mismatchPreExisting: created before the first attempt, beyond the
	// clock-skew allowance.
	mismatchPreExisting = "pre_existing"
	// mismatchInsideSkew: on a route without a marker, an otherwise exact
	// candidate created inside the clock-skew allowance before the first
	// attempt: ours or a look-alike made just before, nothing tells.
	mismatchInsideSkew = "inside_skew"
)

// Match compares a candidate with the intent's identity: author (the
// account's immutable id), canonical payload digest (or equality under
// the route's declared normalisations), parent, the correlation marker on
// routes that write one, and the creation time. On an object our marker
// names, an older creation time (the API's clock behind ours) and an
// empty parent are no difference: only our write carries the marker. The
// ref records what was seen and, per failed check, why.
func Match(i *Intent, caps events.Capabilities, c Candidate) events.CandidateRef {
	ref := events.CandidateRef{ExternalID: c.ExternalID, LiveURL: c.LiveURL, CreatedAt: c.CreatedAt,
		Author: c.AuthorID, Parent: c.ParentID, ParentFrom: c.ParentFrom, FromFirstAttempt: fromFirstAttempt(i, c.CreatedAt)}
	fail := func(kind, why string) {
		ref.Mismatch = append(ref.Mismatch, kind)
		ref.Why = append(ref.Why, why)
	}
	if c.AuthorID != i.Recorded.Account {
		fail("author", "author read as "+quoteOrNone(c.AuthorID)+", the intent's account is "+quoteOrNone(i.Recorded.Account))
	}
	switch {
	case c.PayloadSHA256 != "" && c.PayloadSHA256 == i.Recorded.PayloadSHA256:
	case len(c.Normalised) > 0:
		ref.Normalised = slices.Clone(c.Normalised)
	case c.PayloadSHA256 == "":
		fail("payload", "payload could not be read in the intent's shape")
	default:
		fail("payload", "payload differs from the intent's (canon/v1 sha256 "+short(c.PayloadSHA256)+", the intent's "+short(i.Recorded.PayloadSHA256)+")")
	}
	marked := caps.Correlation && c.CorrelationID == i.ID
	if why, differs := parentDiffers(i, c, marked); why != "" {
		if differs {
			fail("parent", why)
		} else {
			ref.Why = append(ref.Why, why)
		}
	}
	if caps.Correlation && !marked {
		fail("correlation", "marker names "+quoteOrNone(c.CorrelationID)+", not this intent")
	}
	if i.PreExisting(c.CreatedAt) && !marked {
		fail(mismatchPreExisting, "created "+beforeFirst(i, c.CreatedAt)+", by more than clock_skew "+i.Recorded.Policy.ClockSkew.D().String())
	}
	if len(ref.Mismatch) == 0 && !caps.Correlation && i.InsideSkewBefore(c.CreatedAt) {
		fail(mismatchInsideSkew, "created "+beforeFirst(i, c.CreatedAt)+", inside clock_skew "+i.Recorded.Policy.ClockSkew.D().String()+
			", on a route without a correlation marker: the write, or a look-alike made just before it")
	}
	ref.Match = len(ref.Mismatch) == 0
	return ref
}

// parentDiffers compares the candidate's parent with the intent's: why
// is what was seen ("" when they agree); differs is false for a parent
// the API showed empty on an object our marker names.
func parentDiffers(i *Intent, c Candidate, marked bool) (why string, differs bool) {
	want := i.Recorded.ParentExternalID
	if c.ParentID == want {
		return "", false
	}
	from := ""
	if c.ParentFrom != "" {
		from = " from " + c.ParentFrom
	}
	if c.ParentID == "" && marked {
		return "parent read as empty" + from + " (the API leaves it empty for this object); the marker names this intent, whose write named parent " + quoteOrNone(want), false
	}
	if c.ParentID == "" {
		return "parent read as empty" + from + ", the intent's is " + quoteOrNone(want), true
	}
	return "parent read as " + quoteOrNone(c.ParentID) + from + ", the intent's is " + quoteOrNone(want), true
}

// fromFirstAttempt renders how long after (+) or before (-) the first
// attempt an object was created ("" when either time is unknown).
func fromFirstAttempt(i *Intent, created time.Time) string {
	if created.IsZero() || len(i.Attempts) == 0 {
		return ""
	}
	d := created.Sub(i.Attempts[0].StartedAt).Round(time.Millisecond)
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

// beforeFirst renders how long before the first attempt t is.
func beforeFirst(i *Intent, t time.Time) string {
	return i.Attempts[0].StartedAt.Sub(t).Round(time.Millisecond).String() + " before the first attempt"
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

// near reports a candidate that could be our write, altered: it differs in
// one identity field only (author, parent, a payload the route calls a
// damaged copy, or a missing correlation marker). A candidate created
// before our first attempt, or whose marker names another intent, is
// provably someone else's and never near.
func near(c Candidate, ref events.CandidateRef) bool {
	if ref.Match || slices.Contains(ref.Mismatch, mismatchPreExisting) || slices.Contains(ref.Mismatch, mismatchInsideSkew) {
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
