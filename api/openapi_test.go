package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	legacyrouter "github.com/getkin/kin-openapi/routers/legacy"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
)

// specChecker validates real responses against /openapi.json with
// kin-openapi (OpenAPI 3.1, JSON Schema 2020-12) and records which
// documented (operation, status) pairs were seen.
type specChecker struct {
	t       *testing.T
	doc     *openapi3.T
	router  routers.Router
	covered map[string]bool
}

func newSpecChecker(t *testing.T) *specChecker {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPI())
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	doc.Servers = nil
	router, err := legacyrouter.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	return &specChecker{t: t, doc: doc, router: router, covered: map[string]bool{}}
}

// check validates one exchange: the operation must be documented, the
// status documented for it, and headers and body must match its schema.
func (c *specChecker) check(method, target string, code int, header http.Header, body []byte) {
	c.t.Helper()
	req := httptest.NewRequest(method, target, nil)
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Errorf("%s %s: not documented: %v", method, target, err)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 code,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		c.t.Errorf("%s %s → %d does not validate against /openapi.json: %v\n%s", method, target, code, err, clip(string(body), 2000))
		return
	}
	c.covered[route.Operation.OperationID+" "+fmt.Sprint(code)] = true
}

// checkProblem validates a body against components.schemas.Problem (for
// 404 on unknown paths and 405, which no operation documents).
func (c *specChecker) checkProblem(what string, r *response) {
	c.t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		c.t.Errorf("%s: content type %q", what, ct)
	}
	var v any
	if err := json.Unmarshal(r.body, &v); err != nil {
		c.t.Errorf("%s: %v", what, err)
		return
	}
	if err := c.doc.Components.Schemas["Problem"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		c.t.Errorf("%s does not validate as a Problem: %v", what, err)
	}
}

