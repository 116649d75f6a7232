package adapter_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
)

func TestCheckBaseURL(t *testing.T) {
	for _, c := range []struct{ in, reason string }{
		{"", "is required"},
		{"://x", "is not a valid URL"},
		{"ftp://example.com", "must be an http or https URL"},
		{"example.com", "must be an http or https URL"},
		{"http://", "has no host"},
		{"https://user:secret@example.com", "must not carry credentials; use Token"},
		{"https://example.com/?q=1", "must not have a query or a fragment"},
		{"https://example.com/?", "must not have a query or a fragment"},
		{"https://example.com/#top", "must not have a query or a fragment"},
	} {
		u, err := adapter.CheckBaseURL(c.in, "use Token")
		if err == nil || err.Error() != c.reason || u != nil {
			t.Errorf("CheckBaseURL(%q) = %v, %v; want reason %q", c.in, u, err, c.reason)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("CheckBaseURL(%q) echoes the credentials: %v", c.in, err)
		}
	}
	u, err := adapter.CheckBaseURL("https://api.example.com:8443/root/", "use Token")
	if err != nil || u.Host != "api.example.com:8443" || u.Path != "/root/" {
		t.Fatalf("valid URL: %v, %v", u, err)
	}
}

func TestNewHTTPClientDoesNotFollowRedirects(t *testing.T) {
	var followed bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/login" {
			followed = true
		}
		http.Redirect(w, r, "/login", http.StatusFound)
	}))
	defer srv.Close()
	c := adapter.NewHTTPClient(3 * time.Second)
	if c.Timeout != 3*time.Second {
		t.Fatalf("timeout %v", c.Timeout)
	}
	resp, err := c.Get(srv.URL + "/p/1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || followed {
		t.Fatalf("status %d, followed %v: want the 302 itself", resp.StatusCode, followed)
	}
}

// TestNewHTTPClientKeepsAConnectionPerConcurrentCall: two waves of 8
// concurrent calls (each held until all 8 are in flight, so each needs its
// own connection) dial 8 connections, not 8 and then 6 more:
// http.DefaultTransport keeps only 2 idle connections to a host.
func TestNewHTTPClientKeepsAConnectionPerConcurrentCall(t *testing.T) {
	const n = 8
	var dials atomic.Int64
	var inFlight atomic.Int64
	release := make(chan struct{})
	var wave atomic.Pointer[chan struct{}]
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch := *wave.Load()
		if inFlight.Add(1)%n == 0 {
			close(ch)
		}
		select {
		case <-ch:
		case <-release:
		case <-time.After(5 * time.Second):
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	defer close(release)
	c := adapter.NewHTTPClient(10 * time.Second)
	for w := range 2 {
		ch := make(chan struct{})
		wave.Store(&ch)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				resp, err := c.Post(srv.URL+"/w", "application/json", strings.NewReader(`{}`))
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got := dials.Load(); got != n {
			t.Fatalf("after wave %d of %d concurrent calls: %d connections dialed, want %d", w+1, n, got, n)
		}
	}
}
