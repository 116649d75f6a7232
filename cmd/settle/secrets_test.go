package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/fakeapi"
)

// echoToken is the route's credential. It is shaped like a Stripe key
// (lowercase, so it also passes as an error code) and echoed by the
// hostile API below in every field it answers.
const echoToken = "sk_live_4f9c2e7a1b8d3e6c5a0f9b2d"

// echoAPI is an external API that plants the bearer token it receives —
// whole, its tail, its head — in every response field: error codes and
// messages, ids, URLs, authors, parents, visibility, versions, status
// codes and partial effects. It counts the posts it accepts.
type echoAPI struct {
	*httptest.Server
	posts atomic.Int64
}

func newEchoAPI(t *testing.T) *echoAPI {
	a := &echoAPI{}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

func (a *echoAPI) serve(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if r.URL.Path == "/live" || strings.HasPrefix(r.URL.Path, "/live/") {
		w.WriteHeader(http.StatusOK) // live URLs are public
		return
	}
	if tok != echoToken {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	head, tail := tok[:14], tok[10:]
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Echo", tok)
	item := func(body string) map[string]any {
		return map[string]any{"id": "p_" + tok, "url": a.URL + "/live/" + tail, "author_id": tok, "parent_id": head + "-parent",
			"visibility": tail, "created_at": time.Now().UTC().Format(time.RFC3339), "body": body, "marker": tok}
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/posts":
		var in struct{ Body string }
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &in)
		switch in.Body {
		case "reject":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"code":%q,"message":%q}}`, tok, "bad token "+tok)
		case "lost":
			a.posts.Add(1)
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, `{"error":{"code":%q}}`, tok)
		case "tail":
			a.posts.Add(1)
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":%q,"url":%q}`, "p_"+tail, a.URL+"/live/"+strings.ToUpper(tail))
		default:
			a.posts.Add(1)
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(item(in.Body))
		}
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/accounts/"):
		_ = json.NewEncoder(w).Encode(map[string]any{"items": []any{item("lost"), item("something else " + tok)}})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/posts/"):
		_ = json.NewEncoder(w).Encode(item("ok"))
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/status/"):
		_ = json.NewEncoder(w).Encode(map[string]any{"state": "failed", "code": tok, "external_id": tok, "url": a.URL + "/live/" + tail,
			"version": head, "applied_version": tail, "partial_effects": []string{tok, "charge " + tail}})
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"code":%q}}`, tok)
	}
}

const echoRoutes = `version: 1
routes:
  - name: echo_post
    base_url: ${env:ECHO_BASE_URL}
    headers:
      Authorization: Bearer ${env:ECHO_TOKEN}
    payload:
      fields:
        body: {type: string, required: true}
    write:
      method: POST
      url: "{{base}}/v1/posts"
      body:
        account: "{{account}}"
        body: "{{payload.body}}"
      error_code: $.error.code
      response:
        external_id: $.id
        live_url: $.url
    search:
      url: "{{base}}/v1/accounts/{{account}}/posts?since={{from}}&until={{to}}"
      items: $.items
      fields:
        external_id: $.id
        live_url: $.url
        author_id: $.author_id
        parent_id: $.parent_id
        visibility: $.visibility
        created_at: $.created_at
        payload: {body: $.body}
    readback:
      url: "{{base}}/v1/posts/{{external_id}}"
    capabilities:
      search: true
    policy:
      first_write: auto
      retry: never
      retry_budget: 0
      attempt_deadline: 10s
      search_before: 1m
      search_after: 1m
      clock_skew: 1s
  - name: echo_status
    base_url: ${env:ECHO_BASE_URL}
    headers:
      Authorization: Bearer ${env:ECHO_TOKEN}
    write:
      method: POST
      url: "{{base}}/v1/posts"
      body:
        account: "{{account}}"
        body: "{{payload.body}}"
      error_code: $.error.code
      response:
        external_id: $.id
        live_url: $.url
    status:
      url: "{{base}}/v1/status/{{request_id}}"
      credential_scoped: true
      state: $.state
      external_id: $.external_id
      live_url: $.url
      version: $.version
      applied_version: $.applied_version
      code: $.code
      partial_effects: $.partial_effects
    capabilities:
      status_query: true
    policy:
      first_write: auto
      retry: never
      retry_budget: 0
      attempt_deadline: 10s
      search_before: 1m
      search_after: 1m
      clock_skew: 1s
