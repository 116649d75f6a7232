package fsm

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/settle-dev/settle/events"
)

// Next decides the intent's next step at now. caps are i.Caps().
func (d Decider) Next(i *Intent, caps events.Capabilities, now time.Time) Step {
	switch i.State {
	case Recorded, AwaitingApproval, ApprovedState:
		return d.nextBeforeWrite(i, caps, now)
	case WriteStarted:
		return nextWriteStarted(i, now)
	case Verifying:
		return Step{Kind: StepVerify, Why: "read the object back"}
	case Rejected:
		return d.nextRejected(i, caps, now)
	case Unknown, InProgress:
		return d.nextUnknown(i, caps, now)
	case Reconciling:
		return d.nextReconciling(i, caps, now)
	case NotFound:
		return d.retry(i, caps, now)
	case RetryClaimed:
		return d.nextClaimed(i, now)
	case Failed:
		return nextFailed(i)
	}
	// confirmed, abandoned, manual_action: nothing for settle to do.
	return done(string(i.State))
}

// nextBeforeWrite decides a recorded, awaiting or approved intent: the
// first write, an approval, a retry after approval, or abandonment.
func (d Decider) nextBeforeWrite(i *Intent, caps events.Capabilities, now time.Time) Step {
	if i.Expired(now) {
		return d.abandonExpired(i)
	}
	switch i.State {
	case Recorded:
		if len(i.Attempts) == 0 && i.Recorded.Policy.FirstWrite == events.PolicyApproval {
			return writePathStep(&events.ApprovalRequiredData{For: "first_write", Reason: "route policy requires approval before the first write"}, "approval before the first write")
		}
		if !i.Released && now.Before(i.UpdatedAt.Add(d.RecordedGrace)) {
			return wait(i.UpdatedAt.Add(d.RecordedGrace), "the writer may still start it")
		}
		return d.write(i, now, "")
	case AwaitingApproval:
		if !i.Recorded.ExpiresAt.IsZero() {
			return wait(i.Recorded.ExpiresAt, "awaiting approval until the intent expires")
		}
		return done("awaiting approval")
	}
	if len(i.Attempts) == 0 {
		return d.write(i, now, "")
	}
	return d.retry(i, caps, now)
}

// nextWriteStarted waits for the open attempt, or calls it unknown once
// its deadline (plus the skew) passed.
func nextWriteStarted(i *Intent, now time.Time) Step {
	a := i.LastAttempt()
	skew := i.Recorded.Policy.ClockSkew.D()
	if now.After(a.Deadline.Add(skew)) {
		s := appendStep(&events.OutcomeUnknownData{Code: "attempt_deadline_passed",
			Message: "no outcome was recorded before the attempt's deadline; the writer may have died after sending"}, "attempt deadline passed")
		s.AttemptID = a.ID
		return s
	}
	return wait(a.Deadline.Add(skew).Add(time.Millisecond), "the attempt may still be running")
}

// nextRejected decides after a rejection: a key-reuse hand-off, a final
// rejection, or a resend after its backoff.
func (d Decider) nextRejected(i *Intent, caps events.Capabilities, now time.Time) Step {
	r := i.LastRejection
	switch {
	case r != nil && r.Code == events.CodeKeyReused:
		// Not a rejection: evidence that an earlier request with the
		// key reached the API (recorded so by a mistaken adapter).
		// Nothing proves it did not execute.
		return appendStep(d.handoff(i, events.ReasonKeyReused,
			"the API answered that the idempotency key was already used: an earlier request with it reached the API and may have executed; it is never resent", caps), "key already used")
	case r == nil || !r.Retryable:
		return done("the rejection is definite")
	case i.Recorded.Policy.Retry == events.PolicyNever:
		return done("the route never retries")
	case i.ResendsLeft() <= 0:
		return done("resend budget spent")
	case i.Expired(now):
		return d.abandonExpired(i)
	}
	due := i.UpdatedAt.Add(d.resendWait(i))
	why := "resend backoff"
	if i.RetryNotBefore.After(due) {
		due, why = i.RetryNotBefore, "the API asked to wait (Retry-After)"
	}
	if exp := i.Recorded.ExpiresAt; !exp.IsZero() && exp.Before(due) {
		due = exp // then abandoned, never written
	}
	if now.Before(due) {
		return wait(due, why)
	}
	return d.retry(i, caps, now)
}

