package adapter_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	date := func(t time.Time) string { return t.UTC().Format(http.TimeFormat) }
	for _, c := range []struct {
		name string
		h    map[string]string
		want time.Duration
		ok   bool
	}{
		{"seconds", map[string]string{"Retry-After": "120"}, 2 * time.Minute, true},
		{"zero", map[string]string{"Retry-After": "0"}, 0, true},
		{"date by our clock", map[string]string{"Retry-After": date(now.Add(90 * time.Second))}, 90 * time.Second, true},
		// The server's clock is 10 minutes behind ours: its Date header
		// says so, and the wait is what it meant.
		{"date by the server's clock", map[string]string{"Retry-After": date(now.Add(-10*time.Minute + 30*time.Second)), "Date": date(now.Add(-10 * time.Minute))}, 30 * time.Second, true},
		{"date in the past", map[string]string{"Retry-After": date(now.Add(-time.Hour))}, 0, true},
		{"too long", map[string]string{"Retry-After": "99999999999"}, adapter.MaxRetryAfter, true},
		{"negative", map[string]string{"Retry-After": "-5"}, 0, false},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"absent", nil, 0, false},
	} {
		h := http.Header{}
		for k, v := range c.h {
			h.Set(k, v)
		}
		got, ok := adapter.RetryAfter(h, now)
		if got != c.want || ok != c.ok {
			t.Fatalf("%s: %v %v, want %v %v", c.name, got, ok, c.want, c.ok)
		}
	}
	h := http.Header{}
	h.Set("X-Ratelimit-Reset", "1930453627") // now + 60 s by the server's Date
	h.Set("Date", date(time.Unix(1930453567, 0)))
	if got, ok := adapter.ResetAfter(h, "x-ratelimit-reset", now); !ok || got != time.Minute {
		t.Fatalf("reset: %v %v", got, ok)
	}
	if _, ok := adapter.ResetAfter(http.Header{}, "x-ratelimit-reset", now); ok {
		t.Fatal("an absent reset header was read")
	}
}

// FuzzRetryAfter: any header values read as a wait in [0, MaxRetryAfter]
// or as absent, never a panic.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "0", "-1", "Wed, 21 Oct 2015 07:28:00 GMT", "soon", "99999999999999999999", ""} {
		f.Add(s, "Wed, 21 Oct 2015 07:27:00 GMT", "1445412480")
	}
	now := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	f.Fuzz(func(t *testing.T, retry, date, reset string) {
		h := http.Header{}
		h.Set("Retry-After", retry)
		h.Set("Date", date)
		h.Set("X-Ratelimit-Reset", reset)
		for _, d := range []func() (time.Duration, bool){
			func() (time.Duration, bool) { return adapter.RetryAfter(h, now) },
			func() (time.Duration, bool) { return adapter.ResetAfter(h, "X-Ratelimit-Reset", now) },
		} {
			if w, ok := d(); w < 0 || w > adapter.MaxRetryAfter || (!ok && w != 0) {
				t.Fatalf("wait %v %v from %q %q %q", w, ok, retry, date, reset)
			}
		}
	})
}
