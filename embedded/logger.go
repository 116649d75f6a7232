package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/settle-dev/settle/internal/errkind"
)

// serverLog carries the embedded server's own log lines to a slog.Logger:
// errors and warnings (a store it cannot write, a damaged block file, a
// full disk that makes it stop JetStream) at their level, notices at
// debug, debug and trace lines nowhere. Each error and warning is also
// given to Config.Watch, and the last error is kept for Start's message.
type serverLog struct {
	l     *slog.Logger
	watch func(level slog.Level, msg string)

	mu      sync.Mutex
	lastErr string
	fatal   string // the first fatal error (the server gave up on something)
}

var _ server.Logger = (*serverLog)(nil)

// quiet are warnings about settle's own configuration of the server, not
// news to an operator (the in-process users' passwords are generated).
var quiet = []string{"Plaintext passwords detected"}

// refused are a client's requests the server refused by its permissions:
// a reader asking for what it may not do (settle's own user may do
// everything), which is the reader's mistake, not the server's error.
var refused = []string{"Publish Violation", "Subscription Violation"}

func (s *serverLog) emit(level slog.Level, format string, v []any) {
	msg := fmt.Sprintf(format, v...)
	for _, q := range quiet {
		if strings.Contains(msg, q) {
			level = slog.LevelDebug
		}
	}
	for _, r := range refused {
		if strings.Contains(msg, r) && level > slog.LevelWarn {
			level = slog.LevelWarn
		}
	}
	if level >= slog.LevelWarn {
		if level >= slog.LevelError {
			s.mu.Lock()
			s.lastErr = msg
			s.mu.Unlock()
		}
		if s.watch != nil {
			s.watch(level, msg)
		}
	}
	if s.l != nil && s.l.Enabled(context.Background(), level) {
		s.l.Log(context.Background(), level, "nats-server: "+msg, "component", "embedded-nats")
	}
}

func (s *serverLog) Noticef(format string, v ...any) { s.emit(slog.LevelDebug, format, v) }
func (s *serverLog) Warnf(format string, v ...any)   { s.emit(slog.LevelWarn, format, v) }
func (s *serverLog) Fatalf(format string, v ...any) {
	s.mu.Lock()
	if s.fatal == "" {
		s.fatal = fmt.Sprintf(format, v...)
	}
	s.mu.Unlock()
	s.emit(slog.LevelError, format, v)
}
func (s *serverLog) Errorf(format string, v ...any) { s.emit(slog.LevelError, format, v) }
func (s *serverLog) Debugf(string, ...any)          {}
func (s *serverLog) Tracef(string, ...any)          {}

// errs are the last error and the first fatal error the server logged.
func (s *serverLog) errs() (last, fatal string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr, s.fatal
}

// ErrStoreNotWritable: the JetStream store directory cannot be created or
// written (permissions, a read-only or full file system).
var ErrStoreNotWritable = errors.New("store directory not writable")

// checkStoreDir creates dir when missing and proves it writable by
// writing, syncing and removing a small file, so that a store the server
// could not use is reported at once and by its cause, not as a server
// that never became ready.
func checkStoreDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errors.WithHint(errors.Wrapf(errkind.Wrap(ErrStoreNotWritable, err), "embedded: %s", dir),
			"give settle a data directory it owns (it needs to create and write files there)")
	}
	f, err := os.CreateTemp(dir, ".settle-write-check-*")
	if err == nil {
		name := f.Name()
		_, err = f.Write([]byte("settle"))
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		os.Remove(name)
	}
	if err != nil {
		hint := "check the directory's owner and mode, and the free space of its file system"
		if errors.Is(err, os.ErrPermission) {
			hint = "the directory is not writable by this user: fix its owner or mode, or give another --data"
		} else if strings.Contains(err.Error(), "no space left") {
			hint = "the file system is full: free space, then start again"
		}
		return errors.WithHint(errors.Wrapf(errkind.Wrap(ErrStoreNotWritable, err), "embedded: %s", filepath.Clean(dir)), hint)
	}
	return nil
}
