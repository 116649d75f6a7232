package telemetry

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Header is the W3C trace context header.
const Header = "traceparent"

type idsKey struct{}

type ids struct{ intent, attempt string }

type propagateKey struct{}

// WithIntent returns ctx naming the intent (and the attempt, for a write)
// its external calls are made for: StartHTTP sets them on each call's
// span. ctx itself when tracing is off.
func WithIntent(ctx context.Context, intentID, attemptID string) context.Context {
	if !Enabled() {
		return ctx
	}
	return context.WithValue(ctx, idsKey{}, ids{intent: intentID, attempt: attemptID})
}

// Propagate returns ctx asking that the external calls made on it carry
// the traceparent of their span (a route's propagate_trace). ctx itself
// when tracing is off.
func Propagate(ctx context.Context) context.Context {
	if !Enabled() {
		return ctx
	}
	return context.WithValue(ctx, propagateKey{}, true)
}

// StartHTTP starts the client span of one external request, with the
// HTTP client semantic conventions (http.request.method, url.full without
// credentials, query or fragment, server.address, server.port) and
// settle's route, call kind, intent and attempt; when ctx asks for it
// (Propagate) the request carries the span's traceparent. When tracing is
// off it returns the zero Span and leaves req alone.
func StartHTTP(ctx context.Context, req *http.Request, route, kind string) Span {
	if !Enabled() {
		return Span{}
	}
	_, s := start(ctx, req.Method, trace.SpanKindClient)
	if s.s == nil {
		return s
	}
	u := req.URL
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", req.Method),
		attribute.String("url.full", s.scrub(SafeURL(u))),
		attribute.String("server.address", u.Hostname()),
	}
	if p := port(u); p > 0 {
		attrs = append(attrs, attribute.Int("server.port", p))
	}
	if route != "" {
		attrs = append(attrs, attribute.String(AttrRoute, s.scrub(route)))
	}
	if kind != "" {
		attrs = append(attrs, attribute.String(AttrCallKind, kind))
	}
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		attrs = append(attrs, attribute.String(AttrIntentID, s.scrub(v.intent)))
		if v.attempt != "" {
			attrs = append(attrs, attribute.String(AttrAttemptID, s.scrub(v.attempt)))
		}
	}
	s.s.SetAttributes(attrs...)
	if on, _ := ctx.Value(propagateKey{}).(bool); on {
		req.Header = req.Header.Clone()
		if req.Header == nil {
			req.Header = http.Header{}
		}
		req.Header.Set(Header, format(s.s.SpanContext()))
	}
	return s
}

// HTTPStatus records the status code of the answer (an error status for
// 4xx and 5xx, as the client conventions have it).
func (s Span) HTTPStatus(code int) {
	if s.s == nil {
		return
	}
	s.s.SetAttributes(attribute.Int("http.response.status_code", code))
	if code >= 400 {
		s.s.SetAttributes(attribute.String("error.type", strconv.Itoa(code)))
	}
}

// SafeURL is u as a span may hold it: scheme, host and path, without user
// info, query or fragment (where credentials and tokens travel).
func SafeURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return c.String()
}

func port(u *url.URL) int {
	if p := u.Port(); p != "" {
		n, _ := strconv.Atoi(p)
		return n
	}
	switch u.Scheme {
	case "http":
		return 80
	case "https":
		return 443
	}
	return 0
}
