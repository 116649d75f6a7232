package producer

import (
	"context"

	"github.com/settle-dev/settle/ledger"
)

// loadPrepared reads the intent a prepared request maps to: its scoped id
// (tenant, route, account, request id), or else an intent recorded under
// the request's "intent/v1" id (before ids were scoped per account) for
// the same account — that intent is this request's, and recording a new
// one would write twice. A v1 intent of another account is another
// intent under scoped ids, so it is not returned.
//
// It returns (nil, nil) when neither exists.
func (p *Producer) loadPrepared(ctx context.Context, pr *prepared) (*ledger.History, error) {
	h, err := p.store.LoadIfAny(ctx, pr.rec.Route, pr.intentID)
	if err != nil || h != nil || pr.legacyID == pr.intentID {
		return h, err
	}
	lh, err := p.store.LoadIfAny(ctx, pr.rec.Route, pr.legacyID)
	if err != nil || lh == nil {
		return nil, err
	}
	i, err := lh.Fold()
	if err != nil {
		return nil, err
	}
	if i.Recorded.Account != pr.rec.Account {
		return nil, nil
	}
	return lh, nil
}
