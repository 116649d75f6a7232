package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/consumers/audit"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/internal/durable"
	"github.com/settle-dev/settle/internal/errkind"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
)

// The high-water mark: what settle knows the log held, kept outside the
// log (DIR/highwater.json, next to the views). The stream never deletes,
// so its sequences run 1 … LastSeq without a hole, and LastSeq only grows.
// A stream that starts below its high-water mark, or below the views'
// checkpoint, or with a hole, has lost acknowledged events: serve refuses
// to start (ErrLogDamaged) and names them until an operator accepts the
// loss (--accept-log-loss).

// HighWater is the content of highwater.json.
type HighWater struct {
	Stream  string    `json:"stream"`
	LastSeq uint64    `json:"last_seq"`
	Msgs    uint64    `json:"msgs"`
	Updated time.Time `json:"updated"`
	// Accepted are sequence ranges an operator accepted as lost
	// (--accept-log-loss): not reported again.
	Accepted [][2]uint64 `json:"accepted,omitempty"`
	// Held are the intents that lost events in an accepted loss: handed
	// to a human, never written for again (consumers/reconcile/hold.go).
	Held []string `json:"held,omitempty"`
	// WritersThrough: a second writer's traces at or below this sequence
	// were accepted (--accept-log-loss) and are not reported again.
	WritersThrough uint64 `json:"writers_through,omitempty"`
}

// ReadHighWater reads the mark at path (a missing file is an empty mark).
func ReadHighWater(path string) (HighWater, error) {
	var hw HighWater
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return hw, nil
	}
	if err != nil {
		return hw, errors.Errorf("high-water mark %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &hw); err != nil {
		return hw, errors.WithHint(errors.Errorf("high-water mark %s: %w", path, err),
			"the file is settle's record of the log's length; if it was damaged, remove it (the views' checkpoint is still checked)")
	}
	return hw, nil
}

// writeHighWater replaces the file atomically and durably (temporary
// file, fsync, rename, fsync of the directory; a directory that cannot be
// synced is not an error here: the mark is rewritten every second).
func writeHighWater(path string, hw HighWater) error {
	b, err := json.Marshal(hw)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(path, append(b, '\n'), dataFilePerm); err != nil && !errors.Is(err, durable.ErrDirNotSynced) {
		return errors.Errorf("high-water mark: %w", err)
	}
	return nil
}

// heldNote is the hand-off message of an intent held after an accepted loss.
const heldNote = "the log lost some of this intent's events (a damaged store; the loss was accepted with --accept-log-loss): what it shows may be older than what happened — check the external system before resolving"

// logLoss is what the check found missing from the stream.
type logLoss struct {
	Stream string
	// Gone: the stream itself is missing.
	Gone                     bool
	FirstSeq, LastSeq, Msgs  uint64
	HighWater, ViewsCheckpnt uint64
	// Ranges are the lost sequences, inclusive.
	Ranges [][2]uint64
	// Lost are the events the views knew at lost sequences (at most
	// maxListed), LostTotal all of them, Intents the intents they belong to.
	Lost      []projector.KnownEvent
	LostTotal int
	Intents   []string
	// scanned: found by reading the whole log (the stream's state did
	// not show it).
	scanned bool
}

// maxListed bounds the events (and clashes) a report lists.
const maxListed = 20

// writeEvents lists evs, the first of total events, in b.
func writeEvents(b *strings.Builder, evs []projector.KnownEvent, total int) {
	for _, e := range evs {
		fmt.Fprintf(b, " %s v%d %s (seq %d);", e.IntentID, e.Version, e.Type, e.Seq)
	}
	if total > len(evs) {
		fmt.Fprintf(b, " … %d more", total-len(evs))
	}
}

func (l *logLoss) count() uint64 {
	var n uint64
	for _, r := range l.Ranges {
		n += r[1] - r[0] + 1
	}
	return n
}

func (l *logLoss) Error() string {
	var b strings.Builder
	if l.scanned {
		fmt.Fprintf(&b, "stream %s lost %d event(s) its state still counts (found by reading sequences 1..%d)", l.Stream, l.count(), l.LastSeq)
	} else if l.Gone {
		fmt.Fprintf(&b, "stream %s is gone, but settle recorded it at sequence %d", l.Stream, max(l.HighWater, l.ViewsCheckpnt))
	} else {
		fmt.Fprintf(&b, "stream %s lost %d event(s): it holds %d message(s), sequences %d..%d; the high-water mark says %d, the views' checkpoint %d",
			l.Stream, l.count(), l.Msgs, l.FirstSeq, l.LastSeq, l.HighWater, l.ViewsCheckpnt)
	}
	var rs []string
	for _, r := range l.Ranges {
		if r[0] == r[1] {
			rs = append(rs, fmt.Sprint(r[0]))
		} else {
			rs = append(rs, fmt.Sprintf("%d..%d", r[0], r[1]))
		}
	}
	if len(rs) > 0 {
		fmt.Fprintf(&b, "; lost sequences %s", strings.Join(rs, ", "))
	}
	if l.LostTotal > 0 {
		fmt.Fprintf(&b, "; the views knew %d of the lost events, of %d intent(s):", l.LostTotal, len(l.Intents))
		writeEvents(&b, l.Lost, l.LostTotal)
	} else if !l.Gone {
		b.WriteString("; the views do not know what they were")
	}
	return b.String()
}

