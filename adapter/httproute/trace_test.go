package httproute_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/internal/telemetry"
)

// A route sends the traceparent of its call's span to the API only when
// its file says propagate_trace: true; the call's span holds the route,
// the kind and the HTTP client attributes, never the credential.
func TestPropagateTraceIsTheRoutesChoice(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("traceparent"))
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	defer telemetry.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), adapter.NewScrubber(secretToken).Scrub)()

	file := string(readExample(t, "social.yaml"))
	on := strings.Replace(file, "    base_url: ${env:SOCIAL_BASE_URL}\n", "    base_url: ${env:SOCIAL_BASE_URL}\n    propagate_trace: true\n", 1)
	if on == file {
		t.Fatal("the example's base_url line moved")
	}
	for _, yaml := range []string{file, on} {
		a := buildYAML(t, []byte(yaml), exampleEnv(srv.URL))
		route := adapter.Route{Name: "social_post", Adapter: a}
		_, _ = a.Write(adapter.Calling(context.Background(), route, adapter.KindWrite), writeReq(1, "acct_1", "", json.RawMessage(`{"body":"hi"}`)))
	}
	spans := rec.Ended()
	if len(seen) != 2 || len(spans) != 2 {
		t.Fatalf("%d requests, %d spans; want 2 and 2", len(seen), len(spans))
	}
	if seen[0] != "" {
		t.Errorf("a route without propagate_trace sent traceparent %q", seen[0])
	}
	if want := "00-" + spans[1].SpanContext().TraceID().String() + "-" + spans[1].SpanContext().SpanID().String() + "-01"; seen[1] != want {
		t.Errorf("propagate_trace: sent %q, want the call span's %q", seen[1], want)
	}
	for _, s := range spans {
		got := map[string]string{}
		for _, kv := range s.Attributes() {
			got[string(kv.Key)] = kv.Value.Emit()
			if strings.Contains(kv.Value.Emit(), secretToken) {
				t.Errorf("%s holds the credential", kv.Key)
			}
		}
		if s.Name() != "POST" || got["settle.route"] != "social_post" || got["settle.call_kind"] != "write" ||
			got["http.response.status_code"] != "503" || !strings.HasPrefix(got["url.full"], srv.URL+"/") {
			t.Errorf("span %s: %v", s.Name(), got)
		}
	}
}
