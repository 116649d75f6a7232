package telemetry

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Instrumentation is the name settle's tracer is registered under (the
// instrumentation scope of every span it starts).
const Instrumentation = "github.com/settle-dev/settle"

// Attribute names settle sets on its spans, besides the HTTP client
// semantic conventions of an external call.
const (
	AttrIntentID  = "settle.intent_id"
	AttrRoute     = "settle.route"
	AttrState     = "settle.state"
	AttrAttemptID = "settle.attempt_id"
	AttrCallKind  = "settle.call_kind"
	AttrEvent     = "settle.event"
	AttrOutcome   = "settle.outcome"
	AttrAction    = "settle.action"
	AttrStep      = "settle.step"
	AttrCount     = "settle.candidates"
)

// tracing is the process's tracer while tracing is on.
type tracing struct {
	tracer trace.Tracer
	scrub  func(string) string
}

var current atomic.Pointer[tracing]

// Enabled reports whether tracing is on: the one check of the off path.
func Enabled() bool { return current.Load() != nil }

// Use makes tp the tracer provider of settle's spans, with scrub applied
// to every string attribute and error message (nil: none), and returns
// what restores the previous one. A nil tp turns tracing off. Setup calls
// it; a test calls it with an in-memory provider.
func Use(tp trace.TracerProvider, scrub func(string) string) (restore func()) {
	var next *tracing
	if tp != nil {
		if scrub == nil {
			scrub = func(s string) string { return s }
		}
		next = &tracing{tracer: tp.Tracer(Instrumentation), scrub: scrub}
	}
	prev := current.Swap(next)
	return func() { current.Store(prev) }
}

// Span is one of settle's spans, or nothing when tracing is off: every
// method of the zero Span does nothing.
type Span struct {
	s     trace.Span
	scrub func(string) string
}

// Start starts a span named name as a child of ctx's span (or of the
// remote caller's span ctx carries). When tracing is off it returns ctx
// itself and the zero Span.
func Start(ctx context.Context, name string) (context.Context, Span) {
	return start(ctx, name, trace.SpanKindInternal)
}

// StartServer starts a server span (a request settle serves).
func StartServer(ctx context.Context, name string) (context.Context, Span) {
	return start(ctx, name, trace.SpanKindServer)
}

func start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, Span) {
	t := current.Load()
	if t == nil {
		return ctx, Span{}
	}
	ctx, s := t.tracer.Start(ctx, name, trace.WithSpanKind(kind))
	return ctx, Span{s: s, scrub: t.scrub}
}

// On reports whether the span records (tracing is on).
func (s Span) On() bool { return s.s != nil }

// Intent sets the intent's id and route.
func (s Span) Intent(id, route string) {
	if s.s == nil {
		return
	}
	s.s.SetAttributes(attribute.String(AttrIntentID, s.scrub(id)), attribute.String(AttrRoute, s.scrub(route)))
}

// State sets the intent's state as the span leaves it.
func (s Span) State(state string) { s.Str(AttrState, state) }

// Str sets a string attribute, scrubbed.
func (s Span) Str(key, v string) {
	if s.s == nil || v == "" {
		return
	}
	s.s.SetAttributes(attribute.String(key, s.scrub(v)))
}

// Int sets an integer attribute.
func (s Span) Int(key string, v int) {
	if s.s == nil {
		return
	}
	s.s.SetAttributes(attribute.Int(key, v))
}

// Fail marks the span failed with err's message (scrubbed), and with
// errType as its error.type when given.
func (s Span) Fail(err error, errType string) {
	if s.s == nil || err == nil {
		return
	}
	if errType != "" {
		s.s.SetAttributes(attribute.String("error.type", errType))
	}
	s.s.SetStatus(codes.Error, s.scrub(err.Error()))
}

// End ends the span; a non-nil err marks it failed first (Fail).
func (s Span) End(err error) {
	if s.s == nil {
		return
	}
	if err != nil {
		s.Fail(err, "")
	}
	s.s.End()
}

// Traceparent is the W3C traceparent of ctx's span (a caller's remote one
// included), "" when ctx carries none.
func Traceparent(ctx context.Context) string {
	return format(trace.SpanContextFromContext(ctx))
}

// WithTraceparent returns ctx carrying tp, a W3C traceparent a caller sent
// or an intent recorded, as the remote parent of the spans started on it;
// ctx itself when tp is empty or malformed (a caller's bad header is
// ignored, as the W3C recommendation has it).
func WithTraceparent(ctx context.Context, tp string) context.Context {
	sc, ok := Parse(tp)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

func format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// Parse reads a W3C traceparent (version 00, or a later version's first
// four fields): ok is false for anything else, an all-zero trace or span
// id included.
func Parse(tp string) (trace.SpanContext, bool) {
	if len(tp) < 55 || (len(tp) > 55 && (tp[:2] == "00" || tp[55] != '-')) ||
		tp[2] != '-' || tp[35] != '-' || tp[52] != '-' || tp[:2] == "ff" || !lowerHex(tp[:2]) || !lowerHex(tp[53:55]) {
		return trace.SpanContext{}, false
	}
	// The ids' parsers take lower-case hex only and refuse all zeros.
	tid, terr := trace.TraceIDFromHex(tp[3:35])
	sid, serr := trace.SpanIDFromHex(tp[36:52])
	if terr != nil || serr != nil {
		return trace.SpanContext{}, false
	}
	flags, _ := strconv.ParseUint(tp[53:55], 16, 8)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags) & trace.FlagsSampled, Remote: true}), true
}

func lowerHex(s string) bool { return strings.Trim(s, "0123456789abcdef") == "" }

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
