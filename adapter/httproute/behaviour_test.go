package httproute_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
)

// recorder is an API that answers from a script and records requests.
type recorder struct {
	mu     sync.Mutex
	reqs   []recorded
	answer func(r *http.Request) (int, string)
	srv    *httptest.Server
}

type recorded struct {
	method, path, query, body string
	header                    http.Header
}

func newRecorder(t *testing.T, answer func(r *http.Request) (int, string)) *recorder {
	rec := &recorder{answer: answer}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, string(b), r.Header.Clone()})
		rec.mu.Unlock()
		code, body := rec.answer(r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (r *recorder) last() recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

const genericRoute = `
routes:
  - name: generic
    base_url: ${env:BASE}/api/
    headers: {X-Api-Key: "${env:KEY}", X-Client: settle}
    payload:
      fields:
        title: {type: string, required: true}
        tags: {type: array, items: string, omit_empty: true}
        count: {type: integer, minimum: 0, default: 0}
    parent: {type: string, pattern: '^[a-z0-9/]+$', required: false}
    write:
      method: PATCH
      url: "{{base}}/things/{{payload.title}}?acct={{account}}&parent={{parent}}&r={{request_id}}"
      idempotency_header: Idem
      headers: {X-Intent: "{{intent_id}}", X-Parent: "{{parent}}"}
      encoding: form
      body: {title: "{{payload.title}}", n: "{{payload.count}}", parent: "{{parent | omitempty}}", fixed: 7}
      outcomes:
        - {status: [503], match: {$.retry: "yes"}, outcome: retryable, code: try_later}
      error_code: $.err
      status: {definite_4xx: [409], unknown: [400, 501]}
      response:
        success: [200]
        external_id: "{{$.data.items[0].id}}"
        live_url: "{{base}}/see/{{$.data.items[0].id}}"
        require: [$.ok]
        expect: {$.title: "{{payload.title}}"}
    search:
      url: "{{base}}/list?acct={{account}}&since={{from | unix}}&until={{to}}"
      items: $.rows
      fields:
        external_id: $.id
        author_id: $.by
        created_at: $.ts
        visibility: public
        payload: {title: $.t}
    readback:
      url: "{{base}}/things/{{external_id | before:#}}"
      item: $.thing
    policy: {trust_response: false, retry: never}
`

func genericAdapter(t *testing.T, base string) *httproute.Adapter {
	t.Helper()
	return buildYAML(t, []byte(genericRoute), map[string]string{"BASE": base, "KEY": secretToken})
}

func TestGenericWrite(t *testing.T) {
	var answer struct {
		sync.Mutex
		code int
		body string
	}
	rec := newRecorder(t, func(r *http.Request) (int, string) {
		answer.Lock()
		defer answer.Unlock()
		return answer.code, answer.body
	})
	set := func(code int, body string) { answer.Lock(); answer.code, answer.body = code, body; answer.Unlock() }
	a := genericAdapter(t, rec.srv.URL)
	pl, err := a.NormalizePayload(json.RawMessage(`{"title":"a b/c","tags":[]}`))
	if err != nil || string(pl) != `{"count":0,"title":"a b/c"}` {
		t.Fatalf("normalize: %s %v", pl, err)
	}
	req := writeReq(1, "acct 1", "", pl)

	set(200, `{"ok":true,"title":"a b/c","data":{"items":[{"id":"x/1"}]}}`)
	res, err := a.Write(bg, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExternalID != "x/1" || res.LiveURL != rec.srv.URL+"/api/see/x%2F1" {
		t.Fatalf("result %+v", res)
	}
	got := rec.last()
	if got.method != http.MethodPatch || got.path != "/api/things/a%20b%2Fc" {
		t.Fatalf("request %s %s", got.method, got.path)
	}
	// Empty query parameters are left out; values are query-escaped.
	if got.query != "acct=acct+1&r=req-1" {
		t.Fatalf("query %q", got.query)
	}
	form, _ := url.ParseQuery(got.body)
	if got.header.Get("Content-Type") != "application/x-www-form-urlencoded" || form.Get("title") != "a b/c" || form.Get("n") != "0" || form.Has("parent") || form.Get("fixed") != "7" {
		t.Fatalf("form body %q (%s)", got.body, got.header.Get("Content-Type"))
	}
	if got.header.Get("X-Api-Key") != secretToken || got.header.Get("X-Client") != "settle" || got.header.Get("Idem") != req.IdempotencyKey ||
		got.header.Get("X-Intent") != req.IntentID || got.header.Values("X-Parent") != nil {
		t.Fatalf("headers %v", got.header)
	}

	for _, c := range []struct {
		code  int
		body  string
		class adapter.Class
		ecode string
		retry bool
	}{
		{503, `{"retry":"yes"}`, adapter.Rejected, "try_later", true},
		{503, `{"retry":"no"}`, adapter.Unknown, "http_ambiguous", false},
		{409, `{"err":"already_there"}`, adapter.Rejected, "already_there", false},
		{404, `{"err":"Not Snake"}`, adapter.Rejected, "http_rejected", false},
		{400, `{"err":"bad"}`, adapter.Unknown, "http_ambiguous", false},
		{501, `{}`, adapter.Unknown, "http_ambiguous", false},
		{201, `{"ok":true}`, adapter.Unknown, "unexpected_status", false},
		{200, `not json`, adapter.Unknown, "response_unparseable", false},
		{200, `{"ok":true,"title":"a b/c","data":{"items":[]}}`, adapter.Unknown, "response_unparseable", false},
		{200, `{"title":"a b/c","data":{"items":[{"id":"1"}]}}`, adapter.Unknown, "response_mismatch", false},
		{200, `{"ok":true,"title":"other","data":{"items":[{"id":"1"}]}}`, adapter.Unknown, "response_mismatch", false},
	} {
		set(c.code, c.body)
		_, err := a.Write(bg, req)
		ce := callError(t, err)
		if ce.Class != c.class || ce.Code != c.ecode || ce.Retryable != c.retry || ce.StatusCode != c.code {
			t.Fatalf("%d %s: %+v", c.code, c.body, *ce)
		}
	}

	// The key is required when the route declares idempotency... this one
	// does not, but a write without it still sends no empty header.
	set(200, `{"ok":true,"title":"a b/c","data":{"items":[{"id":"x"}]}}`)
	noKey := req
	noKey.IdempotencyKey = ""
	if _, err := a.Write(bg, noKey); err != nil {
		t.Fatal(err)
	}
	if rec.last().header.Values("Idem") != nil {
		t.Fatal("an empty idempotency key was sent")
	}
	// A request variable the URL needs is empty: not sent.
	n := len(rec.reqs)
	noReq := req
	noReq.RequestID = ""
	_, err = a.Write(bg, noReq)
	if ce := callError(t, err); ce.Class != adapter.NotSent || ce.Retryable {
		t.Fatalf("missing request id: %+v", *ce)
	}
	if len(rec.reqs) != n {
		t.Fatal("an invalid write was sent")
	}
}

func TestGenericReads(t *testing.T) {
	rec := newRecorder(t, func(r *http.Request) (int, string) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/list"):
			return 200, `{"rows":[{"id":"1","ts":1700000000,"t":"one"},{"id":"2","ts":"2024-01-02T03:04:05Z"},{"id":"1","ts":0,"t":"dup"}]}`
		case r.URL.Path == "/api/things/t1":
			return 200, `{"thing":{"id":"t1","ts":"2024-01-02T03:04:05.5Z","t":"x"}}`
		case r.URL.Path == "/api/things/t2":
			return 200, `{"nothing":true}`
		}
		return 404, `{}`
	})
	a := genericAdapter(t, rec.srv.URL)
	from := time.Unix(1700000000, 0)
	recs, err := a.Search(bg, adapter.SearchQuery{Account: "acct", From: from})
	if err != nil {
		t.Fatal(err)
	}
	if q := rec.last().query; q != "acct=acct&since=1700000000" {
		t.Fatalf("search query %q", q)
	}
	if len(recs) != 2 || recs[0].Visibility != "public" || !recs[0].CreatedAt.Equal(from) || string(recs[0].Payload) != `{"count":0,"title":"one"}` ||
		!recs[1].Partial || recs[1].Payload != nil || recs[1].CreatedAt.Year() != 2024 {
		t.Fatalf("records %+v", recs)
	}
	r, err := a.Get(bg, "t1#v2")
	if err != nil || r.ExternalID != "t1" || r.CreatedAt.Nanosecond() != 5e8 || r.Partial {
		t.Fatalf("get %+v %v", r, err)
	}
	if _, err := a.Get(bg, "t2"); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("an absent item: %v", err)
	}
	if _, err := a.Get(bg, "t3"); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("404: %v", err)
	}
	if _, err := a.Status(bg, adapter.StatusQuery{RequestID: "r"}); !errors.Is(err, httproute.ErrNoStatusQuery) {
		t.Fatalf("status: %v", err)
	}
	if c := a.Capabilities(); c.StatusQuery || !c.Search || c.IdempotencyKey {
		t.Fatalf("capabilities %+v", c)
	}
}

