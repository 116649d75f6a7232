package adapter

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/internal/telemetry"
)

// Class is the classification of one attempt that did not succeed.
type Class string

const (
	// NotSent: the request provably never left this process (DNS failure,
	// dial refused, TLS handshake failure): nothing can have executed.
	NotSent Class = "not_sent"
	// Rejected: the server answered that it did not execute it (definite 4xx).
	Rejected Class = "rejected"
	// Unknown: the request was written and no definite answer came back.
	Unknown Class = "unknown"
)

// CallError is the classified failure of one attempt. Code is a stable
// machine code; Message is safe to store (no header, no body, no query).
type CallError struct {
	Class      Class
	Code       string
	StatusCode int
	Retryable  bool
	Message    string
	// RetryAfter is how long the server asked to wait before the next
	// request (Retry-After in seconds or as an HTTP date, or a route's
	// declared rate-limit reset header); 0 when it said nothing.
	RetryAfter time.Duration
}

// CodeKeyReused is the code of an answer saying the idempotency key was
// already used with another request (Stripe's idempotency_error, a 422
// "key reused"): evidence that an earlier request reached the API, never a
// definite rejection. Such an answer is classified Unknown; the producer
// records it unknown even when an adapter classified it Rejected.
const CodeKeyReused = events.CodeKeyReused

func (e *CallError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("%s: %s (HTTP %d)", e.Class, e.Code, e.StatusCode)
	}
	return fmt.Sprintf("%s: %s", e.Class, e.Code)
}

// StatusPolicy decides what an HTTP status means for a write.
type StatusPolicy struct {
	// Definite4xx are 4xx codes that prove the write was not executed.
	// Default: every 4xx but 408, 409 and 425/429.
	Definite4xx func(code int) bool
	// Retryable4xx are 4xx codes that prove non-execution and invite a retry.
	Retryable4xx func(code int) bool
}

// DefaultStatusPolicy: 429 and 425 are retryable rejections; 408 and 409
// (the server may still be working on an earlier request with the same key)
// are unknown; other 4xx are definite rejections; every 5xx is unknown
// except 501.
func DefaultStatusPolicy() StatusPolicy {
	return StatusPolicy{
		Definite4xx: func(code int) bool {
			return code >= 400 && code < 500 && code != 408 && code != 409 && code != 425 && code != 429
		},
		Retryable4xx: func(code int) bool { return code == 429 || code == 425 },
	}
}

// Classify turns a status code into nil (2xx) or a *CallError.
func (p StatusPolicy) Classify(code int) error {
	switch {
	case code >= 200 && code < 300:
		return nil
	case p.Retryable4xx != nil && p.Retryable4xx(code):
		return &CallError{Class: Rejected, Code: "http_retryable", StatusCode: code, Retryable: true, Message: "the server refused the request and invites a retry"}
	case p.Definite4xx != nil && p.Definite4xx(code):
		return &CallError{Class: Rejected, Code: "http_rejected", StatusCode: code, Message: "the server refused the request"}
	case code == 501:
		return &CallError{Class: Rejected, Code: "http_not_implemented", StatusCode: code, Message: "the server does not implement the request"}
	case code == 502 || code == 504:
		return &CallError{Class: Unknown, Code: "gateway_error", StatusCode: code, Message: "a gateway failed after the request was sent"}
	default:
		return &CallError{Class: Unknown, Code: "http_ambiguous", StatusCode: code, Message: "the response does not prove whether the request executed"}
	}
}

// Response is a read response: status and body (bounded).
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// MaxResponseBody bounds what Do reads.
const MaxResponseBody = 4 << 20

// Do sends one request and classifies a failure. It never retries, and
// net/http cannot replay it either (noReplay). A request on a context
// marked with Calling is reported to its route's observer and, while
// tracing is on, is a client span (telemetry.StartHTTP).
func Do(ctx context.Context, client *http.Client, req *http.Request) (resp *Response, err error) {
	start := time.Now()
	if telemetry.Enabled() {
		ci, _ := ctx.Value(callKey{}).(callInfo)
		span := telemetry.StartHTTP(ctx, req, ci.route, string(ci.kind))
		defer func() { endCall(span, resp, err) }()
	}
	defer func() { observe(ctx, start, resp, err) }()
	return do(ctx, client, req)
}

// endCall ends an external call's span: its answer's status, or the
// classification of a call that got none (its code, never its text).
func endCall(span telemetry.Span, resp *Response, err error) {
	var ce *CallError
	switch {
	case resp != nil:
		span.HTTPStatus(resp.StatusCode)
	case errors.As(err, &ce):
		span.Str(telemetry.AttrOutcome, string(ce.Class))
		span.Fail(err, ce.Code)
	default:
		span.Fail(err, "unclassified")
	}
	span.End(nil)
}

