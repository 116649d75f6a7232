package adapter_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
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
