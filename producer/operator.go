package producer

import (
	"context"
	"fmt"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// ErrNotAllowed: the operator action is not legal in the intent's state.
var ErrNotAllowed = errors.New("action not allowed in this state")

// Operator decisions are events too: who, when, why. Each is one CAS
// append checked against the fsm first.

// Approve approves the pending first write or retry of an intent.
func (p *Producer) Approve(ctx context.Context, route, intentID, operator, reason string) (*fsm.Intent, error) {
	return p.operate(ctx, route, intentID, &events.ApprovedData{Operator: operator, Reason: reason})
}

// Abandon records that the intent will not be written. Cancellation is not
// rollback: a write that already happened stays on the external system,
// and an audit reports an abandoned intent whose effect is later found.
func (p *Producer) Abandon(ctx context.Context, route, intentID, by, reason string) (*fsm.Intent, error) {
	h, i, err := p.load(ctx, route, intentID)
	if err != nil {
		return nil, err
	}
	possible := false
	for _, a := range i.Attempts {
		possible = possible || a.Outcome != events.WriteRejected
	}
	return i, p.appendOperator(ctx, h, i, &events.AbandonedData{By: by, Reason: reason, EffectPossible: possible})
}

// ResolveConfirmed closes a manual action with the external object the
// operator proved.
func (p *Producer) ResolveConfirmed(ctx context.Context, route, intentID, operator, reason, externalID, liveURL string) (*fsm.Intent, error) {
	h, i, err := p.load(ctx, route, intentID)
	if err != nil {
		return nil, err
	}
	d := &events.OperatorConfirmedData{Operator: operator, Reason: reason, Receipt: events.Receipt{
		ExternalID: externalID, LiveURL: liveURL, PayloadSHA256: i.Recorded.PayloadSHA256, Source: "operator",
		IdempotencyKey: i.Recorded.IdempotencyKey, RequestID: i.Recorded.RequestID}}
	return i, p.appendOperator(ctx, h, i, d)
}

// ResolveReleased closes a manual action as proven not executed: the
// intent returns to recorded and may be written again (same key).
func (p *Producer) ResolveReleased(ctx context.Context, route, intentID, operator, reason string) (*fsm.Intent, error) {
	return p.operate(ctx, route, intentID, &events.OperatorReleasedData{Operator: operator, Reason: reason})
}

func (p *Producer) load(ctx context.Context, route, intentID string) (*ledger.History, *fsm.Intent, error) {
	h, err := p.store.Load(ctx, route, intentID)
	if err != nil {
		return nil, nil, err
	}
	i, err := h.Fold()
	if err != nil {
		return nil, nil, err
	}
	return h, i, nil
}

func (p *Producer) operate(ctx context.Context, route, intentID string, d events.Data) (*fsm.Intent, error) {
	h, i, err := p.load(ctx, route, intentID)
	if err != nil {
		return nil, err
	}
	return i, p.appendOperator(ctx, h, i, d)
}

func (p *Producer) appendOperator(ctx context.Context, h *ledger.History, i *fsm.Intent, d events.Data) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if !i.Can(d.EventType()) {
		return fmt.Errorf("%w: %s in state %s", ErrNotAllowed, d.EventType(), i.State)
	}
	if err := p.appendTo(ctx, h, i, "", d); err != nil {
		if errors.Is(err, fsm.ErrGuard) || errors.Is(err, fsm.ErrIllegalTransition) {
			return fmt.Errorf("%w: %w", ErrNotAllowed, err)
		}
		return err
	}
	return nil
}
