package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/projector"
)

// Damage is never silent. The stream never deletes (deny_delete,
// deny_purge, no limits), so its sequences run 1 … LastSeq without a hole
// and every intent's versions run 1 … n. The audit checks both, and,
// given what settle recorded outside the stream (the views' checkpoint
// and the events they applied, the high-water mark), names every
// acknowledged event the log no longer holds.

// Violation kinds of a log that lost events.
const (
	// ViolationVersionGap: an intent's versions skip; the events between
	// are gone from the log.
	ViolationVersionGap = "version_gap"
	// ViolationStreamGap: sequences are missing from the stream, and
	// nothing settle recorded says what they held.
	ViolationStreamGap = "stream_gap"
	// ViolationEventsLost: events the views applied (so acknowledged) are
	// gone from the log; one violation per intent.
	ViolationEventsLost = "events_lost"
	// ViolationStreamBehind: the stream's messages end before its state's
	// last sequence (a cut block file), the views' checkpoint or the
	// high-water mark.
	ViolationStreamBehind = "stream_behind"
)

// KnownEvents is settle's record of the log outside it: the views'
// checkpoint and every event they applied (*projector.Known).
type KnownEvents interface {
	Checkpoint(ctx context.Context) (uint64, error)
	EventsBetween(ctx context.Context, from, to uint64, fn func(projector.KnownEvent) error) error
}

var _ KnownEvents = (*projector.Known)(nil)

// lossState is the audit's record of the sequences it met.
type lossState struct {
	prevSeq uint64
	gaps    [][2]uint64
}

// noteSeq records a hole before seq (messages arrive in stream order).
func (a *auditor) noteSeq(seq uint64) {
	if seq > a.loss.prevSeq+1 {
		a.loss.gaps = append(a.loss.gaps, [2]uint64{a.loss.prevSeq + 1, seq - 1})
	}
	if seq > a.loss.prevSeq {
		a.loss.prevSeq = seq
	}
}

// checkVersion reports a gap in t's versions before the event of version
// v at seq; the fold then refuses the event, which is counted under this
// violation.
func (a *auditor) checkVersion(t *auditIntent, v, seq uint64) {
	have := max(t.seen, t.fold.Version)
	if v > have+1 && !t.blocked && a.accepted(t.seenSeq+1, seq-1) > 0 {
		// The missing events were in a loss an operator accepted: the
		// intent's history is broken, and known to be.
		t.blocked, t.acceptedGap = true, true
	}
	if v > have+1 && !t.blocked {
		missing := fmt.Sprintf("version %d", have+1)
		if v-1 > have+1 {
			missing = fmt.Sprintf("versions %d..%d", have+1, v-1)
		}
		idx := a.violate(Violation{IntentID: t.id, Kind: ViolationVersionGap, Version: v, Seq: seq,
			Detail: fmt.Sprintf("%s missing before this event: gone from the log", missing)})
		if t.refused < 0 {
			t.refused = idx
		}
	}
	if v > t.seen {
		t.seen, t.seenSeq = v, seq
	}
}

// accepted counts the sequences of [from, to] inside accepted ranges.
func (a *auditor) accepted(from, to uint64) uint64 {
	var n uint64
	for _, r := range a.cfg.Accepted {
		lo, hi := max(from, r[0]), min(to, r[1])
		if lo <= hi {
			n += hi - lo + 1
		}
	}
	return n
}

// subtractAccepted splits r into its parts outside the accepted ranges.
func (a *auditor) subtractAccepted(r [2]uint64) [][2]uint64 {
	return SubtractRanges([][2]uint64{r}, a.cfg.Accepted)
}

// SubtractRanges removes the cut ranges from rs (both inclusive sequence
// ranges); what is left of each range of rs, in order.
func SubtractRanges(rs, cut [][2]uint64) [][2]uint64 {
	out := rs
	for _, c := range cut {
		var next [][2]uint64
		for _, r := range out {
			if c[1] < r[0] || c[0] > r[1] {
				next = append(next, r)
				continue
			}
			if r[0] < c[0] {
				next = append(next, [2]uint64{r[0], c[0] - 1})
			}
			if r[1] > c[1] {
				next = append(next, [2]uint64{c[1] + 1, r[1]})
			}
		}
		out = next
	}
	return out
}

