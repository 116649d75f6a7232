package producer

import (
	"context"

	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// loadPrepared reads and folds the intent a prepared request maps to: its
// scoped id (tenant, route, account, request id), or else an intent
// recorded under the request's "intent/v1" id (before ids were scoped per
// account) for the same account — that intent is this request's, and
// recording a new one would write twice. A v1 intent of another account
// is another intent under scoped ids, so it is not returned. A stream
// created since ids were scoped holds no v1 intent
// (ledger.Store.ScopedIDsOnly): there a new intent costs one read.
//
// It returns (nil, nil, nil) when neither exists.
func (p *Producer) loadPrepared(ctx context.Context, pr *prepared) (*ledger.History, *fsm.Intent, error) {
	h, err := p.store.LoadIfAny(ctx, pr.rec.Route, pr.intentID)
	if err == nil && h == nil && pr.legacyID != pr.intentID && !p.store.ScopedIDsOnly() {
		h, err = p.store.LoadIfAny(ctx, pr.rec.Route, pr.legacyID)
	}
	if err != nil {
		return nil, nil, p.unfoldable(pr.intentID, nil, err) // hold.go
	}
	if h == nil {
		return nil, nil, nil
	}
	i, err := h.Fold()
	if err != nil {
		return nil, nil, p.unfoldable(pr.intentID, h, err) // hold.go
	}
	if i.ID == pr.legacyID && i.Recorded.Account != pr.rec.Account {
		return nil, nil, nil
	}
	return h, i, nil
}
