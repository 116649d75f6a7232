package adapter

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter bounds what RetryAfter and ResetAfter report: a server
// asking for more is taken at this.
const MaxRetryAfter = 24 * time.Hour

// RetryAfter reads how long a response asks the client to wait before
// its next request: the Retry-After header (RFC 9110 section 10.2.3) as
// seconds or as an HTTP date. A date is taken relative to the response's
// own Date header when it has one, so that a server clock that is off
// does not change the wait; else relative to now (the caller's injected
// clock). ok is false when the header is absent or unreadable. The wait
// is never negative and at most MaxRetryAfter.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, int64(MaxRetryAfter/time.Second))) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return clampWait(at.Sub(serverNow(h, now))), true
}

// ResetAfter reads a rate-limit reset header that holds Unix seconds
// (GitHub's x-ratelimit-reset): the wait until then, relative to the
// response's Date header when it has one, else to now. ok is false when
// the header is absent or not a number.
func ResetAfter(h http.Header, name string, now time.Time) (time.Duration, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(h.Get(name)), 10, 64)
	if err != nil || n < 0 || n > 1e12 {
		return 0, false
	}
	return clampWait(time.Unix(n, 0).Sub(serverNow(h, now))), true
}

// serverNow is the time the response was made by the server's clock (its
// Date header), or now.
func serverNow(h http.Header, now time.Time) time.Time {
	if d := h.Get("Date"); d != "" {
		if t, err := http.ParseTime(d); err == nil {
			return t
		}
	}
	return now
}

func clampWait(d time.Duration) time.Duration { return min(max(d, 0), MaxRetryAfter) }