// checkLog compares the stream with the high-water mark and the views.
// It returns nil when nothing is missing (or the stream and the records
// are both new), and refuses a stream of another log format
// (ledger.CheckFormat) before reading anything of it.
func checkLog(ctx context.Context, js jetstream.JetStream, stream string, hw HighWater, viewsPath string) (*logLoss, error) {
	l := &logLoss{Stream: stream}
	if hw.Stream == "" || hw.Stream == stream {
		l.HighWater = hw.LastSeq
	}
	var known *projector.Known
	if k, err := projector.OpenKnown(ctx, viewsPath); err == nil {
		known = k
		defer k.Close()
		if l.ViewsCheckpnt, err = k.Checkpoint(ctx); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, errors.Errorf("check the log: %w", err)
	}
	// The two API requests are bounded whatever ctx's deadline (as an
	// attempt to open the store): a lost answer is asked again by
	// untilAnswered, not waited on until ctx ends.
	actx, cancel := context.WithTimeout(ctx, storeAttempt)
	defer cancel()
	st, err := js.Stream(actx, stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if l.HighWater == 0 && l.ViewsCheckpnt == 0 {
			return nil, nil // a new log
		}
		l.Gone = true
		l.Ranges = [][2]uint64{{1, max(l.HighWater, l.ViewsCheckpnt)}}
	case err != nil:
		return nil, errors.Errorf("check the log: stream %s: %w", stream, err)
	default:
		// A stream of another log format is not read at all.
		if err := ledger.CheckFormat(st); err != nil {
			return nil, err
		}
		info, err := st.Info(actx, jetstream.WithDeletedDetails(true))
		if err != nil {
			return nil, errors.Errorf("check the log: stream %s: %w", stream, err)
		}
		s := info.State
		l.FirstSeq, l.LastSeq, l.Msgs = s.FirstSeq, s.LastSeq, s.Msgs
		l.Ranges = audit.SubtractRanges(lostRanges(s.FirstSeq, s.LastSeq, s.Msgs, s.Deleted, max(l.HighWater, l.ViewsCheckpnt)), hw.Accepted)
	}
	if len(l.Ranges) == 0 {
		return nil, nil
	}
	if known != nil {
		if err := l.nameLost(ctx, known); err != nil {
			return nil, errors.Errorf("check the log: %w", err)
		}
	}
	return l, nil
}

// lostRanges lists the sequences a never-deleting stream should hold and
// does not: before its first, its holes, and after its last up to want.
func lostRanges(first, last, msgs uint64, deleted []uint64, want uint64) [][2]uint64 {
	var out [][2]uint64
	if last > 0 && first > 1 {
		out = append(out, [2]uint64{1, min(first-1, last)})
	}
	if msgs > 0 && last >= first && msgs < last-first+1 {
		ds := slices.Sorted(slices.Values(deleted))
		for _, d := range ds {
			if n := len(out); n > 0 && out[n-1][1]+1 == d {
				out[n-1][1] = d
				continue
			}
			out = append(out, [2]uint64{d, d})
		}
		if len(ds) == 0 {
			// The server did not list them: name the span.
			out = append(out, [2]uint64{first, last})
		}
	}
	if want > last {
		out = append(out, [2]uint64{last + 1, want})
	}
	return out
}

// logGuard is the log guardLog checks, and how.
type logGuard struct {
	js     jetstream.JetStream
	stream string
	dd     *DataDir
	// accept: the operator accepts a loss (--accept-log-loss).
	accept bool
	// single: only this process writes the log (an embedded store): a
	// second writer's traces are then a loss too (writers.go).
	single bool
	logger *slog.Logger
}

