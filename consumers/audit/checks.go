package audit

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/projector"
)

// The invariants: what each event must respect given the intent's
// history as logged, what an intent must not be at the end (stuck), and
// the projection against the fold.

// checkInvariants checks e against the invariants the fsm also guards,
// on the events as logged (whether or not the fsm accepts them).
func (a *auditor) checkInvariants(t *auditIntent, e events.Event, seq uint64) {
	v := func(kind, detail string) {
		a.violate(Violation{IntentID: t.id, Kind: kind, Version: e.Version, Seq: seq, Detail: detail})
	}
	addID := func(id string, how events.Type) {
		if id == "" || slices.Contains(t.ids, id) {
			return
		}
		t.ids = append(t.ids, id)
		if len(t.ids) > 1 {
			v(ViolationTwoExternalIDs, fmt.Sprintf("%s names external id %q; the intent already has %s",
				how, clipText(id), quoteAll(t.ids[:len(t.ids)-1])))
		}
	}
	body := e.Data
	if ws := events.Started(e); ws != nil {
		body = ws // a WriteStarted, or the first write an IntentStarted starts
	}
	switch d := body.(type) {
	case *events.WriteStartedData:
		n := max(d.Attempt, t.writes+1)
		if n > 1 || t.writes > 0 {
			switch {
			case t.released:
			case t.claim == nil:
				v(ViolationRetryWithoutClaim, fmt.Sprintf("attempt %d (%s) with no claim and no operator release", d.Attempt, e.AttemptID))
			case t.claim.Owner != d.ClaimOwner:
				v(ViolationRetryWithoutClaim, fmt.Sprintf("attempt %d by claim owner %q; the claim was won by %q", d.Attempt, d.ClaimOwner, t.claim.Owner))
			case t.claim.Attempt != d.Attempt:
				v(ViolationRetryWithoutClaim, fmt.Sprintf("attempt %d under a claim for attempt %d", d.Attempt, t.claim.Attempt))
			case e.At.After(t.claim.LeaseUntil):
				v(ViolationRetryWithoutClaim, fmt.Sprintf("attempt %d started at %s, after the claim's lease ended at %s",
					d.Attempt, e.At.UTC().Format(time.RFC3339), t.claim.LeaseUntil.UTC().Format(time.RFC3339)))
			}
		}
		t.claim, t.released = nil, false
		t.writes++
		t.started[e.AttemptID] = true
	case *events.WriteSucceededData, *events.WriteConfirmedData, *events.WriteRejectedData, *events.OutcomeUnknownData:
		if !t.started[e.AttemptID] {
			att := cmp.Or(e.AttemptID, "(none)")
			v(ViolationOutcomeWithoutWriteStarted, fmt.Sprintf("%s for attempt %s, which has no WriteStarted before it", e.Type, att))
		}
		switch d := d.(type) {
		case *events.WriteSucceededData:
			addID(d.ExternalID, e.Type)
			t.pending = d.ExternalID
		case *events.WriteConfirmedData:
			addID(d.Receipt.ExternalID, e.Type)
		}
	case *events.CandidateFoundData:
		t.pending = d.ExternalID
	case *events.ReadbackPassedData:
		addID(t.pending, events.CandidateFound)
		addID(d.Receipt.ExternalID, e.Type)
		t.pending = ""
	case *events.ReadbackFailedData, *events.CheckDeferredData:
		t.pending = ""
	case *events.OperatorConfirmedData:
		addID(d.Receipt.ExternalID, e.Type)
	case *events.RetryClaimedData:
		t.claim = &fsm.Claim{Owner: d.Owner, LeaseUntil: d.LeaseUntil, Attempt: d.Attempt}
	case *events.ClaimExpiredData, *events.ManualActionRequiredData:
		t.claim = nil
	case *events.OperatorReleasedData:
		t.released = true
	}
}