// checkLoss runs after the replay: holes met, and a stream whose
// messages end before its state's last sequence (a cut block file), the
// views' checkpoint or the high-water mark; with Known, every lost event
// it knows is named by intent and version. Each lost sequence is counted
// once, whichever of these says it is gone.
func (a *auditor) checkLoss(ctx context.Context) error {
	end := a.rep.LastSeq             // where the stream's state says it ends
	last := min(a.loss.prevSeq, end) // where its messages end
	var cp uint64
	if a.cfg.Known != nil {
		var err error
		if cp, err = a.cfg.Known.Checkpoint(ctx); err != nil {
			return errors.Errorf("audit: views: %w", err)
		}
	}
	var open [][2]uint64
	for _, r := range a.loss.gaps {
		a.rep.AcceptedLoss += a.accepted(r[0], r[1])
		open = append(open, a.subtractAccepted(r)...)
	}
	if want := max(cp, a.cfg.HighWater, end); want > last {
		open = append(open, a.streamBehind(last, end, cp, want)...)
	}
	for _, r := range open {
		if err := a.lostRange(ctx, r, last); err != nil {
			return err
		}
	}
	return nil
}

// streamBehind reports the acknowledged events past the stream's last
// message (last) that no operator accepted as lost, and returns their
// ranges.
func (a *auditor) streamBehind(last, end, cp, want uint64) [][2]uint64 {
	behind := [2]uint64{last + 1, want}
	a.rep.AcceptedLoss += a.accepted(behind[0], behind[1])
	rest := a.subtractAccepted(behind)
	if len(rest) == 0 {
		return nil
	}
	var by []string
	if end > last {
		by = append(by, fmt.Sprintf("its state says %d", end))
	}
	if cp > last {
		by = append(by, fmt.Sprintf("the views' checkpoint is %d", cp))
	}
	if a.cfg.HighWater > last {
		by = append(by, fmt.Sprintf("the high-water mark is %d", a.cfg.HighWater))
	}
	n := uint64(0)
	for _, r := range rest {
		n += r[1] - r[0] + 1
	}
	a.violate(Violation{Kind: ViolationStreamBehind, Seq: last,
		Detail: fmt.Sprintf("the stream's messages end at sequence %d but %s: %d acknowledged event(s) are gone", last, strings.Join(by, " and "), n)})
	return rest
}

// lostRange names the events the views applied in the lost range r, by
// intent, or reports the range as a gap when nothing says what it held.
func (a *auditor) lostRange(ctx context.Context, r [2]uint64, last uint64) error {
	byIntent := map[string][]projector.KnownEvent{}
	if a.cfg.Known != nil {
		err := a.cfg.Known.EventsBetween(ctx, r[0], r[1], func(e projector.KnownEvent) error {
			byIntent[e.IntentID] = append(byIntent[e.IntentID], e)
			return nil
		})
		if err != nil {
			return errors.Errorf("audit: views: %w", err)
		}
	}
	if len(byIntent) == 0 {
		if r[1] > last {
			return nil // reported as stream_behind; nothing more is known
		}
		a.violate(Violation{Kind: ViolationStreamGap, Seq: r[0],
			Detail: fmt.Sprintf("sequences %d..%d are missing from the stream (it never deletes); nothing settle recorded says what they held", r[0], r[1])})
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(byIntent)) {
		l := byIntent[id]
		var vs []string
		for _, e := range l {
			vs = append(vs, fmt.Sprintf("v%d %s", e.Version, e.Type))
		}
		a.violate(Violation{IntentID: id, Kind: ViolationEventsLost, Version: l[0].Version, Seq: l[0].Seq,
			Detail: fmt.Sprintf("%s, applied by the views at sequences from %d, gone from the log", strings.Join(vs, ", "), l[0].Seq)})
	}
	return nil
}
