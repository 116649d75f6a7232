package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/consumers/audit"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
)

// newWriterID names this process on every message it appends
// (ledger.StoreConfig.Writer): its pid and a random part, so that no two
// processes, on one host or across restarts, share one.
func newWriterID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "p" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// WriterClash is one place where two processes appended to a log that
// only one may write at a time (an embedded store: one data directory,
// one process): Writer wrote again at Seq after Other had written.
type WriterClash struct {
	Writer, Other string
	Seq           uint64
}

// WriterReport is what reading a log for its writers found: where two
// writers' appends interleave, and the events the views knew at a
// sequence that the log now holds another event at (acknowledged events
// a second writer's server overwrote).
type WriterReport struct {
	Writers  []string // in the order they first wrote
	Clashes  []WriterClash
	NClashes int
	Replaced []projector.KnownEvent // the views' events no longer at their sequence
	NReplace int
	Intents  []string // the intents of Replaced, all of them
}

// Found reports whether a second writer left a trace.
func (r *WriterReport) Found() bool { return r != nil && (r.NClashes > 0 || r.NReplace > 0) }

func (r *WriterReport) Error() string {
	var b strings.Builder
	b.WriteString("two processes wrote this log at once (the data directory's lock was bypassed)")
	for _, c := range r.Clashes {
		fmt.Fprintf(&b, "; writer %s appended at sequence %d after writer %s had", c.Writer, c.Seq, c.Other)
	}
	if r.NClashes > len(r.Clashes) {
		fmt.Fprintf(&b, "; … %d more", r.NClashes-len(r.Clashes))
	}
	if r.NReplace > 0 {
		fmt.Fprintf(&b, "; %d acknowledged event(s) the views applied are no longer on the log at their sequence, of %d intent(s):", r.NReplace, len(r.Intents))
		writeEvents(&b, r.Replaced, r.NReplace)
	}
	return b.String()
}

// writerCheck reads a log's messages in order (visit) for a WriterReport.
// Interleavings at or below through were found and accepted before.
type writerCheck struct {
	ctx     context.Context
	known   audit.KnownEvents // nil: no views to compare with
	through uint64
	rep     WriterReport
	cur     string
	ended   map[string]bool
	intents map[string]bool
	pending []seen // messages not yet compared with the views
	// err is the first failed read of the views: the comparison is then
	// incomplete.
	err error
}

type seen struct {
	seq      uint64
	intentID string
	version  uint64
}

func newWriterCheck(ctx context.Context, known audit.KnownEvents, through uint64) *writerCheck {
	return &writerCheck{ctx: ctx, known: known, through: through, ended: map[string]bool{}, intents: map[string]bool{}}
}

// visit takes one message (its sequence, subject and headers).
func (w *writerCheck) visit(seq uint64, subject string, h nats.Header) {
	if wr := ledger.WriterOf(h.Get(ledger.AppendIDHeader)); wr != "" && wr != w.cur {
		if w.ended[wr] && seq > w.through {
			w.rep.NClashes++
			if len(w.rep.Clashes) < maxListed {
				w.rep.Clashes = append(w.rep.Clashes, WriterClash{Writer: wr, Other: w.cur, Seq: seq})
			}
		}
		if !w.ended[wr] && !slices.Contains(w.rep.Writers, wr) {
			w.rep.Writers = append(w.rep.Writers, wr)
		}
		if w.cur != "" {
			w.ended[w.cur] = true
		}
		w.cur = wr
	}
	if w.known == nil {
		return
	}
	_, id, err := events.ParseSubject(subject)
	_, version, verr := events.ParseMsgID(h.Get(jetstream.MsgIDHeader))
	if err == nil && verr == nil {
		w.pending = append(w.pending, seen{seq: seq, intentID: id, version: version})
	}
	if len(w.pending) >= 4096 {
		w.compare()
	}
}

// compare checks the pending messages against the events the views
// applied at their sequences.
func (w *writerCheck) compare() {
	if w.known == nil || len(w.pending) == 0 {
		return
	}
	at := make(map[uint64]seen, len(w.pending))
	for _, s := range w.pending {
		at[s.seq] = s
	}
	from, to := w.pending[0].seq, w.pending[len(w.pending)-1].seq
	w.pending = w.pending[:0]
	err := w.known.EventsBetween(w.ctx, from, to, func(e projector.KnownEvent) error {
		s, ok := at[e.Seq]
		if !ok || (s.intentID == e.IntentID && s.version == e.Version) {
			return nil // a hole is the loss checks' to name
		}
		w.rep.NReplace++
		if len(w.rep.Replaced) < maxListed {
			w.rep.Replaced = append(w.rep.Replaced, e)
		}
		w.intents[e.IntentID] = true
		return nil
	})
	if err != nil && w.err == nil {
		w.err = errors.Errorf("compare with the views: %w", err)
	}
}

// report ends the read.
func (w *writerCheck) report() *WriterReport {
	w.compare()
	for id := range w.intents {
		w.rep.Intents = append(w.rep.Intents, id)
	}
	sort.Strings(w.rep.Intents)
	return &w.rep
}

// Violations are the report as the audit's violations: second_writer for
// each clash, event_replaced for each acknowledged event overwritten.
func (r *WriterReport) Violations() []audit.Violation {
	var out []audit.Violation
	for _, c := range r.Clashes {
		out = append(out, audit.Violation{Kind: "second_writer", Seq: c.Seq,
			Detail: fmt.Sprintf("writer %s appended after writer %s had: two processes wrote this embedded store at once (the data directory's lock was bypassed)", c.Writer, c.Other)})
	}
	for _, e := range r.Replaced {
		out = append(out, audit.Violation{Kind: "event_replaced", IntentID: e.IntentID, Version: e.Version, Seq: e.Seq,
			Detail: fmt.Sprintf("v%d %s, applied by the views at this sequence, is no longer on the log: another event took its place (a second writer)", e.Version, e.Type)})
	}
	return out
}

// AuditWriters adds to rep what reading the whole log (headers only) of an
// embedded store finds of a second writer's traces (WriterReport), compared
// with the views at views when they exist; traces an operator accepted, per
// the high-water mark at highWaterPath, aside. settle audit --data runs it.
func (o *Offline) AuditWriters(ctx context.Context, rep *audit.AuditReport, views, highWaterPath string) error {
	hw, err := ReadHighWater(highWaterPath)
	if err != nil {
		return err
	}
	_, _, w, err := scanForWriters(ctx, o.JS, rep.Stream, views, hw.WritersThrough)
	if err != nil || !w.Found() {
		return err
	}
	if rep.ByKind == nil {
		rep.ByKind = map[string]int{}
	}
	for _, v := range w.Violations() {
		rep.Violations = append(rep.Violations, v)
		rep.ByKind[v.Kind]++
	}
	return nil
}