// nextUnknown takes an unknown (or in-progress) intent for one check,
// or hands it off when nothing can settle it.
func (d Decider) nextUnknown(i *Intent, caps events.Capabilities, now time.Time) Step {
	if i.WriteProven {
		// A proven write is read back until its window closes and once
		// after (its checks may have been late: workers down, a slow
		// read); only a check made after the window that did not verify
		// it hands it off.
		if _, to := Window(i); !now.Before(to) && !i.UpdatedAt.Before(to) {
			return appendStep(d.handoff(i, events.ReasonWrittenUnverified,
				"an attempt was proven written but the object could not be read back before the window closed, nor once after it (deleted, moderated or slow); it is never written again", caps), "proven write not verifiable")
		}
	}
	if now.Before(i.NextCheckAt) {
		return wait(i.NextCheckAt, "next check")
	}
	strategy := StrategyOf(caps)
	if i.WriteProven {
		strategy = StrategyReadback
	}
	if strategy == StrategyNone {
		return appendStep(d.handoff(i, events.ReasonNoQueryNoDedup,
			"the route offers no status query and no search: the result cannot be proven; a human must check", caps), "no way to settle")
	}
	return appendStep(&events.ReconcileStartedData{Worker: d.Actor, LeaseUntil: now.Add(d.Lease), Strategy: strategy, Check: i.Checks + 1}, "take the intent for one check")
}

// nextReconciling runs the check its lease holder took, or frees the
// intent when the lease expired.
func (d Decider) nextReconciling(i *Intent, caps events.Capabilities, now time.Time) Step {
	if i.LeaseOwner != d.Actor && now.Before(i.LeaseUntil) {
		return wait(i.LeaseUntil, "another worker holds the lease")
	}
	if i.LeaseOwner != d.Actor || !now.Before(i.LeaseUntil) {
		// The worker that took this step died (or we restarted).
		return appendStep(&events.CheckDeferredData{Reason: events.DeferLeaseExpired, NextCheckAt: now}, "lease expired")
	}
	if i.WriteProven {
		return appendStep(&events.CandidateFoundData{ExternalID: i.ExternalID, LiveURL: i.LiveURL, Source: events.SourceResponse}, "read back the proven write")
	}
	return Step{Kind: StepReconcile, Strategy: StrategyOf(caps), Why: "query the external system"}
}

// nextClaimed writes the claimed attempt (its owner only) or expires the
// claim.
func (d Decider) nextClaimed(i *Intent, now time.Time) Step {
	c := i.Claim
	if !now.Before(c.LeaseUntil) {
		return appendStep(&events.ClaimExpiredData{Owner: c.Owner, LeaseUntil: c.LeaseUntil}, "claim lease expired")
	}
	if c.Owner != d.Actor {
		return wait(c.LeaseUntil, "another worker holds the claim")
	}
	return d.write(i, now, d.Actor)
}

// nextFailed hands off a failure that left partial effects.
func nextFailed(i *Intent) Step {
	if len(i.PartialEffects) > 0 {
		return appendStep(&events.ManualActionRequiredData{Reason: events.ReasonPartialEffects,
			Message: "the target failed but left partial effects; a human must decide", Owner: "operators",
			Evidence: events.Evidence{Unverified: i.PartialEffects, Attempts: AttemptRefs(i)}}, "partial effects")
	}
	return done("failed without effects")
}

