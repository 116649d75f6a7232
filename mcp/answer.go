package mcp

import (
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/service"
)

// Outcomes an answer reports. An agent acts on the outcome; the state is
// the lifecycle state behind it.
const (
	// OutcomeConfirmed: the write happened once and is proven (receipt).
	OutcomeConfirmed = "confirmed"
	// OutcomeRejected: the write was not made (proven).
	OutcomeRejected = "rejected"
	// OutcomeUnknown: not known yet — the write may have happened, or is
	// about to; settle is settling it. Never retry it.
	OutcomeUnknown = "unknown"
	// OutcomeAwaitingApproval: a human must approve before settle writes.
	OutcomeAwaitingApproval = "awaiting_approval"
	// OutcomeNeedsHuman: settle cannot prove what happened; a human decides.
	OutcomeNeedsHuman = "needs_human"
	// OutcomeFailed: the external system reported that the operation
	// failed (after it was accepted).
	OutcomeFailed = "failed"
	// OutcomeAbandoned: settle will not make this write.
	OutcomeAbandoned = "abandoned"
)

// Answer is what submit, status, approve and resolve return about one
// intent (the structured content of the tool result; the text content is
// the guidance followed by the same JSON).
type Answer struct {
	IntentID string    `json:"intent_id"`
	Route    string    `json:"route"`
	Account  string    `json:"account"`
	State    fsm.State `json:"state"`
	Outcome  string    `json:"outcome"`
	// Replayed: this task and step were already recorded; the answer is
	// the stored intent's and nothing new was written.
	Replayed bool `json:"replayed"`
	// Settled: nothing automatic is left to happen (the outcome is known,
	// or a human must act); status with wait_seconds waits for it.
	Settled  bool `json:"settled"`
	Attempts int  `json:"attempts"`
	// Receipt is the proof of a confirmed write.
	Receipt *Receipt `json:"receipt,omitempty"`
	// Rejection says why a rejected write was refused.
	Rejection *Rejection `json:"rejection,omitempty"`
	// Reason is why a human is needed, or why the intent was abandoned or
	// failed (a stable code).
	Reason string `json:"reason,omitempty"`
	// NextCheckAt is when settle looks again at an unknown intent.
	NextCheckAt time.Time `json:"next_check_at,omitzero"`
	// Guidance is what the agent should do now, in plain words.
	Guidance string `json:"guidance"`
}

// Receipt is the proof of a confirmed write.
type Receipt struct {
	ExternalID    string    `json:"external_id"`
	LiveURL       string    `json:"live_url,omitempty"`
	PayloadSHA256 string    `json:"payload_sha256"`
	Source        string    `json:"source"`
	Checks        []Check   `json:"checks,omitempty"`
	VerifiedAt    time.Time `json:"verified_at,omitzero"`
}

// Check is one verification of a receipt.
type Check struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
}

// Rejection is why a write was refused.
type Rejection struct {
	Code       string `json:"code"`
	StatusCode int    `json:"status_code,omitempty"`
	Retryable  bool   `json:"retryable"`
}