// guardLog runs the check before anything reads or writes the log. On a
// loss it refuses (an error wrapping ledger.ErrLogDamaged) unless the
// operator accepts it (acceptLoss); a scan that fails while a loss is
// being accepted refuses the start: what would be accepted is not known.
// It returns the intents held after accepted losses (this one and earlier
// ones), each with the message of its hand-off.
func guardLog(ctx context.Context, g logGuard) (map[string]string, error) {
	js, stream, dd, accept, logger := g.js, g.stream, g.dd, g.accept, g.logger
	hw, err := ReadHighWater(dd.HighWater())
	if err != nil {
		return nil, err
	}
	held := func(ids []string) map[string]string {
		m := map[string]string{}
		for _, id := range ids {
			m[id] = heldNote
		}
		return m
	}
	var loss *logLoss
	err = untilAnswered(ctx, logger, "check the log", stream, func() error {
		var err error
		loss, err = checkLog(ctx, js, stream, hw, dd.Views())
		return err
	})
	if err != nil {
		return nil, err
	}
	var writers *WriterReport
	if accept {
		// Accept everything missing, including what only reading the
		// whole log finds (verify.go), and a second writer's traces on
		// an embedded store (writers.go).
		missing, last, w, err := scanForWriters(ctx, js, stream, dd.Views(), hw.WritersThrough)
		if err != nil {
			return nil, errors.Errorf("accept log loss: read the whole log: %w", err)
		}
		if g.single && w.Found() {
			writers = w
		}
		if missing = audit.SubtractRanges(missing, hw.Accepted); len(missing) > 0 {
			if loss == nil {
				loss = describeLoss(ctx, stream, missing, last, dd.Views())
			} else {
				loss.Ranges = merge(append(loss.Ranges, missing...))
			}
		}
		if loss == nil && writers != nil {
			loss = &logLoss{Stream: stream, LastSeq: last}
		}
	}
	if loss == nil {
		return held(hw.Held), nil
	}
	if !accept {
		return nil, errors.WithHint(errkind.Wrap(ledger.ErrLogDamaged, loss),
			"nothing was started. The log itself lost acknowledged events (a damaged or replaced store): settle must not act as if they never happened. "+
				"See them all: settle audit --data DIR. Restore the store from a replica or a backup if you can; "+
				"otherwise start with --accept-log-loss (the views are kept aside, the intents that remain are swept and settled, the lost ones listed here must be checked by hand)")
	}
	ids, err := acceptLoss(ctx, g, hw, loss, writers)
	if err != nil {
		return nil, err
	}
	return held(ids), nil
}

// acceptLoss records an accepted loss (and a second writer's traces): the
// hold goes on the log first, while the views still say what each intent
// lost (a marker on every held intent's subject, which every process on
// the stream sees before it writes: ledger.MarkHeld); then the high-water
// mark, and the views are moved aside. It returns every intent held
// since.
func acceptLoss(ctx context.Context, g logGuard, hw HighWater, loss *logLoss, writers *WriterReport) ([]string, error) {
	js, stream, dd, logger := g.js, g.stream, g.dd, g.logger
	if len(loss.Ranges) > 0 {
		logger.Error("the log lost events; starting anyway (--accept-log-loss): the intents listed must be checked by hand", "loss", loss.Error())
	}
	through := hw.WritersThrough
	accepted := merge(append(hw.Accepted, loss.Ranges...))
	ids := append(append([]string(nil), hw.Held...), loss.Intents...)
	if writers != nil {
		logger.Error("two processes wrote this log at once; starting anyway (--accept-log-loss): the intents listed must be checked by hand", "writers", writers.Error())
		ids, through = append(ids, writers.Intents...), loss.LastSeq
	}
	if loss.Gone {
		logger.Warn("the stream is gone: the held intents are held by this process only (highwater.json), not marked on the log")
	} else if err := markHeld(ctx, js, stream, dd.Views(), accepted, logger); err != nil {
		return nil, errors.Errorf("accept log loss: %w", err)
	}
	aside, err := MoveViewsAside(dd.Views())
	if err != nil {
		return nil, errors.Errorf("accept log loss: %w", err)
	}
	logger.Warn("views moved aside; they are rebuilt from what the log holds", "old_views", aside)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if err := writeHighWater(dd.HighWater(), HighWater{Stream: loss.Stream, LastSeq: loss.LastSeq, Msgs: loss.Msgs, Updated: time.Now().UTC(),
		Accepted: accepted, Held: ids, WritersThrough: through}); err != nil {
		return nil, err
	}
	if n := len(ids) - len(hw.Held); n > 0 {
		logger.Warn("intents that lost events are held: each is handed to a human (manual_action, log_events_lost) and never written for again", "intents", n)
	}
	return ids, nil
}

// keepHighWater records the stream's length every interval (and once when
// ctx ends). A stream seen shorter than its mark while serving blocks the
// appends (ledger.ErrLogDamaged) with a loud error.
func keepHighWater(ctx context.Context, st jetstream.Stream, path string, store *ledger.Store, logger *slog.Logger, interval time.Duration) {
	k := newHighWaterKeeper(st, path, store, logger)
	check := func(parent context.Context) {
		cctx, cancel := context.WithTimeout(parent, 5*time.Second)
		defer cancel()
		k.check(cctx)
	}
	every(ctx, interval, func() { check(ctx) })
	check(context.Background())
}

