package producer

import (
	"context"

	"github.com/cockroachdb/errors"
)

// loadPrepared reads the intent a prepared request maps to: its scoped id
// (tenant, route, account, request id), or else an intent recorded under
// the request's "intent/v1" id (before ids were scoped per account) for
// the same account — that intent is this request's, and recording a new
// one would write twice. A v1 intent of another account is another
// intent under scoped ids, so it is not returned.
func (p *Producer) loadPrepared(ctx context.Context, pr *prepared) (*History, error) {
	h, err := p.store.Load(ctx, pr.rec.Route, pr.intentID)
	if !errors.Is(err, ErrNotFound) || pr.legacyID == pr.intentID {
		return h, err
	}
	lh, lerr := p.store.Load(ctx, pr.rec.Route, pr.legacyID)
	if lerr != nil {
		if errors.Is(lerr, ErrNotFound) {
			return nil, err
		}
		return nil, lerr
	}
	i, ferr := lh.Fold()
	if ferr != nil {
		return nil, ferr
	}
	if i.Recorded.Account != pr.rec.Account {
		return nil, err
	}
	return lh, nil
}
