package node

import (
	"context"
	"io"
	"sort"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/consumers/audit"
	"github.com/settle-dev/settle/internal/errkind"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
)

// scanLog reads the whole stream, headers only, and returns the
// sequences it should hold and does not: holes, and the end of what it
// delivers short of the LastSeq its state claims (a damaged block file
// can keep a state that still counts its lost messages; only reading
// finds them). visit, when set, gets every message in order (writers.go).
func scanLog(ctx context.Context, js jetstream.JetStream, stream string, visit func(seq uint64, subject string, h nats.Header)) (missing [][2]uint64, last uint64, err error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, 0, errors.Errorf("scan the log: stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, 0, errors.Errorf("scan the log: stream %s: %w", stream, err)
	}
	last = info.State.LastSeq
	if info.State.Msgs == 0 {
		if last > 0 {
			missing = append(missing, [2]uint64{1, last})
		}
		return missing, last, nil
	}
	// The ledger's Reader knows where the stream ends: on a replicated
	// stream it asks the leader instead of trusting a peer's copy that
	// may still be catching up (which would name events the log has as
	// lost); a message past the state's LastSeq is never reached.
	r, err := ledger.OpenReader(ctx, js, ledger.ReaderConfig{
		Stream: stream, Subject: ">", HeadersOnly: true, Batch: 4096, Until: last, NamePrefix: "settle_scan",
	})
	if err != nil {
		return nil, 0, errors.Errorf("scan the log: %w", err)
	}
	defer r.Close()
	var prev uint64
	for {
		m, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, errors.Errorf("scan the log: %w", err)
		}
		if visit != nil {
			visit(m.Seq, m.Subject, m.Header)
		}
		if m.Seq > prev+1 {
			missing = append(missing, [2]uint64{prev + 1, m.Seq - 1})
		}
		prev = max(prev, m.Seq)
	}
	if prev < last {
		missing = append(missing, [2]uint64{prev + 1, last})
	}
	return missing, last, nil
}

// merge unions ranges.
func merge(rs [][2]uint64) [][2]uint64 {
	if len(rs) == 0 {
		return nil
	}
	rs = append([][2]uint64(nil), rs...)
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	out := [][2]uint64{rs[0]}
	for _, r := range rs[1:] {
		if n := len(out); r[0] <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// describeLoss names the lost ranges, and the events the views knew in
// them, as a logLoss.
func describeLoss(ctx context.Context, stream string, ranges [][2]uint64, last uint64, viewsPath string) *logLoss {
	l := &logLoss{Stream: stream, LastSeq: last, Ranges: ranges, scanned: true}
	k, err := projector.OpenKnown(ctx, viewsPath)
	if err != nil {
		return l
	}
	defer k.Close()
	l.ViewsCheckpnt, _ = k.Checkpoint(ctx)
	_ = l.nameLost(ctx, k) // what the views cannot say stays unnamed
	return l
}

// nameLost lists the events known (the views) in l's ranges and the
// intents they belong to.
func (l *logLoss) nameLost(ctx context.Context, known audit.KnownEvents) error {
	seen := map[string]bool{}
	for _, r := range l.Ranges {
		err := known.EventsBetween(ctx, r[0], r[1], func(e projector.KnownEvent) error {
			l.LostTotal++
			if len(l.Lost) < maxListed {
				l.Lost = append(l.Lost, e)
			}
			if !seen[e.IntentID] {
				seen[e.IntentID] = true
				l.Intents = append(l.Intents, e.IntentID)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	sort.Strings(l.Intents)
	return nil
}

// verifyLog reads the whole log when serve starts, before anything
// writes: a loss the start-up check could not see (a damaged record inside
// a block whose state still counts it) is found here. Meanwhile appends
// are refused (ledger.ErrLogVerifying: 503, /readyz not ready) and the
// reconcilers wait (verified). A loss blocks every append
// (ledger.ErrLogDamaged) with a loud error naming what was lost, until
// an operator restarts with --accept-log-loss; the reconcilers never
// start. Ranges already accepted are ignored.
func (s *supervisor) verifyLog(ctx context.Context, js jetstream.JetStream, stream string, dd *DataDir, store *ledger.Store) {
	logger := s.logger
	hw, _ := ReadHighWater(dd.HighWater())
	start := time.Now()
	var missing [][2]uint64
	var last uint64
	var writers *WriterReport
	for {
		var err error
		if s.cfg.NATSURL != "" {
			missing, last, err = scanLog(ctx, js, stream, nil)
		} else { // an embedded store: one writer at a time (writers.go)
			missing, last, writers, err = scanForWriters(ctx, js, stream, dd.Views(), hw.WritersThrough)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		logger.Warn("reading the whole log to verify it failed; trying again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
	missing = audit.SubtractRanges(missing, hw.Accepted)
	if writers.Found() {
		store.Block("log", errkind.Wrap(ledger.ErrLogDamaged, writers))
		store.Unblock("verify")
		logger.Error("TWO WRITERS: appends are refused and the reconcilers do not start until an operator acts. See them with settle audit --data DIR (serve stopped); "+
			"check the intents named by hand, then restart with --accept-log-loss", "writers", writers.Error())
		return
	}
	if len(missing) == 0 {
		store.Unblock("verify")
		close(s.verified)
		logger.Info("the whole log was read: no event is missing", "last_seq", last, "took", time.Since(start).Round(time.Millisecond).String())
		return
	}
	loss := describeLoss(ctx, stream, missing, last, dd.Views())
	err := errkind.Wrap(ledger.ErrLogDamaged, loss)
	store.Block("log", err)
	store.Unblock("verify")
	logger.Error("THE LOG LOST EVENTS: appends are refused and the reconcilers do not start until an operator acts. See them all with settle audit --data DIR (serve stopped); "+
		"restore the store from a replica or backup, or restart with --accept-log-loss", "loss", loss.Error())
}

// scanForWriters is scanLog with the check for a second writer's traces
// (writers.go) against the views at viewsPath.
func scanForWriters(ctx context.Context, js jetstream.JetStream, stream, viewsPath string, through uint64) ([][2]uint64, uint64, *WriterReport, error) {
	var known audit.KnownEvents
	if k, err := projector.OpenKnown(ctx, viewsPath); err == nil {
		defer k.Close()
		known = k
	}
	wc := newWriterCheck(ctx, known, through)
	missing, last, err := scanLog(ctx, js, stream, wc.visit)
	if err != nil {
		return nil, 0, nil, err
	}
	rep := wc.report()
	if wc.err != nil {
		return nil, 0, nil, wc.err
	}
	return missing, last, rep, nil
}