// write is the step of attempt n. A retry carries the request the first
// attempt recorded: it is sent again as it was (the producer renders and
// records the request of an attempt that carries none).
func (d Decider) write(i *Intent, now time.Time, owner string) Step {
	n := len(i.Attempts) + 1
	return Step{Kind: StepWrite, WritePath: true, AttemptID: events.AttemptID(i.ID, n), Why: fmt.Sprintf("write attempt %d", n),
		Event: &events.WriteStartedData{Attempt: n, IdempotencyKey: i.Recorded.IdempotencyKey,
			Deadline: now.Add(i.Recorded.Policy.AttemptDeadline.D()), ClaimOwner: owner, Request: i.SentRequest()}}
}

func (d Decider) abandonExpired(i *Intent) Step {
	return writePathStep(&events.AbandonedData{By: d.Actor, Reason: string(events.ReasonIntentExpired) + ": expires_at passed before a write could start",
		EffectPossible: i.AnyEffectPossible()}, "expired")
}

// retry decides, after not_found, an approval or a retryable rejection,
// whether one more attempt is safe. The claim is then won or lost by CAS.
func (d Decider) retry(i *Intent, caps events.Capabilities, now time.Time) Step {
	p := i.Recorded.Policy
	manual := func(reason events.ManualReason, msg string) Step {
		return appendStep(&events.ManualActionRequiredData{Reason: reason, Message: msg, Owner: "operators",
			Evidence: events.Evidence{Attempts: AttemptRefs(i), Queried: queried(caps)}}, string(reason))
	}
	if i.Expired(now) {
		return d.abandonExpired(i)
	}
	if i.WriteProven {
		return manual(events.ReasonWrittenUnverified, "an attempt was proven written: it is never retried")
	}
	if now.Before(i.RetryNotBefore) {
		return wait(i.RetryNotBefore, "the API asked to wait (Retry-After)")
	}
	budget := i.BudgetLeft()
	if budget <= 0 {
		return manual(events.ReasonRetryBudgetSpent, "proven not executed, but the retry budget is spent")
	}
	if p.Retry == events.PolicyNever {
		return manual(events.ReasonRetryNever, "proven not executed; the route never retries automatically")
	}
	var keyValid, claimBy time.Time
	if i.RiskyAttempts() {
		// An attempt may have executed and no authoritative search has
		// cleared it: only the idempotency key can make a retry safe, and
		// only while it stays valid through the attempt the claim allows.
		keyValid = i.keyValidUntil(caps)
		claimBy = ClaimBy(i, keyValid)
		switch {
		case keyValid.IsZero() && caps.IdempotencyKey:
			return manual(events.ReasonKeyRetentionExpired, "the idempotency key's retention cannot be established: a retry could execute twice")
		case keyValid.IsZero():
			return manual(events.ReasonNoDedupProof, "not found, but nothing proves a retry cannot duplicate the write: the route has no idempotency key and no authoritative search ("+string(i.NotFoundBy)+")")
		case !now.Before(keyValid):
			return manual(events.ReasonKeyRetentionExpired, "the idempotency key's retention has passed: a retry could execute twice")
		case !now.Before(claimBy):
			return manual(events.ReasonKeyRetentionExpired, "the idempotency key's retention ends before a retry's attempt could: the attempt could reach the API after the key expired and execute twice")
		}
	}
	if p.Retry == events.PolicyApproval && i.State != ApprovedState {
		return writePathStep(&events.ApprovalRequiredData{For: "retry", Reason: "proven not executed; the route requires approval before a retry"}, "approval before a retry")
	}
	lease := now.Add(d.Lease)
	if !claimBy.IsZero() && claimBy.Before(lease) {
		lease = claimBy
	}
	if exp := i.Recorded.ExpiresAt; !exp.IsZero() && exp.Before(lease) {
		lease = exp
	}
	return writePathStep(&events.RetryClaimedData{Owner: d.Actor, LeaseUntil: lease, Attempt: len(i.Attempts) + 1,
		BudgetLeft: budget - 1, KeyValidUntil: keyValid, ApprovedBy: i.ApprovedBy}, "claim the retry")
}