// TestBuildFromGo: a RouteConfig written in Go builds without YAML.
func TestBuildFromGo(t *testing.T) {
	rec := newRecorder(t, func(*http.Request) (int, string) { return 201, `{"id":"n1"}` })
	cfg := httproute.RouteConfig{
		Name:    "notes",
		BaseURL: rec.srv.URL,
		Headers: []httproute.Header{{Name: "Authorization", Value: "Bearer ${env:NOTES_TOKEN}"}},
		Write: &httproute.WriteConfig{
			Method:   http.MethodPost,
			URL:      "{{base}}/notes",
			Body:     map[string]any{"text": "{{payload.text}}", "by": "{{account}}"},
			Response: httproute.ResponseConfig{ExternalID: "$.id"},
		},
		Payload: &httproute.PayloadConfig{Fields: []httproute.FieldConfig{{Name: "text", Type: "string", Required: true}}},
		Policy:  adapter.DefaultPolicy(),
		Env:     envOf(map[string]string{"NOTES_TOKEN": secretToken}),
	}
	cfg.Policy.TrustResponse = true
	cfg.Policy.Retry = "never" // no search, no key: nothing could prove a lost write absent
	route, err := httproute.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if route.Name != "notes" || !route.Policy.TrustResponse {
		t.Fatalf("route %+v", route)
	}
	pl, _ := route.Adapter.(adapter.PayloadNormalizer).NormalizePayload(json.RawMessage(`{"text":"hi"}`))
	res, err := route.Adapter.Write(bg, writeReq(1, "me", "", pl))
	if err != nil || res.ExternalID != "n1" {
		t.Fatalf("write %+v %v", res, err)
	}
	if b := rec.last().body; b != `{"by":"me","text":"hi"}` {
		t.Fatalf("body %s", b)
	}

	cfg.Write.URL = "{{base}}/notes/{{cursor}}"
	cfg.Env = envOf(nil)
	_, err = httproute.Build(cfg)
	var re *httproute.RouteError
	if !errors.As(err, &re) || re.Route != "notes" {
		t.Fatalf("build of a broken config: %v", err)
	}
	if n := strings.Count(err.Error(), "route notes: "); n != 2 {
		t.Fatalf("want 2 problems (write.url, headers.Authorization), got %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := httproute.Load("/nonexistent/routes.yaml", nil); err == nil {
		t.Fatal("loaded a missing file")
	}
	_, err := httproute.Load(exampleFile("social.yaml"), envOf(nil))
	var re *httproute.RouteError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "social.yaml") {
		t.Fatalf("load without env: %v", err)
	}
	if n := strings.Count(err.Error(), "route social_post:"); n != 2 { // base_url and headers.Authorization
		t.Fatalf("load without env: %v", err)
	}
}
