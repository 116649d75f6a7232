package embedded

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"
)

type lines struct {
	mu sync.Mutex
	b  strings.Builder
	n  int
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A store the server could not write is refused at once, naming the
// directory and the cause (before: the server started without
// JetStream, and the caller learned only that it was "not ready after
// 30s").
func TestStartRefusesAnUnwritableStoreAtOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jetstream")
	if err := os.WriteFile(dir, []byte("a file where the store should be"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := Start(Config{Dir: dir, Port: -1})
	if !errors.Is(err, ErrStoreNotWritable) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Start on a file: %v", err)
	}
	if errors.FlattenHints(err) == "" {
		t.Fatalf("no hint: %v", err)
	}
	t.Logf("refused in %s: %v", time.Since(start).Round(time.Millisecond), err)
}

// The server's own warnings and errors reach the Logger and Watch: here a
// stream whose stored metadata was damaged while the server was down.
func TestServerErrorsReachTheLogger(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(Config{Dir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	s.Stop()
	metas, _ := filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", "T", "meta.inf"))
	if len(metas) != 1 {
		t.Fatalf("meta files: %v", metas)
	}
	if err := os.WriteFile(metas[0], []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out lines
	var watched []string
	var mu sync.Mutex
	s, err = Start(Config{Dir: dir, Port: -1, Logger: slog.New(slog.NewTextHandler(&out, nil)),
		Watch: func(level slog.Level, msg string) { mu.Lock(); watched = append(watched, msg); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(out.String(), "nats-server:") || len(watched) == 0 {
		t.Fatalf("the server's complaint did not reach the logger\nlog: %s\nwatched: %v", out.String(), watched)
	}
	t.Logf("logged: %s", strings.TrimSpace(out.String()))
}
