package fakeapi

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFakeServerScaffolding(t *testing.T) {
	var f fakeServer[Fault]
	f.start("", nil)
	if !strings.HasPrefix(f.Token(), "fake_") || len(f.Token()) != len("fake_")+32 {
		t.Fatalf("random token %q", f.Token())
	}
	if !strings.HasPrefix(f.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q", f.URL())
	}

	if got := f.popFault(); got != (Fault{}) {
		t.Fatalf("empty queue popped %v", got)
	}
	f.queueFaults(Status(503), Delay(time.Second))
	f.queueFaults(CommitThenDrop())
	if f.PendingFaults() != 3 {
		t.Fatalf("pending %d", f.PendingFaults())
	}
	for _, want := range []Fault{Status(503), Delay(time.Second), CommitThenDrop(), {}} {
		if got := f.popFault(); got != want {
			t.Fatalf("popped %v, want %v", got, want)
		}
	}

	r, _ := http.NewRequest(http.MethodGet, f.URL(), nil)
	if f.authorized(r) {
		t.Fatal("no Authorization header accepted")
	}
	r.Header.Set("Authorization", "bearer "+f.Token())
	if !f.authorized(r) {
		t.Fatal("case-insensitive scheme refused")
	}
	r.Header.Set("Authorization", "Bearer "+f.Token()+"x")
	if f.authorized(r) {
		t.Fatal("wrong token accepted")
	}

	// sleep ends at once when the server closes; Close is idempotent.
	done := make(chan struct{})
	go func() { f.sleep(time.Hour, nil); close(done) }()
	f.Close()
	f.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("sleep outlived Close")
	}
}

func TestFakeServerKeepsAGivenToken(t *testing.T) {
	var f fakeServer[bookingFaultSpec]
	f.start("tok", nil)
	defer f.Close()
	if f.Token() != "tok" {
		t.Fatalf("token %q", f.Token())
	}
	if got := f.popFault(); got.kind != FaultNone || got.name != "" {
		t.Fatalf("empty queue popped %+v", got)
	}
}

// WithSocialPageSize sets the list page size.
func WithSocialPageSize(n int) SocialOption { return func(c *SocialConfig) { c.PageSize = n } }

// WithOmitBodyInList makes list items omit body and assets.
func WithOmitBodyInList() SocialOption { return func(c *SocialConfig) { c.OmitBodyInList = true } }

// WithVisibilityDelay delays the visibility of every created post.
func WithVisibilityDelay(d time.Duration) SocialOption {
	return func(c *SocialConfig) { c.DefaultVisibilityDelay = d }
}

// Held is the number of PUTs held by HoldForLateArrival and not released.
func (b *BookingAPI) Held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}