func (a *auditor) finish(ctx context.Context) error {
	ids := slices.Sorted(maps.Keys(a.intents))
	if a.evict.count > 0 {
		a.rep.States[fsm.Confirmed] += a.evict.count
	}
	for _, id := range ids {
		t := a.intents[id]
		a.rep.States[t.fold.State]++
		if t.refused >= 0 && t.moreRefused > 0 {
			a.rep.Violations[t.refused].Detail += fmt.Sprintf(" (%d later event(s) of the intent not folded after it)", t.moreRefused)
		}
		if h, ok := heldFinding(t); ok { // held.go
			a.rep.Held = append(a.rep.Held, h)
			if !h.Folds {
				a.rep.HeldUnfoldable++
			}
		}
		if !t.blocked {
			a.checkStuck(id, t)
		}
	}
	if len(a.excused) > 0 {
		kept := a.rep.Violations[:0]
		for i, v := range a.rep.Violations {
			if !a.excused[i] {
				kept = append(kept, v)
			}
		}
		a.rep.Violations = kept
	}
	if a.cfg.Projection != nil {
		if err := a.checkProjection(ctx, ids); err != nil {
			return err
		}
	}
	slices.SortStableFunc(a.rep.Violations, func(p, q Violation) int {
		return cmp.Or(cmp.Compare(p.IntentID, q.IntentID), cmp.Compare(p.Version, q.Version), cmp.Compare(p.Kind, q.Kind))
	})
	a.rep.Intents = len(a.intents) + a.evict.count
	if len(a.rep.Violations) > 0 {
		a.rep.ByKind = map[string]int{}
		for _, v := range a.rep.Violations {
			a.rep.ByKind[v.Kind]++
		}
	}
	return nil
}

// checkStuck reports an intent that has stayed in its state past its
// deadline, lease or next check (with the configured grace).
func (a *auditor) checkStuck(id string, t *auditIntent) {
	now := a.rep.At
	grace, stuckAfter := a.cfg.Grace, a.cfg.StuckAfter
	stuck := func(detail string) {
		a.violate(Violation{IntentID: id, Kind: ViolationStuck, Version: t.fold.Version, Seq: t.lastApplied, Detail: detail})
	}
	i := t.fold
	switch i.State {
	case fsm.WriteStarted:
		if at := i.LastAttempt(); at != nil && now.After(at.Deadline.Add(grace)) {
			stuck(fmt.Sprintf("write_started: attempt %s deadline %s passed %s ago (grace %s)",
				at.ID, fmtT(at.Deadline), now.Sub(at.Deadline).Round(time.Second), grace))
		}
	case fsm.RetryClaimed:
		if i.Claim != nil && now.After(i.Claim.LeaseUntil.Add(grace)) {
			stuck(fmt.Sprintf("retry_claimed: %q's lease ended %s, %s ago (grace %s)",
				i.Claim.Owner, fmtT(i.Claim.LeaseUntil), now.Sub(i.Claim.LeaseUntil).Round(time.Second), grace))
		}
	case fsm.Reconciling:
		if now.After(i.LeaseUntil.Add(grace)) {
			stuck(fmt.Sprintf("reconciling: %q's lease ended %s, %s ago (grace %s)",
				i.LeaseOwner, fmtT(i.LeaseUntil), now.Sub(i.LeaseUntil).Round(time.Second), grace))
		}
	case fsm.Unknown, fsm.InProgress:
		due, what := i.NextCheckAt, "next check"
		if due.IsZero() {
			due, what = i.UpdatedAt, "last event (no next check)"
		}
		if now.Sub(due) > stuckAfter {
			stuck(fmt.Sprintf("%s: %s at %s is %s old (limit %s)", i.State, what, fmtT(due), now.Sub(due).Round(time.Second), stuckAfter))
		}
	}
}