// Every response of every endpoint — successes and errors, in dev and
// token mode — validates against the served /openapi.json; and every
// documented (operation, status) pair is exercised.
func TestEveryResponseValidatesAgainstOpenAPI(t *testing.T) {
	c := newSpecChecker(t)
	e := newEnv(t, envOptions{tokens: tenancyTokens(), maxWait: 2 * time.Second})
	do := func(method, path, token, body string, hdr ...string) *response {
		t.Helper()
		r := e.do(method, path, token, body, hdr...)
		c.check(method, path, r.code, r.header, r.body)
		return r
	}
	want := func(r *response, code int) {
		t.Helper()
		if r.code != code {
			t.Fatalf("status %d, want %d: %s", r.code, code, r.body)
		}
	}
	sub := func(rid, body string, extra ...string) string {
		return submitBodyJSON("social_post", "acct_1", rid, `{"body":"`+body+`"}`, extra...)
	}

	// Public endpoints.
	want(do("GET", "/healthz", "", ""), 200)
	want(do("GET", "/readyz", "", ""), 200)
	want(do("GET", "/openapi.json", "", ""), 200)
	want(do("GET", "/console", "", ""), 200)
	for _, p := range []string{"/healthz?x=1", "/readyz?x=1", "/openapi.json?x=1", "/console?x=1", "/metrics?x=1"} {
		want(do("GET", p, secretAdmin, ""), 400)
	}

	// Submit: created with each outcome, replays, dry runs, refusals.
	e.Social.Next(fakeapi.CommitThenDrop(), fakeapi.Status(400))
	unknown := do("POST", "/v1/intents", secretAdmin, sub("oa-unknown", "u"))
	want(unknown, 201)
	want(do("POST", "/v1/intents", secretAdmin, sub("oa-rejected", "r")), 201)
	ok := do("POST", "/v1/intents", secretAdmin, sub("oa-ok", "ok"))
	want(ok, 201)
	want(do("POST", "/v1/intents", secretAdmin, submitBodyJSON("social_approval", "acct_1", "oa-approval", `{"body":"a"}`)), 201)
	want(do("POST", "/v1/intents", secretAdmin, sub("oa-ok", "ok")), 200)
	want(do("POST", "/v1/intents", secretAdmin, sub("oa-dry", "d", "dry_run", "true")), 200)
	want(do("POST", "/v1/intents", secretAdmin, sub("oa-ok", "ok", "dry_run", "true")), 200)
	want(do("POST", "/v1/intents?wait=1s", secretAdmin, sub("oa-unknown", "u")), 200)
	want(do("POST", "/v1/intents", secretAdmin, sub("oa-ok", "other")), 422)
	want(do("POST", "/v1/intents", secretSubmitter, sub("oa-ok", "ok")), 403)
	want(do("POST", "/v1/intents", "", sub("oa-x", "x")), 401)
	want(do("POST", "/v1/intents", secretAdmin+"x", sub("oa-x", "x")), 401)
	want(do("POST", "/v1/intents", secretReader, sub("oa-x", "x")), 403)
	for _, bad := range []struct{ body, hdr string }{{`{"route":`, ""}, {sub("", "x"), ""}, {sub("oa-x", "x"), `"unterminated`}} {
		h := []string{}
		if bad.hdr != "" {
			h = []string{"Idempotency-Key", bad.hdr}
		}
		want(do("POST", "/v1/intents", secretAdmin, bad.body, h...), 400)
	}
	want(do("POST", "/v1/intents?wait=9223372036854775807", secretAdmin, sub("oa-x", "x")), 400)
	want(do("POST", "/v1/intents", secretAdmin, sub("oa-x", "x"), "Content-Type", "text/plain"), 415)
	want(do("POST", "/v1/intents", secretAdmin, `{"route":"`+strings.Repeat("x", MaxBodyBytes)+`"}`), 413)

	// An in-flight write: 409.
	e.Social.Next(fakeapi.Delay(2 * time.Second))
	before := e.Social.Writes()
	slow := make(chan *response, 1)
	go func() { slow <- e.do("POST", "/v1/intents", secretAdmin, sub("oa-slow", "s")) }()
	for i := 0; e.Social.Writes() <= before; i++ {
		if i > 4000 {
			t.Fatal("the slow write never reached the fake")
		}
		time.Sleep(5 * time.Millisecond)
	}
	want(do("POST", "/v1/intents", secretAdmin, sub("oa-slow", "s")), 409)
	r := <-slow
	c.check("POST", "/v1/intents", r.code, r.header, r.body)

	// Reads.
	e.CatchUp()
	want(do("GET", "/v1/intents", secretAdmin, ""), 200)
	want(do("GET", "/v1/intents?state=unknown&limit=1", secretAdmin, ""), 200)
	want(do("GET", "/v1/intents?state=nope", secretAdmin, ""), 400)
	want(do("GET", "/v1/intents?q=oa-ok&request_id=oa-ok&route=social_post", secretAdmin, ""), 200)
	want(do("GET", "/v1/stats", secretAdmin, ""), 200)
	want(do("GET", "/v1/stats?route=social_post&window=15m", secretAdmin, ""), 200)
	want(do("GET", "/v1/stats?window=nope", secretAdmin, ""), 400)
	want(do("GET", "/v1/stats", "", ""), 401)
	want(do("GET", "/v1/stats", secretSubmitter, ""), 403)
	want(do("GET", "/v1/intents", "", ""), 401)
	want(do("GET", "/v1/intents", secretSubmitter, ""), 403)
	id := ok.str(t, "intent_id")
	want(do("GET", "/v1/intents/"+id, secretAdmin, ""), 200)
	want(do("GET", "/v1/intents/in_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", secretAdmin, ""), 404)
	want(do("GET", "/v1/intents/nope", secretAdmin, ""), 400)
	want(do("GET", "/v1/intents/"+id, "", ""), 401)
	want(do("GET", "/v1/intents/"+id, secretRouteLtd, ""), 403)

	// Operator actions.
	approval := events.ScopedIntentID("default", "social_approval", "acct_1", "oa-approval")
	manual := e.manualIntent("oa-manual")
	for _, v := range []string{"approve", "resolve", "abandon"} {
		p := "/v1/intents/" + id + "/" + v
		body := `{"reason":"no"}`
		if v == "resolve" {
			body = `{"reason":"no","resolution":"abandoned"}`
		}
		want(do("POST", p, secretOperator, body), 409)
		want(do("POST", p, secretOperator, body, "Content-Type", "text/plain"), 415)
		want(do("POST", p, secretOperator, body, "Content-Encoding", "gzip"), 415)
		want(do("POST", p, secretOperator, `{"reason":"`+strings.Repeat("x", MaxBodyBytes)+`"}`), 413)
		want(do("POST", p, "", `{"reason":"x"}`), 401)
		want(do("POST", p, secretReader, `{"reason":"x"}`), 403)
		// The action is checked before the log is read: a valid one on no
		// intent is 404.
		want(do("POST", "/v1/intents/in_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/"+v, secretOperator, body), 404)
		want(do("POST", p, secretOperator, `{}`), 400)
	}
	want(do("POST", "/v1/intents/"+approval+"/approve", secretOperator, `{"reason":"go"}`), 200)
	want(do("POST", "/v1/intents/"+manual+"/resolve", secretOperator, `{"reason":"checked","resolution":"confirmed","external_id":"p_1","live_url":"https://x.example/p_1"}`), 200)
	want(do("POST", "/v1/intents/"+id+"/abandon", secretOperator, `{"reason":"stop"}`), 409)
	want(do("POST", "/v1/intents/"+approval+"/abandon", secretOperator, `{"reason":"stop"}`), 200)

	// Metrics.
	e.CatchUp()
	want(do("GET", "/metrics", secretAdmin, ""), 200)
	want(do("GET", "/metrics", "", ""), 401)
	want(do("GET", "/metrics", secretRouteLtd, ""), 403)

	// Paths and methods nobody documents answer problems too.
	r = e.do("DELETE", "/v1/intents", secretAdmin, "")
	want(r, 405)
	c.checkProblem("405", r)
	r = e.do("GET", "/v2/nothing", secretAdmin, "")
	want(r, 404)
	c.checkProblem("404", r)

	// Dev mode: a non-loopback Host is refused on every endpoint.
	dev := newEnv(t, envOptions{dev: true})
	evil := func(method, path string) {
		t.Helper()
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader(`{}`)
		}
		req, _ := http.NewRequest(method, dev.http.URL+path, body)
		req.Host = "evil.example"
		req.Header.Set("Content-Type", "application/json")
		res, err := dev.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 403 {
			t.Fatalf("dev mode, Host evil.example: %s %s → %d", method, path, res.StatusCode)
		}
		c.check(method, path, res.StatusCode, res.Header, b)
	}
	for _, p := range []string{"/healthz", "/readyz", "/openapi.json", "/console", "/metrics", "/v1/intents", "/v1/intents/" + id, "/v1/stats"} {
		evil("GET", p)
	}
	for _, v := range []string{"", "/" + id + "/approve", "/" + id + "/resolve", "/" + id + "/abandon"} {
		evil("POST", "/v1/intents"+v)
	}

	// 431, and 408 for a body that stops arriving, on every endpoint.
	cfg := e.srv.cfg
	cfg.Tokens = tenancyTokens()
	cfg.ReadTimeout, cfg.MaxHeaderBytes = 300*time.Millisecond, 8<<10
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = srv.HTTPServer()
	ts.Start()
	t.Cleanup(ts.Close)
	for _, op := range []struct{ method, path string }{{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/openapi.json"}, {"GET", "/console"},
		{"GET", "/metrics"}, {"POST", "/v1/intents"}, {"GET", "/v1/intents"}, {"GET", "/v1/intents/" + id}, {"GET", "/v1/stats"},
		{"POST", "/v1/intents/" + id + "/approve"}, {"POST", "/v1/intents/" + id + "/resolve"}, {"POST", "/v1/intents/" + id + "/abandon"}} {
		req, _ := http.NewRequest(op.method, ts.URL+op.path, nil)
		req.Header.Set("X-Padding", strings.Repeat("p", 16<<10))
		res, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 431 {
			t.Fatalf("%s %s with large headers: %d", op.method, op.path, res.StatusCode)
		}
		c.check(op.method, op.path, res.StatusCode, res.Header, b)
		if op.method != "POST" {
			continue
		}
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"reason\":", op.path, secretAdmin)
		_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		res, err = http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: no answer to a stalled body: %v", op.path, err)
		}
		b, _ = io.ReadAll(res.Body)
		res.Body.Close()
		conn.Close()
		if res.StatusCode != 408 {
			t.Fatalf("%s with a stalled body: %d %s", op.path, res.StatusCode, b)
		}
		c.check(op.method, op.path, res.StatusCode, res.Header, b)
	}

	// 409 history-unreadable: an intent whose history cannot be folded
	// (nothing recorded or written). The views know it as the token's
	// tenant's: an id alone names no tenant, and one they do not know is
	// not found.
	broken := events.ScopedIntentID("default", "social_post", "acct_1", "oa-broken")
	want(do("POST", "/v1/intents", secretAdmin, sub("oa-broken", "b")), 201)
	e.CatchUp()
	if _, err := e.Node.JS.Publish(context.Background(), events.Subject("social_post", broken), []byte(`{"not":"an event"}`)); err != nil {
		t.Fatal(err)
	}
	want(do("GET", "/v1/intents/"+broken, secretAdmin, ""), 409)
	want(do("POST", "/v1/intents/"+broken+"/approve", secretOperator, `{"reason":"x"}`), 409)
	want(do("POST", "/v1/intents/"+broken+"/resolve", secretOperator, `{"reason":"x","resolution":"abandoned"}`), 409)
	want(do("POST", "/v1/intents/"+broken+"/abandon", secretOperator, `{"reason":"x"}`), 409)
	want(do("POST", "/v1/intents", secretAdmin, sub("oa-broken", "b")), 409)

	// 503: the views closed (metrics, list), then NATS gone (the rest).
	e.Proj.Close()
	want(do("GET", "/metrics", secretAdmin, ""), 503)
	want(do("GET", "/v1/intents", secretAdmin, ""), 503)
	want(do("GET", "/v1/stats", secretAdmin, ""), 503)
	e.Node.Stop()
	want(do("GET", "/readyz", "", ""), 503)
	want(do("POST", "/v1/intents", secretAdmin, sub("oa-down", "d")), 503)
	want(do("GET", "/v1/intents/"+id, secretAdmin, ""), 503)
	for v, body := range map[string]string{"approve": `{"reason":"x"}`, "resolve": `{"reason":"x","resolution":"abandoned"}`, "abandon": `{"reason":"x"}`} {
		want(do("POST", "/v1/intents/"+id+"/"+v, secretOperator, body), 503)
	}

	// 500 elsewhere only answers a handler panic (recovered in
	// ServeHTTP): its answer is validated as written by that code.
	for _, op := range []struct{ method, path string }{{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/openapi.json"},
		{"GET", "/console"}, {"GET", "/metrics"}, {"GET", "/v1/intents"}, {"GET", "/v1/intents/" + broken}, {"GET", "/v1/stats"}, {"POST", "/v1/intents"},
		{"POST", "/v1/intents/" + broken + "/approve"}, {"POST", "/v1/intents/" + broken + "/resolve"}, {"POST", "/v1/intents/" + broken + "/abandon"}} {
		rec := httptest.NewRecorder()
		writeInternal(rec)
		c.check(op.method, op.path, rec.Code, rec.Header(), rec.Body.Bytes())
	}

	// Every documented (operation, status) was seen.
	var missing []string
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code := range op.Responses.Map() {
				k := op.OperationID + " " + code
				if !c.covered[k] {
					missing = append(missing, fmt.Sprintf("%s %s → %s (%s)", method, path, code, op.OperationID))
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("documented but never exercised:\n  %s", strings.Join(missing, "\n  "))
	}
}

// OpenAPI returns the OpenAPI 3.1 document served at /openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }
