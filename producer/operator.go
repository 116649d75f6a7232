package producer

import (
	"context"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/internal/errkind"
	"github.com/settle-dev/settle/internal/telemetry"
	"github.com/settle-dev/settle/ledger"
)

// ErrNotAllowed: the operator action is not legal in the intent's state.
var ErrNotAllowed = errors.New("action not allowed in this state")

// Load reads an intent by its id alone, whatever its route, and folds it
// once: what a read or an operator action starts from. It returns an
// error matching ledger.ErrNotFound for an intent that does not exist.
func (p *Producer) Load(ctx context.Context, intentID string) (*ledger.History, *fsm.Intent, error) {
	h, err := p.store.LoadByID(ctx, intentID)
	if errors.Is(err, ledger.ErrNotFound) {
		if herr := p.heldUnrecorded(intentID); herr != nil {
			return nil, nil, herr
		}
	}
	if err != nil {
		return nil, nil, p.unfoldable(intentID, nil, err)
	}
	i, err := h.Fold()
	if err != nil {
		return nil, nil, p.unfoldable(intentID, h, err)
	}
	return h, i, nil
}

// Operator decisions are events too: who, when, why. Each is one CAS
// append on the intent as the caller loaded it (h, folded into i),
// checked against the fsm first; on success h and i hold the new event,
// so the caller answers from them without reading the log again. An
// intent that moved since it was loaded is ledger.ErrConflict: reload and
// decide again.

// Approve approves the pending first write or retry of an intent.
func (p *Producer) Approve(ctx context.Context, h *ledger.History, i *fsm.Intent, operator, reason string) error {
	return p.appendOperator(ctx, h, i, &events.ApprovedData{Operator: operator, Reason: reason})
}

// Abandon records that the intent will not be written. Cancellation is not
// rollback: a write that already happened stays on the external system,
// and an audit reports an abandoned intent whose effect is later found.
// effect_possible is the decider's rule (fsm.Intent.AnyEffectPossible): a
// "key already used" rejection is no proof that nothing executed.
func (p *Producer) Abandon(ctx context.Context, h *ledger.History, i *fsm.Intent, by, reason string) error {
	return p.appendOperator(ctx, h, i, &events.AbandonedData{By: by, Reason: reason, EffectPossible: i.AnyEffectPossible()})
}

// ResolveConfirmed closes a manual action with the external object the
// operator proved.
func (p *Producer) ResolveConfirmed(ctx context.Context, h *ledger.History, i *fsm.Intent, operator, reason, externalID, liveURL string) error {
	d := &events.OperatorConfirmedData{Operator: operator, Reason: reason, Receipt: events.Receipt{
		ExternalID: externalID, LiveURL: liveURL, PayloadSHA256: i.Recorded.PayloadSHA256, Source: events.SourceOperator,
		IdempotencyKey: i.Recorded.IdempotencyKey, RequestID: i.Recorded.RequestID}}
	return p.appendOperator(ctx, h, i, d)
}

// ResolveReleased closes a manual action as proven not executed: the
// intent returns to recorded and may be written again (same key).
func (p *Producer) ResolveReleased(ctx context.Context, h *ledger.History, i *fsm.Intent, operator, reason string) error {
	return p.appendOperator(ctx, h, i, &events.OperatorReleasedData{Operator: operator, Reason: reason})
}

// appendOperator appends an operator's decision, as the span
// settle.operator (its action the event's type).
func (p *Producer) appendOperator(ctx context.Context, h *ledger.History, i *fsm.Intent, d events.Data) (err error) {
	ctx, span := telemetry.Start(ctx, "settle.operator")
	if span.On() {
		span.Intent(i.ID, h.Route)
		span.Str(telemetry.AttrAction, string(d.EventType()))
		defer func() { span.State(string(i.State)); span.End(err) }()
	}
	if err := d.Validate(); err != nil {
		return errkind.Wrap(ErrInvalidRequest, err)
	}
	if !i.Can(d.EventType()) {
		return errors.Errorf("%w: %s in state %s", ErrNotAllowed, d.EventType(), i.State)
	}
	if err := p.w.appendTo(ctx, h, i, "", d); err != nil {
		if errors.Is(err, fsm.ErrGuard) || errors.Is(err, fsm.ErrIllegalTransition) {
			return errkind.Wrap(ErrNotAllowed, err)
		}
		return err
	}
	return nil
}