// checkProjection compares each intent's projected view with the fold of
// its applied events up to the projection's checkpoint (or further, up to
// the view's own last sequence, when the projector moved on during the
// audit).
func (a *auditor) checkProjection(ctx context.Context, ids []string) error {
	p := a.cfg.Projection
	pr := a.rep.Projection
	expected := 0
	for _, id := range ids {
		t := a.intents[id]
		got, err := p.Get(ctx, id)
		if errors.Is(err, projector.ErrNotFound) {
			got, err = nil, nil
		}
		if err != nil {
			return errors.Errorf("audit: projection: %w", err)
		}
		want := t.view(a.cpStart)
		if want != nil {
			expected++
		}
		bound := a.cpStart
		if got != nil && got.LastSeq > bound {
			// The projector moved on during the audit: compare with the log
			// as far as the view goes.
			bound = got.LastSeq
			if bound > a.rep.LastSeq {
				pr.Skipped++
				continue
			}
			want = t.view(bound)
		}
		pr.Compared++
		mismatch := func(detail string) {
			var version uint64
			if want != nil {
				version = want.Version
			}
			a.violate(Violation{IntentID: id, Kind: ViolationProjectionMismatch, Version: version, Detail: detail})
		}
		switch {
		case want == nil && got == nil:
		case want == nil:
			mismatch(fmt.Sprintf("projected (state %s, last seq %d) but no event of it folds at or below seq %d", got.State, got.LastSeq, bound))
		case got == nil:
			mismatch(fmt.Sprintf("missing from the projection (checkpoint %d); the log folds it to %s at seq %d", a.cpStart, want.State, want.LastSeq))
		default:
			if diffs := diffViews(want, got); len(diffs) > 0 {
				mismatch("fields differ: " + strings.Join(diffs, "; "))
			}
		}
	}
	if sc, ok := p.(stateCounter); ok {
		cp, err := p.Checkpoint(ctx)
		if err != nil {
			return errors.Errorf("audit: projection: %w", err)
		}
		if cp == a.cpStart {
			counts, err := sc.CountByState(ctx)
			if err != nil {
				return errors.Errorf("audit: projection: %w", err)
			}
			n := 0
			for _, c := range counts {
				n += c
			}
			if n != expected {
				a.violate(Violation{Kind: ViolationProjectionMismatch,
					Detail: fmt.Sprintf("the projection holds %d intents; the log folds %d at checkpoint %d", n, expected, cp)})
			}
		}
	}
	return nil
}

// view is the reference view of the intent folded from its applied events
// at or below seq bound; nil when none.
func (t *auditIntent) view(bound uint64) *projector.IntentView {
	if t.final != nil {
		if t.final.LastSeq <= bound {
			return t.final
		}
		return nil // only dropped when ≤ the checkpoint, so not reached
	}
	n := sort.Search(len(t.seqs), func(k int) bool { return t.seqs[k] > bound })
	if n == 0 {
		return nil
	}
	v, err := projector.FoldView(t.hist[:n])
	if err != nil {
		return nil // cannot happen: every kept event folded
	}
	v.LastSeq = t.seqs[n-1]
	v.Held = projector.HeldView(t.hold != nil && t.holdSeq <= bound, v.State, t.hist[:n])
	return v
}

// diffViews names every field of IntentView whose value differs, as
// "json_name: projection X, log Y".
func diffViews(want, got *projector.IntentView) []string {
	var out []string
	wv, gv := reflect.ValueOf(*want), reflect.ValueOf(*got)
	typ := wv.Type()
	for k := 0; k < typ.NumField(); k++ {
		f := typ.Field(k)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		name = cmp.Or(name, f.Name)
		wj, err1 := json.Marshal(wv.Field(k).Interface())
		gj, err2 := json.Marshal(gv.Field(k).Interface())
		if err1 != nil || err2 != nil {
			if !reflect.DeepEqual(wv.Field(k).Interface(), gv.Field(k).Interface()) {
				out = append(out, name)
			}
			continue
		}
		if string(wj) != string(gj) {
			out = append(out, fmt.Sprintf("%s: projection %s, log %s", name, clipText(redact(string(gj))), clipText(redact(string(wj)))))
		}
	}
	return out
}

// classifyUnreadable is the decode code of bytes Decode refused, and a
// safe reason.
func classifyUnreadable(raw []byte, err error) (code, reason string) {
	de := events.Unreadable(raw, err)
	return de.Code(), redact(de.Error())
}
