package reconcile

import (
	"context"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
)

// Report is a dry run of reconciliation: what the search found and what
// the checks say, with nothing appended and nothing written.
type Report struct {
	IntentID   string
	State      fsm.State
	Strategy   string
	WindowFrom time.Time
	WindowTo   time.Time
	Candidates []events.CandidateRef
	Checks     []events.Check
	// Would is the event a real step would append next.
	Would events.Type
	Note  string
}

// DryRun reports what reconciling the intent would find, appending
// nothing and writing nothing (only read-only calls are made).
func (r *Reconciler) DryRun(ctx context.Context, route, intentID string) (*Report, error) {
	h, err := r.store.Load(ctx, route, intentID)
	if err != nil {
		return nil, errors.Errorf("dry run %s: %w", intentID, err)
	}
	i, err := h.Fold()
	if err != nil {
		return nil, errors.Errorf("dry run %s: %w", intentID, err)
	}
	rt, ok := r.routes[route]
	if !ok {
		return nil, errors.Errorf("dry run %s: %w: %q", intentID, producer.ErrUnknownRoute, route)
	}
	caps := i.Caps()
	strategy := fsm.StrategyOf(caps)
	rep := &Report{IntentID: intentID, State: i.State, Strategy: strategy}
	rep.WindowFrom, rep.WindowTo = fsm.Window(i)
	if strategy == fsm.StrategyNone {
		rep.Note = "the route has no status query and no search: would hand off"
		rep.Would = events.ManualActionRequired
		return rep, nil
	}
	sim := i.Clone()
	d, err := r.reconcile(ctx, sim, rt, caps, strategy, nil)
	if err != nil {
		return nil, err
	}
	rep.Would = d.EventType()
	switch v := d.(type) {
	case *events.CandidateFoundData:
		rep.Candidates = v.Candidates
		sim.ExternalID, sim.LiveURL = v.ExternalID, v.LiveURL
		vd, err := r.verify(ctx, sim, rt, caps)
		if err != nil {
			return nil, err
		}
		switch c := vd.(type) {
		case *events.ReadbackPassedData:
			rep.Checks = c.Receipt.Checks
			rep.Note = "one exact match; readback passes: would confirm"
		case *events.ReadbackFailedData:
			rep.Checks = c.Checks
			rep.Note = "one exact match; readback fails: would hand off"
		default:
			rep.Note = "one exact match; readback would give " + string(vd.EventType())
		}
	case *events.ManualActionRequiredData:
		rep.Candidates = v.Evidence.Candidates
		rep.Note = v.Message
	case *events.CheckDeferredData:
		rep.Candidates = v.Candidates
		rep.Note = "no conclusive answer yet (" + string(v.Reason) + "): would wait"
	case *events.SearchWindowElapsedData:
		rep.Candidates = v.Candidates
		rep.Note = "no exact match and the window closed: would be not_found"
	default:
		rep.Note = strategy + " answered " + string(d.EventType())
	}
	return rep, nil
}
