package fsm

import (
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
)

// guard checks the conditions that the transition table alone cannot. The
// safety rules live here as well as in the decision function, so that no
// caller can append around them: see safetyGuard.
func (i *Intent) guard(e events.Event) error {
	var err error
	switch d := e.Data.(type) {
	case *events.IntentRecordedData:
		err = guardRecorded(e, d)
	case *events.WriteStartedData:
		err = i.guardWriteStarted(e, d)
	case *events.WriteSucceededData, *events.WriteConfirmedData, *events.WriteRejectedData, *events.OutcomeUnknownData:
		if a := i.LastAttempt(); a == nil || e.AttemptID != a.ID {
			err = errors.New("outcome must name the open attempt")
		}
	case *events.CandidateFoundData:
		if d.Account != "" && d.Account != i.Recorded.Account {
			err = errors.New("the candidate belongs to another account: it cannot be this intent's effect")
		}
	case *events.RetryClaimedData:
		err = i.guardClaim(e, d)
	case *events.ClaimExpiredData:
		if i.Claim == nil {
			err = errors.New("no claim to expire")
		} else if e.At.Before(i.Claim.LeaseUntil) {
			err = errors.New("the claim's lease has not expired")
		}
	case *events.ReadbackPassedData:
		err = i.guardReceipt(d.Receipt)
	}
	if err != nil {
		return err
	}
	return i.safetyGuard(e)
}

// guardRecorded: intent id and key are derived from the recorded fields.
func guardRecorded(e events.Event, d *events.IntentRecordedData) error {
	if e.IntentID != events.ScopedIntentID(d.Tenant, d.Route, d.Account, d.RequestID) {
		return errors.New("intent id is not derived from tenant, route, account and request id")
	}
	if d.IdempotencyKey != events.IdempotencyKey(e.IntentID) {
		return errors.New("idempotency key is not derived from the intent")
	}
	return nil
}

// guardWriteStarted: attempts in order, the intent's key and first
// request, and a won claim, a release or an approval as the state needs.
func (i *Intent) guardWriteStarted(e events.Event, d *events.WriteStartedData) error {
	n := len(i.Attempts) + 1
	if d.Attempt != n {
		return errors.Errorf("attempt %d, expected %d", d.Attempt, n)
	}
	if e.AttemptID != events.AttemptID(i.ID, n) {
		return errors.Errorf("attempt id %q, expected %q", e.AttemptID, events.AttemptID(i.ID, n))
	}
	if d.IdempotencyKey != i.Recorded.IdempotencyKey {
		return errors.New("every attempt must carry the intent's idempotency key")
	}
	if first := i.SentRequest(); first != nil && d.Request != nil && !d.Request.Equal(first) {
		return errors.New("a retry sends the request its first attempt recorded, not another")
	}
	switch i.State {
	case Recorded:
		if n > 1 && !i.Released {
			return errors.New("a retry needs a won claim or an operator release")
		}
		if n == 1 && i.Recorded.Policy.FirstWrite == events.PolicyApproval {
			return errors.New("the route requires approval before the first write")
		}
	case ApprovedState:
		if n > 1 {
			return errors.New("an approved retry still needs a won claim")
		}
	case RetryClaimed:
		if i.Claim == nil || i.Claim.Attempt != n {
			return errors.New("the claim is for another attempt")
		}
		if d.ClaimOwner != i.Claim.Owner {
			return errors.Errorf("claim belongs to %q", i.Claim.Owner)
		}
		if !e.At.Before(i.Claim.LeaseUntil) {
			return errors.New("the claim's lease expired")
		}
	}
	return nil
}

// guardClaim: the claim's attempt number, the route's retry policy and
// approval, a retryable rejection, and a lease that ends after it starts.
func (i *Intent) guardClaim(e events.Event, d *events.RetryClaimedData) error {
	p := i.Recorded.Policy
	if n := len(i.Attempts) + 1; d.Attempt != n {
		return errors.Errorf("claim for attempt %d, expected %d", d.Attempt, n)
	}
	if p.Retry == events.PolicyNever {
		return errors.New("route policy never retries")
	}
	if p.Retry == events.PolicyApproval && i.State != ApprovedState {
		return errors.New("route policy requires approval before a retry")
	}
	if i.State == Rejected && (i.LastRejection == nil || !i.LastRejection.Retryable) {
		return errors.New("the rejection is not retryable")
	}
	if !e.At.Before(d.LeaseUntil) {
		return errors.New("lease ends before it starts")
	}
	return nil
}

