package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/service"
	"github.com/settle-dev/settle/service/servicetest"
)

var t0 = servicetest.T0

// Test tokens. Secrets are long random-looking strings so that a scan for
// them cannot match by accident.
const (
	secretAdmin     = "tok_admin_7f3a9c2e5b8d1f4a6c0e"
	secretReader    = "tok_reader_2b7e9d4c1a8f3e6b5d0c"
	secretSubmitter = "tok_submit_9c4e1b7a3f6d2e8c5a0b"
	secretAgent     = "tok_agent_6e1c8a3f9b2d7e4c5a0d"
	secretOperator  = "tok_operate_5a8c3e1f7b2d9e4c6a0f"
	secretRouteLtd  = "tok_routeltd_3e9b6c2a8f1d5e7c4b0a"
	secretAcctLtd   = "tok_acctltd_8d2f5b9e1c7a4e3b6d0c"
	// routeSecret is the fake social API's bearer token (the route's own
	// credential, held by the adapter).
	routeSecret = servicetest.RouteSecret
)

func testTokens() []Token {
	all := []string{ScopeSubmit, ScopeRead, ScopeOperate}
	return []Token{
		{Name: "admin", Secret: secretAdmin, Scopes: all},
		{Name: "reader", Secret: secretReader, Scopes: []string{ScopeRead}},
		{Name: "submitter", Secret: secretSubmitter, Scopes: []string{ScopeSubmit}},
		{Name: "agent", Secret: secretAgent, Scopes: []string{ScopeSubmit, ScopeRead}},
		{Name: "ops", Secret: secretOperator, Scopes: []string{ScopeOperate, ScopeRead}},
		{Name: "route-limited", Secret: secretRouteLtd, Scopes: all, Routes: []string{"social_other"}},
		{Name: "account-limited", Secret: secretAcctLtd, Scopes: all, Accounts: []string{"acct_other"}},
	}
}

type envOptions struct {
	dev    bool
	tokens []Token
	// maxWait bounds ?wait= (default 30s).
	maxWait time.Duration
	// maxInFlight and readyChecks are the Config's (faults_test.go).
	maxInFlight int
	readyChecks []ReadyCheck
	// accessLog is the Config's: every request logged (secrets_test.go
	// checks that no line of it holds a secret).
	accessLog bool
}

// env is the API on a loopback httptest server over a servicetest.Env:
// a real embedded nats-server, the fake social API over real HTTP (bearer
// token routeSecret), a producer with three routes compiled from
// examples/routes/social.yaml (servicetest.SocialRoutes), a running projector on
// SQLite in t.TempDir() and the service over them. Every component logs
// into Logs. A newMemEnv has no servicetest.Env.
type env struct {
	*servicetest.Env
	t    testing.TB
	srv  *Server
	http *httptest.Server
	// seen, when set, collects every response (for the secret scan).
	seen *transcript
	// mem is the in-memory intent store of a newMemEnv (nil with NATS).
	mem *memIntents
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	metrics := NewMetrics()
	// Every route's external calls are measured, as node wires them.
	routes := func(t testing.TB, api *fakeapi.SocialAPI) []adapter.Route {
		rs := servicetest.SocialRoutes(t, api)
		for k := range rs {
			rs[k].Observer = metrics
		}
		return rs
	}
	k := servicetest.New(t, servicetest.Options{Routes: routes, Actor: "api-writer"})
	cfg := DefaultConfig()
	cfg.Service = k.Svc
	cfg.Log, cfg.Now, cfg.Logger, cfg.Metrics = k.Store, k.Clock.Now, k.Logger, metrics
	cfg.AccessLog = o.accessLog
	srv, hs := serveEnv(t, cfg, o)
	return &env{Env: k, t: t, srv: srv, http: hs}
}

