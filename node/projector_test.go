package node

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
)

// A projector whose checkpoint does not move while the stream holds more
// is restarted once ProjectorStall has passed (its Run's context cancelled
// with errProjectorStalled), and /readyz says so; one that moves is not;
// a lag beyond ProjectorMaxLag for ProjectorStall fails /readyz even while
// the views move.
func TestAStalledProjectorIsRestartedAndReported(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ProjectorStall, cfg.ProjectorMaxLag = 10*time.Second, 100
	s := newSupervisor(slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now, cfg)
	var cause error
	arm := func() {
		s.mu.Lock()
		s.proj.restart = func(err error) { cause = err }
		s.mu.Unlock()
	}
	arm()
	t0 := time.Now()
	s.observeProjector(50, 60, t0)
	s.observeProjector(55, 60, t0.Add(5*time.Second)) // moving
	s.observeProjector(55, 60, t0.Add(14*time.Second))
	if cause != nil {
		t.Fatalf("restarted after 9 s without progress: %v", cause)
	}
	s.observeProjector(55, 60, t0.Add(15*time.Second))
	if !errors.Is(cause, errProjectorStalled) || !strings.Contains(cause.Error(), "checkpoint 55, stream at 60") {
		t.Fatalf("not restarted after 10 s without progress: %v", cause)
	}
	// Caught up, with nothing more on the stream: never a stall.
	cause = nil
	arm()
	s.observeProjector(60, 60, t0.Add(16*time.Second))
	s.observeProjector(60, 60, t0.Add(60*time.Second))
	if cause != nil {
		t.Fatalf("restarted while caught up: %v", cause)
	}
	// Moving, but 500 events behind for longer than the stall bound.
	s.observeProjector(100, 600, t0.Add(61*time.Second))
	s.mu.Lock()
	s.proj.lagSince = time.Now().Add(-11 * time.Second)
	s.proj.movedAt = time.Now()
	s.mu.Unlock()
	if err := s.projectorCheck(context.Background()); err == nil || !strings.Contains(err.Error(), "500 events behind the stream (bound 100)") {
		t.Fatalf("a lag beyond the bound: %v", err)
	}
	s.mu.Lock()
	s.proj.lagSince, s.proj.movedAt = time.Time{}, time.Now().Add(-11*time.Second)
	s.mu.Unlock()
	if err := s.projectorCheck(context.Background()); !errors.Is(err, errProjectorStalled) {
		t.Fatalf("a stall: %v", err)
	}
}
