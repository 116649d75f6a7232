package adapter_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/settle-dev/settle/adapter"
)

type recorder struct {
	mu  sync.Mutex
	got []adapter.CallObservation
}

func (r *recorder) ObserveCall(o adapter.CallObservation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o.Duration = 0 // not asserted (no wall-clock assertions)
	r.got = append(r.got, o)
}

// Do reports every request of a context marked with Calling to the
// route's observer: the answer's status class, a rate-limit answer, a
// request never sent, one that got no answer; and nothing for a context
// that is not marked.
func TestDoReportsEachRequestOfAMarkedContext(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusCreated)
		case "/limited":
			w.WriteHeader(http.StatusTooManyRequests)
		case "/wait":
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/fail":
			w.WriteHeader(http.StatusBadGateway)
		case "/drop":
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}
	}))
	defer hs.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String()
	closed.Close()

	rec := &recorder{}
	route := adapter.Route{Name: "r1", Observer: rec}
	send := func(ctx context.Context, u string) {
		req, err := adapter.NewRequest(ctx, http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = adapter.Do(ctx, hs.Client(), req)
	}
	send(context.Background(), hs.URL+"/ok")                                                                // not marked: not reported
	send(adapter.Calling(context.Background(), adapter.Route{Name: "r0"}, adapter.KindWrite), hs.URL+"/ok") // no observer
	write := adapter.Calling(context.Background(), route, adapter.KindWrite)
	search := adapter.Calling(context.Background(), route, adapter.KindSearch)
	send(write, hs.URL+"/ok")
	send(write, hs.URL+"/drop")
	send(write, refused)
	send(search, hs.URL+"/limited")
	send(search, hs.URL+"/wait")
	send(search, hs.URL+"/fail")
	want := []adapter.CallObservation{
		{Route: "r1", Kind: adapter.KindWrite, Outcome: adapter.Outcome2xx},
		{Route: "r1", Kind: adapter.KindWrite, Outcome: adapter.OutcomeUnknown},
		{Route: "r1", Kind: adapter.KindWrite, Outcome: adapter.OutcomeNotSent},
		{Route: "r1", Kind: adapter.KindSearch, Outcome: adapter.Outcome4xx, RateLimited: true},
		{Route: "r1", Kind: adapter.KindSearch, Outcome: adapter.Outcome5xx, RateLimited: true},
		{Route: "r1", Kind: adapter.KindSearch, Outcome: adapter.Outcome5xx},
	}
	if !slices.Equal(rec.got, want) {
		t.Fatalf("observed\n%+v\nwant\n%+v", rec.got, want)
	}
}