// guardReceipt: a readback receipt holds the intent's payload digest and
// only passing checks.
func (i *Intent) guardReceipt(r events.Receipt) error {
	if r.PayloadSHA256 != i.Recorded.PayloadSHA256 {
		return errors.New("receipt payload digest differs from the intent's")
	}
	for _, c := range r.Checks {
		if !c.OK {
			return errors.Errorf("check %s failed", c.Name)
		}
	}
	return nil
}

// safetyGuard holds the safety rules, judged by the capabilities frozen
// into the intent. Each is also what the decision function decides, so a
// refusal here means a caller tried to append around it.
func (i *Intent) safetyGuard(e events.Event) error {
	switch d := e.Data.(type) {
	case *events.WriteStartedData:
		if i.Expired(e.At) {
			return errors.New("the intent expired: no write may start after expires_at")
		}
	case *events.RetryClaimedData:
		return i.safeClaim(e, d)
	case *events.SearchWindowElapsedData, *events.StatusNotFoundData:
		if i.WriteProven {
			return errors.New("an attempt was proven written: it is never not_found")
		}
	case *events.CandidateFoundData:
		return i.safeCandidate(d)
	case *events.ReadbackPassedData:
		have := map[string]bool{}
		for _, c := range d.Receipt.Checks {
			have[c.Name] = c.OK
		}
		for _, name := range i.RequiredChecks() {
			if !have[name] {
				return errors.Errorf("the receipt lacks the %s check the route's readback requires", name)
			}
		}
		if i.ExternalID != "" && d.Receipt.ExternalID != i.ExternalID {
			return errors.Errorf("the receipt names %q, the object found was %q", d.Receipt.ExternalID, i.ExternalID)
		}
	}
	return nil
}

// safeCandidate: a found candidate can be this intent's effect. An older
// one is never ours unless our marker names it; on a route with a marker
// the marker must name this intent. (That a candidate created inside the
// clock-skew allowance before the first attempt on a route without a
// marker is ambiguous is the decider's rule only: logs written before it
// confirmed such candidates, and must still fold.)
func (i *Intent) safeCandidate(d *events.CandidateFoundData) error {
	caps := i.Caps()
	marked := caps.Correlation && d.CorrelationID == i.ID
	if i.PreExisting(d.CreatedAt) && !marked {
		return errors.New("the candidate was created before the intent's first attempt: it cannot be our effect")
	}
	if caps.Correlation && d.Source != events.SourceResponse && d.CorrelationID != i.ID {
		return errors.New("the candidate's correlation marker does not name this intent")
	}
	return nil
}

// safeClaim: a retry claim needs the write unproven, the API's wait and
// the expiry respected, budget left and, when an attempt may have
// executed, a key valid through the claimed attempt.
func (i *Intent) safeClaim(e events.Event, d *events.RetryClaimedData) error {
	if i.WriteProven {
		return errors.New("an attempt was proven written: the intent can only be confirmed or handed off, never retried")
	}
	if e.At.Before(i.RetryNotBefore) {
		return errors.Errorf("the API asked for no request before %s (Retry-After)", i.RetryNotBefore.UTC().Format(time.RFC3339))
	}
	if i.Expired(e.At) {
		return errors.New("the intent expired: no retry after expires_at")
	}
	if !i.Recorded.ExpiresAt.IsZero() && d.LeaseUntil.After(i.Recorded.ExpiresAt) {
		return errors.New("the claim's lease outlives expires_at")
	}
	last := i.LastAttempt()
	if last != nil && last.Outcome == events.WriteRejected {
		if i.ResendsLeft() <= 0 {
			return errors.New("resend budget spent")
		}
	} else if i.RetriesLeft() <= 0 {
		return errors.New("retry budget spent")
	}
	if !i.RiskyAttempts() {
		return nil
	}
	kv := i.KeyValidUntil()
	if kv.IsZero() {
		return errors.New("a retry needs a dedup proof: an attempt may have executed, no authoritative search cleared it and the route has no key with a known retention")
	}
	if d.LeaseUntil.After(kv) {
		return errors.New("a retry needs a dedup proof: the claim's lease outlives the idempotency key's retention")
	}
	if d.LeaseUntil.After(ClaimBy(i, kv)) {
		return errors.New("a retry needs a dedup proof: the claim's lease plus the attempt deadline and the clock-skew allowance outlive the idempotency key's retention (the attempt could reach the API after the key expired)")
	}
	return nil
}
