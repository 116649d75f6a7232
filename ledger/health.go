package ledger

import (
	"context"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
)

// ErrLogUnavailable: appends are refused before they are published,
// because the log is known to be unable to take them (its disk is full,
// this process's clock is off, the log lost events). Nothing was
// appended. The error wraps the reason.
var ErrLogUnavailable = errors.New("log unavailable")

// writeHealth is the store's view of its write path: a gate that refuses
// appends at once while a known fault lasts (Block), and what the last
// appends did (for readiness and metrics).
type writeHealth struct {
	mu       sync.Mutex
	blocks   map[string]error // by source: "disk", "clock", "log"
	lastOK   time.Time
	lastFail time.Time
	failErr  error
	failures uint64
}

// Block makes every append fail at once with ErrLogUnavailable wrapping
// reason, until Unblock(source). Several sources (a full disk, a clock
// offset) block independently.
func (s *Store) Block(source string, reason error) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	if s.health.blocks == nil {
		s.health.blocks = map[string]error{}
	}
	s.health.blocks[source] = reason
}

// Unblock lifts the block of source.
func (s *Store) Unblock(source string) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	delete(s.health.blocks, source)
}

// Blocked returns the reason appends are refused (nil: they are not).
func (s *Store) Blocked() error {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	var errs []error
	for _, src := range []string{"log", "verify", "disk", "clock"} {
		if err, ok := s.health.blocks[src]; ok {
			errs = append(errs, err)
		}
	}
	for src, err := range s.health.blocks {
		if src != "log" && src != "verify" && src != "disk" && src != "clock" {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.Join(errs...)
}

// AppendHealth says how the last appends went: failing is true when the
// most recent append that ended (conflicts aside) failed, within the last
// `recent`, and none succeeded since; err is that failure. Failures counts
// failed appends since the store was opened.
func (s *Store) AppendHealth(recent time.Duration) (failing bool, since time.Time, err error, failures uint64) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	h := &s.health
	if !h.lastFail.IsZero() && h.lastFail.After(h.lastOK) && time.Since(h.lastFail) < recent {
		return true, h.lastFail, h.failErr, h.failures
	}
	return false, time.Time{}, nil, h.failures
}

// observe records how an append ended. A conflict (another writer won
// the CAS) and a caller's own cancellation say nothing of the log.
func (s *Store) observe(ctx context.Context, err error) {
	if err != nil && (errors.Is(err, ErrConflict) || errors.Is(err, ErrLogUnavailable) || ctx.Err() != nil) {
		return
	}
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	if err == nil {
		s.health.lastOK = time.Now()
		return
	}
	s.health.lastFail = time.Now()
	s.health.failErr = err
	s.health.failures++
}

// Reasons a store's appends are blocked (wrapped by the errors given to
// Block, matched by the API to tell callers why in fixed words).
var (
	// ErrDiskFull: the log's disk is full; appends resume when space
	// returns.
	ErrDiskFull = errors.New("the log's disk is full")
	// ErrClockOffset: this process's clock differs from the log's by more
	// than the allowance; it must not decide anything by time.
	ErrClockOffset = errors.New("this process's clock is off")
	// ErrLogDamaged: the log lost events this process knows of.
	ErrLogDamaged = errors.New("the log lost events")
	// ErrLogVerifying: the log is being read whole after a start, to make
	// sure it lost nothing, before anything is written.
	ErrLogVerifying = errors.New("the log is being verified")
)

// ErrNotConnected: the client has no connection to NATS (a partition, a
// server restarting): nothing was published.
var ErrNotConnected = errors.New("not connected to NATS")

// connectWait is how long a read or an append waits for a lost
// connection to come back before failing: a reconnect after a server
// restart takes about this long; a partition lasts longer, and callers
// then learn at once instead of after every publish timed out.
const connectWait = 2 * time.Second

// connected waits up to connectWait for the client to be connected.
func (s *Store) connected(ctx context.Context) error {
	nc := s.js.Conn()
	if nc == nil || nc.IsConnected() {
		return nil
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(connectWait)
	for !nc.IsConnected() {
		if nc.IsClosed() || time.Now().After(deadline) {
			return ErrNotConnected
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