func do(ctx context.Context, client *http.Client, req *http.Request) (*Response, error) {
	// A write that failed part-way counts as written: some of it may have
	// reached the server.
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) }}
	req = req.WithContext(httptrace.WithClientTrace(ctx, trace))
	noReplay(req)
	resp, err := client.Do(req)
	if err != nil {
		return nil, classifyTransport(ctx, req, err, wrote.Load())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBody))
	if err != nil {
		return nil, &CallError{Class: Unknown, Code: "response_lost", StatusCode: resp.StatusCode,
			Message: fmt.Sprintf("%s %s: the response was cut off after the request was sent", req.Method, req.URL.Host)}
	}
	return &Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

func classifyTransport(ctx context.Context, req *http.Request, err error, wrote bool) error {
	where := req.Method + " " + req.URL.Host
	if !wrote {
		code := "not_sent"
		var dnsErr *net.DNSError
		var opErr *net.OpError
		var tlsErr *tls.RecordHeaderError
		switch {
		case errors.As(err, &dnsErr):
			code = "dns_failure"
		case errors.Is(err, syscall.ECONNREFUSED):
			code = "connection_refused"
		case errors.As(err, &tlsErr):
			code = "tls_failure"
		case errors.As(err, &opErr) && opErr.Op == "dial":
			code = "dial_failure"
		case ctx.Err() != nil:
			code = "cancelled_before_send"
		}
		return &CallError{Class: NotSent, Code: code, Retryable: true,
			Message: where + ": the request was never written"}
	}
	code := "transport_error"
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled):
		code = "cancelled_after_send"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err):
		code = "timeout_after_send"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		code = "connection_reset"
	}
	return &CallError{Class: Unknown, Code: code, Message: where + ": no answer after the request was written"}
}

// idempotencyHeaders are the header names that make net/http take a
// request for one it may send twice (Request.isReplayable).
var idempotencyHeaders = []string{"Idempotency-Key", "X-Idempotency-Key"}

// noReplay makes req one net/http's Transport will not resend by itself
// after a reused connection breaks, even once written. The Transport
// replays a request whose body it can get again (none, or GetBody set)
// when its method is idempotent or its header holds an idempotency key;
// a write sent twice behind settle's back is a second effect whenever the
// API ignores the key. GetBody is cleared; a bodyless request's key
// headers move to lower-case keys of a copy of its header, which net/http
// does not look up and sends as they are.
func noReplay(req *http.Request) {
	req.GetBody = nil
	if req.Body != nil && req.Body != http.NoBody {
		return
	}
	cloned := false
	for _, k := range idempotencyHeaders {
		v, ok := req.Header[k]
		if !ok {
			continue
		}
		if !cloned {
			req.Header, cloned = req.Header.Clone(), true
		}
		delete(req.Header, k)
		lk := strings.ToLower(k)
		req.Header[lk] = append(req.Header[lk], v...)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// NewRequest builds a request with a body that net/http will not replay.
func NewRequest(ctx context.Context, method, url string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, &CallError{Class: NotSent, Code: "bad_request", Message: "cannot build the request"}
	}
	req.GetBody = nil
	return req, nil
}

// InvalidRequest is a write that cannot be built (bad payload, missing
// request id, ...): NotSent and not retryable.
func InvalidRequest(code, msg string) error {
	return &CallError{Class: NotSent, Code: code, Message: msg}
}

// Unparseable is a response to what (e.g. "the write", "a get") that
// cannot be parsed: Unknown, code response_unparseable.
func Unparseable(status int, what string) error {
	return &CallError{Class: Unknown, Code: "response_unparseable", StatusCode: status,
		Message: "the response to " + what + " cannot be parsed"}
}

// CheckBaseURL parses the root of an API: an http or https URL with a
// host and no credentials, query or fragment. An error's text is the
// reason alone (never the value), for the caller to prefix with its field
// name; credentials tells where credentials go instead of user info.
func CheckBaseURL(raw, credentials string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("is required")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("is not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("must be an http or https URL")
	case u.Host == "":
		return nil, errors.New("has no host")
	case u.User != nil:
		return nil, errors.New("must not carry credentials; " + credentials)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errors.New("must not have a query or a fragment")
	}
	return u, nil
}

// NewHTTPClient is an adapter's default HTTP client: timeout, redirects
// not followed, and a transport of its own (NewTransport). A redirect is
// an answer, not something to follow: a 3xx to a write is ambiguous, and a
// live URL redirecting to a login page is not a public page. It never
// retries.
func NewHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Transport:     NewTransport(),
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// MaxIdleConnsPerHost is how many idle connections an adapter's transport
// keeps to one host (http.DefaultTransport keeps 2: every concurrent call
// past the second would dial again).
const MaxIdleConnsPerHost = 256

// NewTransport is an adapter's HTTP transport: http.DefaultTransport's
// settings (proxy from the environment, dial and TLS timeouts) keeping
// MaxIdleConnsPerHost idle connections to each host.
func NewTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 4 * MaxIdleConnsPerHost
	tr.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return tr
}
