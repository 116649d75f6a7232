package fsm

import (
	"time"

	"github.com/settle-dev/settle/events"
)

// fold applies e, already checked, moving to state to.
func (i *Intent) fold(e events.Event, to State) {
	from := i.State
	i.Version = e.Version
	i.State = to
	i.UpdatedAt = e.At
	i.LastType = e.Type
	i.foldEpisode(e.At, to)
	if from == Reconciling {
		i.LeaseOwner, i.LeaseUntil = "", time.Time{}
	}
	i.foldReadFailures(e)
	if !i.foldWrite(e) {
		i.foldRead(e, from)
	}
}

// foldEpisode keeps UnknownSince (the unsettled episode's start) and
// clears NextCheckAt outside the states that wait for a check.
func (i *Intent) foldEpisode(at time.Time, to State) {
	switch to {
	case Unknown, Reconciling, InProgress:
		if i.UnknownSince.IsZero() {
			i.UnknownSince = at
		}
	case Verifying:
	default:
		i.UnknownSince = time.Time{}
	}
	if to != Unknown && to != InProgress {
		i.NextCheckAt = time.Time{}
	}
}

// foldReadFailures: a run of failed reads ends with the first read that
// succeeded; steps that read nothing (a worker taking the intent, a lease
// expiry, handing a known external id to readback) neither end nor extend
// it.
func (i *Intent) foldReadFailures(e events.Event) {
	switch d := e.Data.(type) {
	case *events.ReconcileStartedData:
		return
	case *events.CandidateFoundData:
		if d.Source == events.SourceResponse {
			return
		}
	case *events.CheckDeferredData:
		switch d.Reason {
		case events.DeferLeaseExpired:
			return
		case events.DeferReadFailed:
			if i.ReadFailingSince.IsZero() {
				i.ReadFailingSince = e.At
			}
			i.ReadErrors = keepLast(append(i.ReadErrors, d.Error), maxReadErrors)
			return
		}
	}
	i.ReadFailingSince, i.ReadErrors = time.Time{}, nil
}

// keepLast is s's last n elements (all of s when it has fewer).
func keepLast(s []string, n int) []string { return s[max(0, len(s)-n):] }

// foldWrite folds the events of the write path (recording, approval,
// attempts and their outcomes, claims); false for any other event.
func (i *Intent) foldWrite(e events.Event) bool {
	switch d := e.Data.(type) {
	case *events.IntentRecordedData:
		i.ID = e.IntentID
		i.Recorded = *d
		i.CreatedAt = e.At
	case *events.ApprovalRequiredData:
		i.ApprovalFor = d.For
		i.ApprovedBy = ""
	case *events.ApprovedData:
		i.ApprovedBy = d.Operator
	case *events.WriteStartedData:
		i.Attempts = append(i.Attempts, Attempt{N: d.Attempt, ID: e.AttemptID, StartedAt: e.At, Deadline: d.Deadline, ClaimOwner: d.ClaimOwner, Request: d.Request})
		i.Claim = nil
		i.Released = false
		i.ApprovalFor = ""
		i.NotFoundBy = ""
		i.RetryNotBefore = time.Time{}
	case *events.WriteSucceededData:
		i.closeAttempt(e.Type, "")
		i.ExternalID, i.LiveURL = d.ExternalID, d.LiveURL
		i.WriteProven = true
	case *events.WriteConfirmedData:
		i.closeAttempt(e.Type, "")
		i.confirm(d.Receipt)
		i.WriteProven = true
	case *events.WriteRejectedData:
		i.closeAttempt(e.Type, d.Code)
		i.LastRejection = d
		if d.RetryAfter > 0 {
			i.RetryNotBefore = e.At.Add(min(d.RetryAfter.D(), MaxRetryAfter))
		}
	case *events.OutcomeUnknownData:
		i.closeAttempt(e.Type, d.Code)
	case *events.RetryClaimedData:
		i.Claim = &Claim{Owner: d.Owner, LeaseUntil: d.LeaseUntil, Attempt: d.Attempt}
	case *events.ClaimExpiredData:
		i.Claim = nil
		i.NextCheckAt = e.At
	default:
		return false
	}
	return true
}

// foldRead folds the events of reconciliation, readback and the
// operators' decisions.
func (i *Intent) foldRead(e events.Event, from State) {
	switch d := e.Data.(type) {
	case *events.ReconcileStartedData:
		i.Checks++
		i.LeaseOwner, i.LeaseUntil = d.Worker, d.LeaseUntil
	case *events.CheckDeferredData:
		i.NextCheckAt = d.NextCheckAt
	case *events.CandidateFoundData:
		i.ExternalID, i.LiveURL = d.ExternalID, d.LiveURL
		i.WriteProven = true
	case *events.ReadbackPassedData:
		i.confirm(d.Receipt)
	case *events.ReadbackFailedData:
		i.ManualReason = events.ReasonReadbackFailed
		i.Evidence = &events.Evidence{Checks: d.Checks, Unverified: d.Failed}
	case *events.TargetProcessingData:
		i.Polls++
		i.NextCheckAt = d.NextCheckAt
		if i.ProcessingDeadline.IsZero() {
			i.ProcessingDeadline = d.Deadline
		}
	case *events.SearchWindowElapsedData:
		i.NotFoundBy = e.Type
		if i.Caps().SearchAuthoritative {
			// The window covered every attempt so far (Window spans them
			// all): none of them made an effect.
			for k := range i.Attempts {
				i.Attempts[k].Cleared = true
			}
		}
	case *events.StatusNotFoundData:
		i.NotFoundBy = e.Type
	case *events.TargetFailedData:
		i.Failure = d.Code
		i.PartialEffects = d.PartialEffects
	case *events.ManualActionRequiredData:
		i.ManualReason = d.Reason
		i.ManualOwner = d.Owner
		ev := d.Evidence
		i.Evidence = &ev
		i.Claim = nil
	case *events.OperatorConfirmedData:
		i.confirm(d.Receipt)
	case *events.OperatorReleasedData:
		i.Released = true
		i.ManualReason, i.ManualOwner, i.Evidence = "", "", nil
	case *events.AbandonedData:
		i.AbandonedFrom = from
		i.EffectPossible = d.EffectPossible
	}
}
