package telemetry

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
)

// With tracing off, every hook the write path calls allocates nothing and
// hands back the caller's context.
func TestOffPathAllocatesNothing(t *testing.T) {
	defer Use(nil, nil)()
	ctx := context.Background()
	req, _ := http.NewRequest(http.MethodPost, "http://example.com/x?token=1", nil)
	err := errors.New("x")
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := Start(ctx, "settle.submit")
		span.Intent("intent", "route")
		span.Str(AttrAttemptID, "a1")
		span.Int(AttrCount, 1)
		span.State("unknown")
		c = WithIntent(c, "intent", "a1")
		c = Propagate(c)
		s := StartHTTP(c, req, "route", "write")
		s.HTTPStatus(200)
		s.End(err)
		if Traceparent(c) != "" || c != ctx {
			t.Fatal("tracing off changed the context")
		}
		span.End(nil)
	})
	if allocs != 0 {
		t.Fatalf("tracing off: %v allocations per call, want 0", allocs)
	}
	if req.Header.Get(Header) != "" {
		t.Fatal("tracing off: a traceparent was sent")
	}
}

// A traceparent is read back as it was written; malformed ones are
// ignored.
func TestTraceparentRoundTrip(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if got := Traceparent(WithTraceparent(context.Background(), tp)); got != tp {
		t.Fatalf("round trip: %q, want %q", got, tp)
	}
	for _, bad := range []string{"", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x"} {
		if got := Traceparent(WithTraceparent(context.Background(), bad)); got != "" {
			t.Errorf("%q accepted as %q", bad, got)
		}
	}
}

// A span's URL keeps no user info, query or fragment.
func TestSafeURL(t *testing.T) {
	u, _ := url.Parse("https://user:pw@api.example.com:8443/v1/posts?access_token=s3cret#frag")
	if got := SafeURL(u); got != "https://api.example.com:8443/v1/posts" {
		t.Fatalf("SafeURL: %q", got)
	}
}

// Tracing is on only when the environment asks for it, over the
// protocol it names; anything else is an error naming the variable.
func TestWanted(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
		err  bool
	}{
		{env: nil, want: ""},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: ProtocolHTTP},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, want: ProtocolGRPC},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: ProtocolHTTP},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: ""},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, want: ""},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, err: true},
	} {
		got, err := Wanted(func(k string) string { return c.env[k] })
		if got != c.want || (err != nil) != c.err {
			t.Errorf("%v: %q, %v; want %q (error %v)", c.env, got, err, c.want, c.err)
		}
	}
}
