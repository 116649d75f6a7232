package httproute

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
)

// maxListingWait bounds rate_limit.max_wait.
const maxListingWait = 10 * time.Minute

// CodeRateLimited is the code of a read the API refused for its rate
// limit (429, or the declared remaining header at 0): rejected, retryable,
// with the wait in RetryAfter.
const CodeRateLimited = "rate_limited"

type rateLimitSpec struct {
	remaining  string
	reset      string
	resetAfter string
	maxWait    time.Duration
}

func (c *compiler) compileRateLimit(a *Adapter, r *RateLimitConfig) {
	rl := &rateLimitSpec{remaining: r.Remaining, reset: r.Reset, resetAfter: r.ResetAfter, maxWait: r.MaxWait}
	for _, h := range []struct{ field, name string }{{"rate_limit.remaining", r.Remaining}, {"rate_limit.reset", r.Reset}, {"rate_limit.reset_after", r.ResetAfter}} {
		if h.name != "" && !validHeaderName(h.name) {
			c.report(h.field, "is not a valid header name")
		}
	}
	switch {
	case r.Reset != "" && r.ResetAfter != "":
		c.report("rate_limit.reset_after", "is instead of reset: give one (reset: Unix seconds; reset_after: seconds from now)")
	case (r.Reset != "" || r.ResetAfter != "") && r.Remaining == "":
		c.report("rate_limit.remaining", "is required with reset: the header that says how many requests are left (x-ratelimit-remaining)")
	case r.Remaining != "" && r.Reset == "" && r.ResetAfter == "":
		c.report("rate_limit.reset", "is required with remaining: the header with the Unix time the limit resets (x-ratelimit-reset), or reset_after")
	}
	if r.MaxWait < 0 || r.MaxWait > maxListingWait {
		c.report("rate_limit.max_wait", "must be between 0 and "+maxListingWait.String())
	}
	a.rateLimit = rl
}

// retryAfter is how long resp asks to wait: Retry-After, else the
// declared reset when the declared remaining header is "0"; 0 when it
// asks nothing.
func (a *Adapter) retryAfter(resp *adapter.Response) time.Duration {
	now := a.now()
	if d, ok := adapter.RetryAfter(resp.Header, now); ok {
		return d
	}
	if !a.exhausted(resp) {
		return 0
	}
	rl := a.rateLimit
	if rl.reset != "" {
		d, _ := adapter.ResetAfter(resp.Header, rl.reset, now)
		return d
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(resp.Header.Get(rl.resetAfter)), 10, 64); err == nil && n >= 0 {
		return min(time.Duration(n)*time.Second, adapter.MaxRetryAfter)
	}
	return 0
}

// exhausted: the declared remaining header says no request is left.
func (a *Adapter) exhausted(resp *adapter.Response) bool {
	return a.rateLimit != nil && a.rateLimit.remaining != "" && strings.TrimSpace(resp.Header.Get(a.rateLimit.remaining)) == "0"
}

// rateLimited: a read the API refused for its rate limit — 429, or a
// 403 or 503 that asks to wait (GitHub's 403 with its remaining header
// at 0, a secondary limit's 403 with Retry-After).
func (a *Adapter) rateLimited(resp *adapter.Response) bool {
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return true
	case http.StatusForbidden, http.StatusServiceUnavailable:
		_, ok := adapter.RetryAfter(resp.Header, a.now())
		return ok || a.exhausted(resp)
	}
	return false
}

// readStatus classifies the status of a read: nil for success; a
// rate-limited read is rejected and retryable (code rate_limited); every
// failure carries the wait the API asked for.
func (a *Adapter) readStatus(resp *adapter.Response) error {
	if a.rateLimited(resp) {
		return &adapter.CallError{Class: adapter.Rejected, Code: CodeRateLimited, StatusCode: resp.StatusCode, Retryable: true,
			RetryAfter: a.retryAfter(resp), Message: "the API refused the read for its rate limit"}
	}
	return a.withWait(a.classify(resp.StatusCode), resp)
}

// withWait sets RetryAfter on err's *adapter.CallError from resp, unless
// it has one.
func (a *Adapter) withWait(err error, resp *adapter.Response) error {
	var ce *adapter.CallError
	if err != nil && errors.As(err, &ce) && ce.RetryAfter == 0 {
		ce.RetryAfter = a.retryAfter(resp)
	}
	return err
}

// sleep waits d or until ctx ends.
func (a *Adapter) sleep(ctx context.Context, d time.Duration) error {
	if a.sleeper != nil {
		return a.sleeper(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// headerMatch is an outcome condition on a response header.
type headerMatch struct {
	name string
	want *template
}

func (h headerMatch) holds(s *scope) bool {
	if s.header == nil {
		return false
	}
	vals := s.header.Values(h.name)
	if len(vals) == 0 {
		return false
	}
	want, ok, err := h.want.render(s, nil, false)
	return err == nil && ok && strings.TrimSpace(vals[0]) == want
}