// newService is the service over intents and views, on clock now.
func newService(t testing.TB, intents service.Intents, views service.Views, now func() time.Time) *service.Service {
	t.Helper()
	sc := service.DefaultConfig()
	sc.Intents, sc.Views, sc.Now = intents, views, now
	svc, err := service.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// serveEnv applies the options to cfg and serves the API on a loopback
// httptest server until the test ends.
func serveEnv(t testing.TB, cfg Config, o envOptions) (*Server, *httptest.Server) {
	t.Helper()
	cfg.Dev = o.dev
	if o.dev {
		cfg.Addr = "127.0.0.1:0"
	}
	cfg.Tokens = o.tokens
	if cfg.Tokens == nil && !o.dev {
		cfg.Tokens = testTokens()
	}
	if o.maxWait > 0 {
		cfg.MaxWait = o.maxWait
	}
	if o.maxInFlight > 0 {
		cfg.MaxInFlight = o.maxInFlight
	}
	cfg.ReadyChecks = o.readyChecks
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return srv, hs
}

func (e *env) history(route, intentID string) []events.Event {
	e.t.Helper()
	if e.mem != nil {
		h, _, err := e.mem.Load(context.Background(), intentID)
		if err != nil {
			e.t.Fatal(err)
		}
		return h.Events
	}
	return e.History(route, intentID)
}

func (e *env) intent(route, intentID string) *fsm.Intent {
	e.t.Helper()
	i, err := fsm.Fold(e.history(route, intentID))
	if err != nil {
		e.t.Fatal(err)
	}
	return i
}

// manualIntent creates an intent in manual_action: two exact duplicates
// behind a dropped response.
func (e *env) manualIntent(requestID string) string {
	e.t.Helper()
	e.Social.Next(fakeapi.Duplicate().Dropped())
	res, err := e.Prod.Execute(context.Background(), producer.Request{Route: "social_post", Account: "acct_1",
		RequestID: requestID, Payload: json.RawMessage(`{"body":"dup ` + requestID + `"}`)})
	if err != nil {
		e.t.Fatal(err)
	}
	if i := e.Settle("social_post", res.IntentID); i.State != fsm.ManualAction {
		e.t.Fatalf("want manual_action, got %s", i.State)
	}
	return res.IntentID
}

// response is one HTTP exchange.
type response struct {
	code   int
	header http.Header
	body   []byte
}

func (r *response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response %d is not a JSON object: %v: %s", r.code, err, r.body)
	}
	return m
}

func (r *response) str(t *testing.T, key string) string {
	t.Helper()
	s, _ := r.json(t)[key].(string)
	return s
}

// problem checks that r is an RFC 9457 problem with status code (and,
// when field is not empty, naming field) and returns it.
func (r *response) problem(t *testing.T, code int, field string) map[string]any {
	t.Helper()
	if r.code != code {
		t.Fatalf("status %d, want %d: %s", r.code, code, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json (%s)", ct, r.body)
	}
	m := r.json(t)
	for _, k := range []string{"type", "title", "detail"} {
		if s, _ := m[k].(string); s == "" {
			t.Fatalf("problem without %s: %s", k, r.body)
		}
	}
	if st, _ := m["status"].(float64); int(st) != code {
		t.Fatalf("problem status %v, want %d", m["status"], code)
	}
	if field != "" && m["field"] != field {
		t.Fatalf("problem field %v, want %q: %s", m["field"], field, r.body)
	}
	return m
}

// transcript collects every response body and header the tests saw (for
// the secret scan).
type transcript struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (tr *transcript) add(r *response) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for k, vs := range r.header {
		tr.buf.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
	}
	tr.buf.Write(r.body)
	tr.buf.WriteByte('\n')
}

func (tr *transcript) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.buf.String()
}

// do sends one request to the API. token "" sends no Authorization; hdr
// are extra header pairs.
func (e *env) do(method, path, token, body string, hdr ...string) *response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.http.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := &response{code: res.StatusCode, header: res.Header, body: b}
	e.seen.add(r)
	return r
}

func submitBodyJSON(route, account, requestID, payload string, extra ...string) string {
	m := map[string]any{"route": route, "account": account, "payload": json.RawMessage(payload)}
	if requestID != "" {
		m["request_id"] = requestID
	}
	for i := 0; i+1 < len(extra); i += 2 {
		var v any
		if err := json.Unmarshal([]byte(extra[i+1]), &v); err != nil {
			v = extra[i+1]
		}
		m[extra[i]] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// countType counts h's events of type t; counting WriteStarted counts
// every write start, a new intent's IntentStarted included.
func countType(h []events.Event, t events.Type) int {
	n := 0
	for _, e := range h {
		if e.Type == t || (t == events.WriteStarted && e.Type.StartsWrite()) {
			n++
		}
	}
	return n
}

func lastOf(h []events.Event, t events.Type) *events.Event {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Type == t {
			return &h[i]
		}
	}
	return nil
}

// newLoopbackServer serves h on a loopback httptest server until the test ends.
func newLoopbackServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs
}

func mustEncode(t *testing.T, e events.Event) []byte {
	t.Helper()
	b, err := events.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