// shortChecks is how many checks in a row must find the stream below its
// mark, with no message at or after the mark, before the appends are
// blocked: on a replicated stream a leader elected after a partition
// answers with the entries it has applied, which can trail what the old
// leader had acknowledged for a few seconds.
const shortChecks = 10

// highWaterKeeper is keepHighWater's state between checks.
type highWaterKeeper struct {
	st          jetstream.Stream
	path, name  string
	store       *ledger.Store
	logger      *slog.Logger
	hw          HighWater
	regressions int
}

func newHighWaterKeeper(st jetstream.Stream, path string, store *ledger.Store, logger *slog.Logger) *highWaterKeeper {
	hw, _ := ReadHighWater(path)
	name := st.CachedInfo().Config.Name
	if hw.Stream != name {
		hw = HighWater{Stream: name}
	}
	return &highWaterKeeper{st: st, path: path, name: name, store: store, logger: logger, hw: hw}
}

// check reads the stream's length once: a longer stream raises the mark;
// one below it, shortChecks times in a row and without a message at or
// after the mark (asked of the stream's leader), blocks the appends.
func (k *highWaterKeeper) check(ctx context.Context) {
	info, err := k.st.Info(ctx)
	if err != nil {
		return // unreachable now; the appends' health reports it
	}
	s := info.State
	switch {
	case s.LastSeq < k.hw.LastSeq:
		if more, err := ledger.MessageAfter(ctx, k.st, k.hw.LastSeq-1, ""); err != nil || more {
			return // not known to be short: the answer trails the log
		}
		k.regressions++
		if k.regressions == shortChecks {
			err := errors.Errorf("%w: stream %s is at sequence %d, below its high-water mark %d", ledger.ErrLogDamaged, k.name, s.LastSeq, k.hw.LastSeq)
			k.store.Block("log", err)
			k.logger.Error("the log lost events while serving: appends are refused until an operator acts (restart settle to see what was lost)", "err", err.Error())
		}
	case s.LastSeq > k.hw.LastSeq:
		k.regressions = 0
		k.hw.LastSeq, k.hw.Msgs, k.hw.Updated = s.LastSeq, s.Msgs, time.Now().UTC()
		if err := writeHighWater(k.path, k.hw); err != nil {
			k.logger.Warn("high-water mark not written", "err", err)
		}
	default:
		k.regressions = 0
	}
}

// markHeld writes the hold marker of every intent the views know lost
// events in the accepted ranges (ledger.MarkHeld; one already held is
// left as it is). An intent the views cannot place on a route is only
// held by this process (highwater.json) and named in a warning.
func markHeld(ctx context.Context, js jetstream.JetStream, stream, viewsPath string, accepted [][2]uint64, logger *slog.Logger) error {
	k, err := projector.OpenKnown(ctx, viewsPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil // nothing names the lost events: the loss is known by its sequences only
	}
	if err != nil {
		return err
	}
	defer k.Close()
	type lost struct {
		route          string
		versions, seqs []uint64
	}
	byIntent := map[string]*lost{}
	var ids []string
	for _, r := range accepted {
		err := k.EventsBetween(ctx, r[0], r[1], func(e projector.KnownEvent) error {
			l := byIntent[e.IntentID]
			if l == nil {
				l = &lost{route: e.Route}
				byIntent[e.IntentID] = l
				ids = append(ids, e.IntentID)
			}
			l.versions, l.seqs = append(l.versions, e.Version), append(l.seqs, e.Seq)
			return nil
		})
		if err != nil {
			return err
		}
	}
	slices.Sort(ids)
	now := time.Now().UTC()
	var marked, unplaced, failed int
	for _, id := range ids {
		l := byIntent[id]
		if l.route == "" {
			unplaced++
			logger.Warn("a held intent's route is not known: only this process holds it", "intent", id)
			continue
		}
		ok, err := ledger.MarkHeld(ctx, js, stream, l.route, events.NewHold(id, l.versions, l.seqs, accepted, now, "settle serve --accept-log-loss", heldNote+"."))
		switch {
		case err != nil && ctx.Err() != nil:
			return err
		case err != nil:
			// A subject the server cannot read or append to (a corrupt
			// record it still counts as the subject's last): no process
			// can write there either; this one holds it (highwater.json).
			failed++
			logger.Warn("a held intent's marker could not be written: only this process holds it", "intent", id, "err", err)
		case ok:
			marked++
		}
	}
	if len(ids) > 0 {
		logger.Warn("held intents marked on the log: no process writes for them again",
			"marked", marked, "held_already", len(ids)-marked-unplaced-failed, "route_unknown", unplaced, "not_marked", failed)
	}
	return nil
}
