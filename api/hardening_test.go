package api

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Queries the API cannot honour are refused, never answered without the
// caller's filters: more parameters than accepted (Go's parser drops
// every one past 10,000), duplicates, unknown names, and numbers that
// overflow.
func TestQueriesAreCheckedBeforeServing(t *testing.T) {
	e := newMemEnv(t, envOptions{tokens: tenancyTokens(), maxWait: 100 * time.Millisecond})
	if r := e.do("POST", "/v1/intents", secretAdmin, submitBodyJSON("social_post", "acct_1", "q-1", `{"body":"q"}`)); r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	many := func(n int) string {
		var b strings.Builder
		b.WriteString("state=confirmed")
		for k := 1; k < n; k++ {
			fmt.Fprintf(&b, "&p%d=1", k)
		}
		return b.String()
	}
	for name, c := range map[string]struct {
		method, path, body, field string
	}{
		"10001 parameters":         {"GET", "/v1/intents?" + many(10001), "", "query"},
		"33 parameters":            {"GET", "/v1/intents?" + many(MaxQueryParams+1), "", "query"},
		"duplicate on list":        {"GET", "/v1/intents?state=unknown&state=confirmed", "", "state"},
		"duplicate wait on submit": {"POST", "/v1/intents?wait=1s&wait=2s", submitBodyJSON("social_post", "acct_1", "q-2", `{"body":"q"}`), "wait"},
		"unknown on list":          {"GET", "/v1/intents?stat=unknown", "", "stat"},
		"unknown on get":           {"GET", "/v1/intents/in_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa?x=1", "", "x"},
		"malformed":                {"GET", "/v1/intents?state=%zz", "", "query"},
		"wait overflows int64":     {"POST", "/v1/intents?wait=9223372036854775807", submitBodyJSON("social_post", "acct_1", "q-3", `{"body":"q"}`), "wait"},
		"wait beyond int64":        {"POST", "/v1/intents?wait=99999999999999999999", submitBodyJSON("social_post", "acct_1", "q-4", `{"body":"q"}`), "wait"},
		"wait duration overflows":  {"POST", "/v1/intents?wait=9999999999h", submitBodyJSON("social_post", "acct_1", "q-5", `{"body":"q"}`), "wait"},
		"limit overflows":          {"GET", "/v1/intents?limit=99999999999999999999", "", "limit"},
	} {
		r := e.do(c.method, c.path, secretAdmin, c.body)
		m := r.problem(t, http.StatusBadRequest, c.field)
		if d, _ := m["detail"].(string); strings.Contains(d, "negative") {
			t.Errorf("%s: %s", name, d)
		}
	}
	if n := e.mem.events(); n != 1 {
		t.Fatalf("a refused submit recorded: %d events, want q-1's IntentRecorded", n)
	}
	// Within the bounds, a query is served.
	if r := e.do("GET", "/v1/intents?state=recorded&limit=5", secretAdmin, ""); r.code != http.StatusOK || !strings.Contains(string(r.body), "q-1") {
		t.Fatalf("a good query: %d %s", r.code, r.body)
	}
	// A wait beyond MaxWait is bounded, not refused.
	if r := e.do("POST", "/v1/intents?wait=3600", secretAdmin, submitBodyJSON("social_post", "acct_1", "q-1", `{"body":"q"}`)); r.code != http.StatusOK {
		t.Fatalf("a long wait: %d %s", r.code, r.body)
	}
}

// The server's timeouts and header limit: a body that stops arriving is
// cut off at ReadTimeout with 408 and nothing recorded; headers past
// MaxHeaderBytes get 431.
func TestHTTPServerTimeoutsAndHeaderLimit(t *testing.T) {
	e := newMemEnv(t, envOptions{})
	cfg := e.srv.cfg
	cfg.Tokens = testTokens()
	cfg.ReadTimeout = 300 * time.Millisecond
	cfg.ReadHeaderTimeout = 300 * time.Millisecond
	cfg.MaxHeaderBytes = 8 << 10
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer()
	if hs.ReadTimeout != cfg.ReadTimeout || hs.IdleTimeout != cfg.IdleTimeout || hs.MaxHeaderBytes != cfg.MaxHeaderBytes || hs.ReadHeaderTimeout != cfg.ReadHeaderTimeout {
		t.Fatalf("HTTPServer: %+v", hs)
	}
	if d := DefaultConfig(); d.ReadTimeout <= 0 || d.IdleTimeout <= 0 || d.MaxHeaderBytes <= 0 {
		t.Fatalf("defaults without limits: %+v", d)
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = hs
	ts.Start()
	t.Cleanup(ts.Close)

	// Headers and 20 of 200 body bytes, then silence.
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := submitBodyJSON("social_post", "acct_1", "slow-body", `{"body":"`+strings.Repeat("x", 200)+`"}`)
	fmt.Fprintf(conn, "POST /v1/intents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		secretAdmin, len(body), body[:20])
	// A bound for a broken server, far above the timeout (not a measurement).
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("stalled body: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if n := e.mem.events(); n != 0 {
		t.Fatalf("a stalled body recorded %d events", n)
	}

	req, _ := http.NewRequest("GET", ts.URL+"/v1/intents", nil)
	req.Header.Set("Authorization", "Bearer "+secretAdmin)
	req.Header.Set("X-Padding", strings.Repeat("p", 16<<10))
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("large headers: %d", res.StatusCode)
	}
}

// A body sent with a content coding is refused, naming the header — the
// API reads bodies as sent: a body labelled gzip that is not compressed
// is not read as if the label were absent, and a compressed one is not
// read at all. Nothing is recorded; identity is accepted.
func TestContentEncodingIsRefused(t *testing.T) {
	e := newMemEnv(t, envOptions{})
	plain := submitBodyJSON("social_post", "acct_1", "ce-1", `{"body":"encoded?"}`)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(plain))
	_ = zw.Close()
	for name, c := range map[string]struct{ body, encoding string }{
		"gzip label, plain body": {plain, "gzip"},
		"gzip label, gzip body":  {gz.String(), "gzip"},
		"upper case":             {plain, "GZIP"},
		"identity then gzip":     {plain, "identity, gzip"},
		"deflate":                {plain, "deflate"},
		"an unknown coding":      {plain, "x-settle"},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.do("POST", "/v1/intents", secretAdmin, c.body, "Content-Encoding", c.encoding)
			p := r.problem(t, http.StatusUnsupportedMediaType, "Content-Encoding")
			if r.header.Get("Accept-Encoding") != "identity" || !strings.Contains(p["detail"].(string), "Content-Encoding") {
				t.Fatalf("Accept-Encoding %q: %s", r.header.Get("Accept-Encoding"), r.body)
			}
		})
	}
	r := e.do("POST", "/v1/intents/in_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/approve", secretOperator, `{"reason":"x"}`, "Content-Encoding", "gzip")
	r.problem(t, http.StatusUnsupportedMediaType, "Content-Encoding")
	if n := e.mem.events(); n != 0 {
		t.Fatalf("refused bodies recorded %d events", n)
	}
	if r := e.do("POST", "/v1/intents", secretAdmin, plain, "Content-Encoding", "identity"); r.code != http.StatusCreated {
		t.Fatalf("identity: %d %s", r.code, r.body)
	}
}