// resendWait is the backoff before resending after the k-th consecutive
// proven rejection: a deterministic equal jitter in [b/2, b], derived from
// the intent and attempt so every worker computes the same time.
func (d Decider) resendWait(i *Intent) time.Duration {
	_, k := i.retriesAndResends()
	b := doubling(d.ResendBase, d.ResendCap, k+1)
	h := fnv.New64a()
	_, _ = h.Write([]byte(i.ID))
	_ = binary.Write(h, binary.BigEndian, uint64(len(i.Attempts)))
	half := b / 2
	if half <= 0 {
		return b
	}
	return half + time.Duration(h.Sum64()%uint64(half+1))
}

// backoff is the wait before the n-th recheck (n ≥ 1): Recheck doubling
// up to MaxRecheck.
func (d Decider) backoff(n int) time.Duration { return doubling(d.Recheck, d.MaxRecheck, n) }

// doubling is base·2^(n-1) (n ≥ 1), bounded by limit.
func doubling(base, limit time.Duration, n int) time.Duration {
	for k := 1; k < n && base < limit; k++ {
		base *= 2
	}
	return min(base, limit)
}

func (d Decider) jitter(limit time.Duration) time.Duration {
	if d.Jitter == nil || limit <= time.Millisecond {
		return max(limit, time.Millisecond)
	}
	return d.Jitter(limit)
}

// PollCap is the exponential cap of poll n: PollBase·2^(n-1), bounded by
// MaxRecheck; the wait before poll n is a full jitter under it.
func (d Decider) PollCap(n int) time.Duration { return doubling(d.PollBase, d.MaxRecheck, n) }

// keyValidUntil is KeyValidUntil judged by caps.
func (i *Intent) keyValidUntil(c events.Capabilities) time.Time {
	p := i.Recorded.Policy
	retention := c.KeyRetention.D()
	if p.KeyRetention > 0 && (retention == 0 || p.KeyRetention.D() < retention) {
		retention = p.KeyRetention.D()
	}
	if !c.IdempotencyKey || retention <= 0 || len(i.Attempts) == 0 {
		return time.Time{}
	}
	return i.Attempts[0].StartedAt.Add(retention - p.RetentionMargin.D() - p.ClockSkew.D())
}

// ClaimBy is the latest end of a retry claim's lease whose attempt still
// reaches the API while the idempotency key, valid until keyValid, holds:
// an attempt starts before its claim's lease ends and may reach the API
// until its deadline (the policy's attempt deadline) plus the clock-skew
// allowance. Zero when keyValid is zero.
func ClaimBy(i *Intent, keyValid time.Time) time.Time {
	if keyValid.IsZero() {
		return time.Time{}
	}
	p := i.Recorded.Policy
	return keyValid.Add(-p.AttemptDeadline.D() - p.ClockSkew.D())
}

// AttemptRefs lists the intent's attempts for evidence.
func AttemptRefs(i *Intent) []events.AttemptRef {
	out := make([]events.AttemptRef, len(i.Attempts))
	for k, a := range i.Attempts {
		out[k] = events.AttemptRef{AttemptID: a.ID, StartedAt: a.StartedAt, Outcome: string(a.Outcome)}
	}
	return out
}

func queried(c events.Capabilities) []string {
	var q []string
	if c.StatusQuery {
		q = append(q, "status by request id")
	}
	if c.Search {
		q = append(q, "search by account and window")
	}
	return q
}

// handoff builds the manual action for a result that cannot be proven:
// every attempt, what was queried and what is not verified. No automatic
// write follows a hand-off.
func (d Decider) handoff(i *Intent, reason events.ManualReason, msg string, caps events.Capabilities) *events.ManualActionRequiredData {
	var unverified []string
	if a := i.LastAttempt(); a != nil {
		unverified = []string{"whether attempt " + a.ID + " executed"}
	}
	if i.WriteProven {
		unverified = []string{"object " + i.ExternalID + " (proven written) as it stands now"}
	}
	return &events.ManualActionRequiredData{Reason: reason, Message: msg, Owner: "operators",
		Evidence: events.Evidence{Attempts: AttemptRefs(i), Queried: queried(caps), Unverified: unverified, Errors: slices.Clone(i.ReadErrors)}}
}
