package adapter

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/internal/telemetry"
)

// CallKind is what an external call is for.
type CallKind string

// The kinds of external calls: the write itself, the reconciler's reads
// (a search of candidates, a readback of one object or its live URL, the
// API's status query) and the check of an account's identity before a
// write is recorded.
const (
	KindWrite    CallKind = "write"
	KindSearch   CallKind = "search"
	KindReadback CallKind = "readback"
	KindStatus   CallKind = "status"
	KindIdentity CallKind = "identity"
)

// Call outcomes (CallObservation.Outcome): the answer's status class, or
// the classification of a call that got none.
const (
	Outcome2xx     = "2xx"
	Outcome3xx     = "3xx"
	Outcome4xx     = "4xx"
	Outcome5xx     = "5xx"
	OutcomeNotSent = string(NotSent) // never written: nothing can have executed
	OutcomeUnknown = string(Unknown) // written, no (whole) answer
)

// CallObservation is one HTTP request an adapter sent, as Do saw it.
type CallObservation struct {
	Route    string
	Kind     CallKind
	Outcome  string
	Duration time.Duration
	// RateLimited: the API refused the request for its rate limit (429,
	// or a 403 or 503 that asked to wait with Retry-After).
	RateLimited bool
}

// CallObserver is told of every HTTP request an adapter sends for a route
// (metrics). It must not block.
type CallObserver interface {
	ObserveCall(CallObservation)
}

type callKey struct{}

type callInfo struct {
	route string
	kind  CallKind
	obs   CallObserver
}

// Calling marks ctx as the context of route's external calls of kind:
// every request Do sends on it is reported to route.Observer. The callers
// of an adapter (the producer's write, the reconciler's reads) mark their
// contexts; Do, which every adapter sends its requests with, reports —
// so every adapter is measured, and none measures itself. While tracing
// is on, the call's span is named after the route and kind. Without an
// Observer and with tracing off ctx is returned as is.
func Calling(ctx context.Context, route Route, kind CallKind) context.Context {
	if route.Observer == nil && !telemetry.Enabled() {
		return ctx
	}
	return context.WithValue(ctx, callKey{}, callInfo{route: route.Name, kind: kind, obs: route.Observer})
}

// observe reports one request of ctx's call (Calling), if any.
func observe(ctx context.Context, start time.Time, resp *Response, err error) {
	ci, ok := ctx.Value(callKey{}).(callInfo)
	if !ok || ci.obs == nil {
		return
	}
	o := CallObservation{Route: ci.route, Kind: ci.kind, Duration: time.Since(start)}
	ce, _ := err.(*CallError)
	switch {
	case resp != nil:
		o.Outcome = strconv.Itoa(resp.StatusCode/100) + "xx"
		o.RateLimited = rateLimitAnswer(resp, start)
	case ce != nil && ce.Class == NotSent:
		o.Outcome = OutcomeNotSent
	default:
		o.Outcome = OutcomeUnknown
	}
	ci.obs.ObserveCall(o)
}

// rateLimitAnswer: 429, or a 403 or 503 that asks to wait.
func rateLimitAnswer(resp *Response, now time.Time) bool {
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return true
	case http.StatusForbidden, http.StatusServiceUnavailable:
		_, ok := RetryAfter(resp.Header, now)
		return ok
	}
	return false
}

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