// Guidance texts. They are the contract with the model: short, plain,
// and the same for every route.
const (
	guideConfirmed = "confirmed: the write happened exactly once and settle verified it (see receipt). " +
		"Do not submit it again; use the receipt."
	guideUnknown = "unknown: the write may have happened; settle is reconciling it. Do not retry, and do not " +
		"resubmit it under a new task_id or step_id: that could make a second write. Ask for status " +
		"(with wait_seconds) until it is confirmed, rejected or needs a human."
	guidePending = "unknown: the write has not been made yet; settle is making it. Do not retry or resubmit it " +
		"under new ids; ask for status (with wait_seconds)."
	guideVerifying = "unknown: the API accepted the write; settle is verifying that it took effect as asked " +
		"(reading it back). Do not retry, and do not resubmit it under new ids; ask for status (with wait_seconds)."
	guideInFlight = "unknown: the write is being sent right now, and may or may not happen. Do not retry, and do " +
		"not resubmit it under new ids; ask for status (with wait_seconds)."
	guideRejectedRetryable = "rejected: the write was not made (temporary refusal). Submitting the same task_id " +
		"and step_id again retries it safely, with the same key; never resubmit it under new ids."
	guideRejected = "rejected: the write was not made, and will not be retried. Nothing happened. To try something " +
		"else, fix the cause and submit it as a new step (a new step_id)."
	guideApproval = "awaiting_approval: nothing has been written; a human must approve this write before settle " +
		"makes it. Do not resubmit it under new ids; ask for status later."
	guideApprovalRetry = "awaiting_approval: an earlier attempt was proven not to have happened; a human must " +
		"approve the retry. Do not resubmit it under new ids; ask for status later."
	guideNeedsHuman = "needs_human: settle cannot prove whether the write happened (see reason), so it will not " +
		"retry it; a human will decide. Do not retry or resubmit it under new ids; ask for status later."
	guideFailed = "failed: the external system reports that the operation failed after accepting it (see reason); " +
		"parts of it may have taken effect. Do not retry it; a human reviews it."
	guideAbandoned = "abandoned: settle will not make this write (see reason). Do not resubmit it under new ids " +
		"unless a human asks you to."
	guideAbandonedEffect = "abandoned: settle will not make this write again, but an earlier attempt may have " +
		"taken effect (effect possible). Do not resubmit it; tell a human."
)

// answerOf maps a folded intent to its answer.
func answerOf(i *fsm.Intent, replayed bool) *Answer {
	a := &Answer{IntentID: i.ID, Route: i.Route(), Account: i.Account(), State: i.State, Replayed: replayed,
		Settled: service.Settled(i.State), Attempts: len(i.Attempts), NextCheckAt: i.NextCheckAt.UTC()}
	if i.NextCheckAt.IsZero() {
		a.NextCheckAt = time.Time{}
	}
	switch i.State {
	case fsm.Confirmed:
		a.Outcome, a.Guidance = OutcomeConfirmed, guideConfirmed
		a.NextCheckAt = time.Time{}
		if i.Receipt != nil {
			a.Receipt = receiptOf(i.Receipt)
		}
	case fsm.Rejected:
		a.Outcome, a.Guidance = OutcomeRejected, guideRejected
		if r := i.LastRejection; r != nil {
			a.Rejection = &Rejection{Code: r.Code, StatusCode: r.StatusCode, Retryable: r.Retryable}
			if r.Retryable && i.BudgetLeft() > 0 && i.Recorded.Policy.Retry == events.PolicyAuto {
				a.Guidance = guideRejectedRetryable
			}
		}
	case fsm.AwaitingApproval:
		a.Outcome, a.Guidance = OutcomeAwaitingApproval, guideApproval
		if i.ApprovalFor == "retry" {
			a.Guidance = guideApprovalRetry
		}
	case fsm.ManualAction:
		a.Outcome, a.Guidance, a.Reason = OutcomeNeedsHuman, guideNeedsHuman, string(i.ManualReason)
	case fsm.Failed:
		a.Outcome, a.Guidance, a.Reason = OutcomeFailed, guideFailed, i.Failure
	case fsm.Abandoned:
		a.Outcome, a.Guidance = OutcomeAbandoned, guideAbandoned
		if i.EffectPossible {
			a.Guidance, a.Reason = guideAbandonedEffect, "effect_possible"
		}
	case fsm.Recorded, fsm.ApprovedState:
		a.Outcome, a.Guidance = OutcomeUnknown, guidePending
	case fsm.WriteStarted:
		a.Outcome, a.Guidance = OutcomeUnknown, guideInFlight
	case fsm.Verifying:
		a.Outcome, a.Guidance = OutcomeUnknown, guideVerifying
	default: // unknown, reconciling, in_progress, not_found, retry_claimed
		a.Outcome, a.Guidance = OutcomeUnknown, guideUnknown
	}
	return a
}

func receiptOf(r *events.Receipt) *Receipt {
	out := &Receipt{ExternalID: r.ExternalID, LiveURL: r.LiveURL, PayloadSHA256: r.PayloadSHA256, Source: string(r.Source)}
	if !r.ReadbackAt.IsZero() {
		out.VerifiedAt = r.ReadbackAt.UTC()
	}
	for _, c := range r.Checks {
		out.Checks = append(out.Checks, Check{Name: c.Name, OK: c.OK})
	}
	return out
}
