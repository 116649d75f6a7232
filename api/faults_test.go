package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/ledger"
)

// A log that cannot take writes (a full disk, a clock off, a damaged log:
// the store is blocked) answers a submit 503 at once, saying why in fixed
// words and that nothing was recorded — and indeed nothing is on the log
// and nothing was sent. Once unblocked, the same submit is served.
func TestSubmitOnABlockedLogIs503AndWritesNothing(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, c := range []struct {
		reason error
		says   string
	}{
		{errors.Errorf("%w: /data: 0 bytes free", ledger.ErrDiskFull), "the log's disk is full"},
		{errors.Errorf("%w: 30s off", ledger.ErrClockOffset), "clock is off"},
		{errors.Errorf("%w: seq 4..9", ledger.ErrLogDamaged), "the log lost events"},
		{ledger.ErrLogVerifying, "being verified"},
	} {
		e.Store.Block("test", c.reason)
		r := e.do("POST", "/v1/intents", secretAdmin, submitBodyJSON("social_post", "acct_1", "blocked:1", `{"body":"not now"}`))
		var p Problem
		_ = json.Unmarshal(r.body, &p)
		if r.code != http.StatusServiceUnavailable || p.Type != ProblemTypePrefix+ProbUnavailable ||
			!strings.Contains(p.Detail, c.says) || !strings.Contains(p.Detail, "nothing was recorded or written") || r.header.Get("Retry-After") == "" {
			t.Fatalf("blocked by %v: %d %s (Retry-After %q)", c.reason, r.code, r.body, r.header.Get("Retry-After"))
		}
		if strings.Contains(string(r.body), "/data") || strings.Contains(string(r.body), "seq 4") {
			t.Fatalf("the problem carries the internal reason: %s", r.body)
		}
	}
	info, err := e.Store.Stream().Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 || e.Social.Writes() != 0 {
		t.Fatalf("a refused submit wrote: %d events, %d API writes", info.State.Msgs, e.Social.Writes())
	}
	e.Store.Unblock("test")
	if r := e.do("POST", "/v1/intents", secretAdmin, submitBodyJSON("social_post", "acct_1", "blocked:1", `{"body":"not now"}`)); r.code != http.StatusCreated {
		t.Fatalf("after unblocking: %d %s", r.code, r.body)
	}
}

// API requests beyond MaxInFlight are refused at once with 503 and
// Retry-After, and counted; the ones in flight finish.
func TestInFlightBoundShedsTheExcess(t *testing.T) {
	e := newEnv(t, envOptions{maxInFlight: 1})
	e.Social.Next(fakeapi.Delay(2 * time.Second))
	var wg sync.WaitGroup
	var first *response
	wg.Add(1)
	go func() {
		defer wg.Done()
		first = e.do("POST", "/v1/intents", secretAdmin, submitBodyJSON("social_post", "acct_1", "slow:1", `{"body":"slow"}`))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for e.Social.Writes() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the slow write never reached the API")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := e.do("GET", "/v1/intents", secretAdmin, "")
	if r.code != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("a request past the bound: %d %s", r.code, r.body)
	}
	if code := e.do("GET", "/healthz", "", "").code; code != 200 {
		t.Fatalf("/healthz is not bounded: %d", code)
	}
	wg.Wait()
	if first.code != http.StatusCreated {
		t.Fatalf("the request in flight: %d %s", first.code, first.body)
	}
	m := e.do("GET", "/metrics", secretAdmin, "")
	if !strings.Contains(string(m.body), "settle_api_shed_total 1") || !strings.Contains(string(m.body), "settle_api_inflight_requests 1") {
		t.Fatalf("metrics: %s", grepLines(string(m.body), "settle_api_"))
	}
}

// /readyz runs the wiring's checks and names every failed one.
func TestReadyzNamesFailedChecks(t *testing.T) {
	var mu sync.Mutex
	var diskErr error
	e := newEnv(t, envOptions{readyChecks: []ReadyCheck{
		{Name: "disk", Check: func(context.Context) error { mu.Lock(); defer mu.Unlock(); return diskErr }},
		{Name: "clock", Check: func(context.Context) error { return nil }},
	}})
	if r := e.do("GET", "/readyz", "", ""); r.code != 200 || !strings.Contains(string(r.body), `"disk":"ok"`) {
		t.Fatalf("ready: %d %s", r.code, r.body)
	}
	mu.Lock()
	diskErr = ledger.ErrDiskFull
	mu.Unlock()
	r := e.do("GET", "/readyz", "", "")
	if r.code != 503 || !strings.Contains(string(r.body), `"disk":"failed"`) || !strings.Contains(string(r.body), `"clock":"ok"`) ||
		!strings.Contains(string(r.body), "not ready: disk failed") {
		t.Fatalf("not ready: %d %s", r.code, r.body)
	}
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A handler served beside the API (/mcp, through Instrument) shares the
// API's MaxInFlight bound: past it, requests to either are refused with
// 503 and Retry-After, and the one in flight finishes.
func TestInstrumentedHandlerSharesTheInFlightBound(t *testing.T) {
	e := newEnv(t, envOptions{maxInFlight: 1})
	entered, release := make(chan struct{}), make(chan struct{})
	var inside atomic.Int32
	h := e.srv.Instrument("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inside.Add(1) == 1 { // the first holds its slot until released
			entered <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}))
	first := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(first, httptest.NewRequest("POST", "/mcp", strings.NewReader(`{}`)))
	}()
	<-entered
	second := httptest.NewRecorder()
	h.ServeHTTP(second, httptest.NewRequest("POST", "/mcp", strings.NewReader(`{}`)))
	if second.Code != http.StatusServiceUnavailable || second.Header().Get("Retry-After") == "" {
		t.Fatalf("a second /mcp request past the bound: %d %s", second.Code, second.Body)
	}
	if r := e.do("GET", "/v1/intents", secretAdmin, ""); r.code != http.StatusServiceUnavailable {
		t.Fatalf("an API request while /mcp holds the bound: %d %s", r.code, r.body)
	}
	close(release)
	<-done
	if first.Code != http.StatusOK {
		t.Fatalf("the /mcp request in flight: %d", first.Code)
	}
	if r := e.do("GET", "/v1/intents", secretAdmin, ""); r.code != http.StatusOK {
		t.Fatalf("after it: %d %s", r.code, r.body)
	}
}
