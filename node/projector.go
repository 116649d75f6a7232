package node

import (
	"context"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/projector"
)

// errProjectorStalled: the projector's checkpoint did not move while the
// stream held more (a consumer blocked behind a damaged record, say).
var errProjectorStalled = errors.New("projector stalled")

// projWatch is what the supervisor last saw of the projector against the
// stream.
type projWatch struct {
	checkpoint, last uint64
	movedAt          time.Time // the checkpoint last moved, or the views were caught up
	lagSince         time.Time // the lag has exceeded ProjectorMaxLag since (zero: it does not)
	restart          context.CancelCauseFunc
}

// runProjector runs the projector until ctx ends. A Run that fails is
// restarted with a growing pause (1s … 30s); a Run that makes no progress
// for ProjectorStall while the stream holds more is restarted at once
// (its consumer is made anew at the checkpoint). Either way /readyz says
// so until the checkpoint moves again.
func (s *supervisor) runProjector(ctx context.Context, st jetstream.Stream, proj *projector.Projector) {
	var watch sync.WaitGroup
	watch.Go(func() { s.watchProjector(ctx, st, proj) })
	defer watch.Wait()
	backoff := time.Second
	for ctx.Err() == nil {
		rctx, cancel := context.WithCancelCause(ctx)
		s.mu.Lock()
		s.proj.restart = cancel
		s.mu.Unlock()
		err := proj.Run(rctx)
		cause := context.Cause(rctx)
		cancel(nil)
		if ctx.Err() != nil || errors.Is(err, projector.ErrClosed) {
			return
		}
		pause := backoff
		switch {
		case errors.Is(cause, errProjectorStalled):
			err, pause = cause, time.Second
		case err == nil:
			err = errors.New("projector stopped")
		default:
			backoff = min(2*backoff, 30*time.Second)
		}
		s.projRestarts.Inc()
		s.mu.Lock()
		if s.projErr == nil {
			s.projSince = time.Now()
		}
		s.projErr = err
		s.mu.Unlock()
		s.logger.Error("projector failed; restarting it", "err", err, "in", pause.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		// A restarted Run that applies a batch is healthy again: watch the
		// checkpoint move (or the projector catch up with nothing to do).
		go s.clearProjectorWhenMoving(ctx, proj, proj.Stats().Checkpoint)
	}
}

// watchProjector compares the projector's checkpoint with the stream's
// last sequence every second: a checkpoint that has not moved for
// ProjectorStall while the stream holds more restarts the projector's
// Run; a lag beyond ProjectorMaxLag is remembered for /readyz.
func (s *supervisor) watchProjector(ctx context.Context, st jetstream.Stream, proj *projector.Projector) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	s.mu.Lock()
	s.proj.movedAt = time.Now()
	s.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		info, err := st.Info(ictx)
		cancel()
		if err != nil {
			continue // the stream does not answer: the log's checks say so
		}
		s.observeProjector(proj.Stats().Checkpoint, info.State.LastSeq, time.Now())
	}
}

// observeProjector takes one reading of the checkpoint and the stream's
// last sequence at now.
func (s *supervisor) observeProjector(cp, last uint64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &s.proj
	if cp != w.checkpoint || cp >= last {
		w.movedAt = now
	}
	w.checkpoint, w.last = cp, last
	if last <= cp || last-cp <= s.cfg.ProjectorMaxLag {
		w.lagSince = time.Time{}
	} else if w.lagSince.IsZero() {
		w.lagSince = now
	}
	if last > cp && now.Sub(w.movedAt) >= s.cfg.ProjectorStall && w.restart != nil {
		err := errors.Wrapf(errProjectorStalled, "checkpoint %d, stream at %d, no progress for %s", cp, last, now.Sub(w.movedAt).Round(time.Second))
		s.logger.Error("the projector makes no progress while the stream holds more: restarting it", "checkpoint", cp, "last_seq", last,
			"for", now.Sub(w.movedAt).Round(time.Second).String())
		w.restart(err)
		w.restart = nil
		w.movedAt = now // the restarted Run gets its own ProjectorStall
	}
}

func (s *supervisor) clearProjectorWhenMoving(ctx context.Context, proj *projector.Projector, from uint64) {
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := proj.CatchUp(cctx)
		cancel()
		if err == nil || proj.Stats().Checkpoint > from {
			s.mu.Lock()
			if s.projErr != nil {
				s.logger.Info("projector running again", "checkpoint", proj.Stats().Checkpoint, "down_for", time.Since(s.projSince).Round(time.Second).String())
			}
			s.projErr = nil
			s.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// projectorCheck fails while the projector is down (failed or restarted
// after a stall, until its checkpoint moves), while it makes no progress
// behind the stream, or while its lag has exceeded ProjectorMaxLag for
// ProjectorStall.
func (s *supervisor) projectorCheck(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, now := s.proj, time.Now()
	switch {
	case s.projErr != nil:
		return errors.Errorf("failed %s ago: %w", now.Sub(s.projSince).Round(time.Second), s.projErr)
	case w.last > w.checkpoint && !w.movedAt.IsZero() && now.Sub(w.movedAt) >= s.cfg.ProjectorStall:
		return errors.Errorf("%w: the views are at sequence %d, the stream at %d, and have not moved for %s",
			errProjectorStalled, w.checkpoint, w.last, now.Sub(w.movedAt).Round(time.Second))
	case !w.lagSince.IsZero() && now.Sub(w.lagSince) >= s.cfg.ProjectorStall:
		return errors.Newf("lagging: the views are %d events behind the stream (bound %d) for %s",
			w.last-w.checkpoint, s.cfg.ProjectorMaxLag, now.Sub(w.lagSince).Round(time.Second))
	}
	return nil
}
