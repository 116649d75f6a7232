package testharness

import (
	"bytes"
	"sync"
)

// SyncBuffer is a log or output sink safe for concurrent writers, so a test
// can scan everything a component printed (for secrets, say).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