`

// An external API that echoes the route's credential in every response
// field: the token, and every 8-byte part of it, appears nowhere settle
// keeps or shows — not in the JetStream files, the views, API answers,
// logs, metrics, the CLI or audit timelines.
func TestEchoedSecretsAreScrubbedEverywhere(t *testing.T) {
	t.Parallel() // processes and waits: overlaps the package's other long tests
	echo := newEchoAPI(t)
	dir := t.TempDir()
	routes := filepath.Join(dir, "routes.yaml")
	if err := os.WriteFile(routes, []byte(echoRoutes), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"ECHO_BASE_URL=" + echo.URL, "ECHO_TOKEN=" + echoToken}
	if code, out := runBinary(t, env, "routes", "check", routes); code != 0 {
		t.Fatalf("routes check: %s", out)
	}
	data := filepath.Join(dir, "data")
	s := startServeRoutes(t, data, routes, env)
	var seen strings.Builder
	var mu sync.Mutex
	record := func(r reply) reply {
		mu.Lock()
		defer mu.Unlock()
		seen.WriteString(r.raw)
		for k, v := range r.header {
			seen.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
		return r
	}
	var ids []string
	for _, c := range []struct{ route, body string }{{"echo_post", "reject"}, {"echo_post", "ok"}, {"echo_post", "tail"}, {"echo_post", "lost"}, {"echo_status", "lost"}} {
		r := record(s.call("POST", "/v1/intents", map[string]any{"route": c.route, "account": "acct_1", "request_id": c.route + ":" + c.body,
			"payload": map[string]any{"body": c.body}}))
		if r.code != 201 {
			t.Fatalf("submit %s/%s: %d %s", c.route, c.body, r.code, r.raw)
		}
		ids = append(ids, r.body["intent_id"].(string))
	}
	// Let reconciliation read the echoes (search, readback, status) into
	// the log: every intent but the rejected one moves past its write.
	for _, id := range ids[1:] {
		deadline := time.Now().Add(90 * time.Second)
		for {
			r := s.call("GET", "/v1/intents/"+id, nil)
			if strings.Contains(r.raw, "ReadbackFailed") || strings.Contains(r.raw, "ReadbackPassed") || strings.Contains(r.raw, "CandidateFound") ||
				strings.Contains(r.raw, "TargetFailed") || strings.Contains(r.raw, "CheckDeferred") || strings.Contains(r.raw, "ManualActionRequired") {
				record(r)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("intent %s was not reconciled: %s\n%s", id, r.raw, s.stderr.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	record(s.call("GET", "/v1/intents?limit=100", nil))
	metrics := record(s.call("GET", "/metrics", nil))
	if !strings.Contains(metrics.raw, "settle_external_calls_total") {
		t.Fatalf("metrics: %s", metrics.raw)
	}
	var cli strings.Builder
	for _, id := range ids {
		var out, errb strings.Builder
		m := &Main{Stdout: &out, Stderr: &errb}
		if err := m.Run(t.Context(), []string{"intents", "show", id, "--api", s.url}); err != nil {
			t.Fatalf("intents show: %v %s", err, errb.String())
		}
		cli.WriteString(out.String())
	}
	s.stop()
	if echo.posts.Load() != 4 {
		t.Fatalf("the API took %d posts, want 4", echo.posts.Load())
	}
	for _, id := range ids {
		_, out := runBinary(t, nil, "audit", "--data", data, "--intent", id)
		cli.WriteString(out)
	}

	places := map[string]string{"api answers": seen.String(), "serve output": s.stderr.String(), "cli and audit": cli.String()}
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		places[path] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stream := 0
	for where := range places {
		if strings.Contains(where, string(filepath.Separator)+"jetstream"+string(filepath.Separator)) && strings.Contains(places[where], "settle.intents") {
			stream++
		}
	}
	if stream == 0 {
		t.Fatal("no JetStream block file with settle's events was scanned")
	}
	low := strings.ToLower(echoToken)
	for where, text := range places {
		text = strings.ToLower(text)
		for i := 0; i+8 <= len(low); i++ {
			if part := low[i : i+8]; strings.Contains(text, part) {
				t.Errorf("%q, part of the route's token, is in %s", part, where)
				break
			}
		}
	}
	// Sanity: the response fields really were planted and recorded (as
	// redactions), so the scan above looked at the right places.
	if !strings.Contains(seen.String(), "[redacted]") {
		t.Fatalf("no redaction in the API answers: the echo did not reach the log?")
	}
}

// startServeRoutes starts serve in dev mode with another route file.
func startServeRoutes(t *testing.T, data, routes string, env []string) *server {
	t.Helper()
	extra := []string{"--routes", routes}
	for _, e := range env {
		extra = append(extra, "ENV:"+e)
	}
	return startServe(t, data, fakeapi.NewSocialAPI(t), extra...)
}
