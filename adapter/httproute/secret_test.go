package httproute_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/fakeapi"
)

// TestSecretNeverLeaks sets SOCIAL_TOKEN in the environment and drives the
// route through successes and failures (401 from the fake, bad URLs, a
// closed server, bad env values): the token appears in no error string,
// no Capabilities, no Record, no formatted config, adapter or route.
func TestSecretNeverLeaks(t *testing.T) {
	t.Setenv("SOCIAL_TOKEN", secretToken)
	// The fake wants another token: every authenticated call is a 401.
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialToken("another-token"))
	t.Setenv("SOCIAL_BASE_URL", api.URL())

	routes, err := httproute.Load(exampleFile("social.yaml"), nil) // nil: os.LookupEnv
	if err != nil {
		t.Fatal(err)
	}
	a := routes[0].Adapter.(*httproute.Adapter)
	noSecret(t, "route", routes[0])
	noSecret(t, "adapter", a)
	noSecret(t, "capabilities", a.Capabilities())
	cfgs, err := httproute.Parse(readExample(t, "social.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "config", cfgs[0])

	pl, _ := a.NormalizePayload(json.RawMessage(`{"body":"hi"}`))
	_, err = a.Write(bg, writeReq(1, "acct", "", pl))
	if ce := callError(t, err); ce.Class != adapter.Rejected || ce.StatusCode != http.StatusUnauthorized {
		t.Fatalf("401: %+v", *ce)
	}
	recs, err := a.Search(bg, adapter.SearchQuery{Account: "acct"})
	noSecret(t, "search error", err)
	noSecret(t, "records", recs)
	if err == nil {
		t.Fatal("search with a wrong token succeeded")
	}
	rec, err := a.Get(bg, "p_1")
	noSecret(t, "get error", err)
	noSecret(t, "record", rec)
	_, err = a.Status(bg, adapter.StatusQuery{RequestID: "r"})
	if !errors.Is(err, httproute.ErrNoStatusQuery) {
		t.Fatalf("status on a route without one: %v", err)
	}
	for _, u := range []string{"::not a url", "ftp://x/y", "http://user:" + secretToken + "@127.0.0.1:1/p"} {
		_, err := a.Probe(bg, u)
		noSecret(t, "probe error", err)
	}
	_, err = a.Write(bg, writeReq(2, "", "", pl))
	noSecret(t, "invalid write", err)
	_, err = a.Write(bg, writeReq(3, "acct", "", json.RawMessage(`{"body":"`+secretToken+`","x":1}`)))
	noSecret(t, "invalid payload", err)

	// Successful calls with the right token: records hold no secret either.
	good := fakeapi.NewSocialAPI(t, fakeapi.WithSocialToken(secretToken))
	t.Setenv("SOCIAL_BASE_URL", good.URL())
	g := loadExample(t, "social.yaml", good.URL())
	res, err := g.Write(bg, writeReq(4, "acct", "", pl))
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "write result", res)
	recs, err = g.Search(bg, adapter.SearchQuery{Account: "acct"})
	if err != nil || len(recs) != 1 {
		t.Fatalf("search: %v %v", recs, err)
	}
	noSecret(t, "records", recs)
	rec, err = g.Get(bg, res.ExternalID)
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "record", rec)

	// A server gone: not sent. (Its pooled connections go with it: net/http
	// drops a connection once it reads the server's close; Close drops
	// them now, so the write does not race that read.)
	good.Close()
	_ = g.Close()
	_, err = g.Write(bg, writeReq(5, "acct", "", pl))
	if ce := callError(t, err); ce.Class != adapter.NotSent {
		t.Fatalf("closed server: %+v", *ce)
	}
	_, err = g.Search(bg, adapter.SearchQuery{Account: "acct"})
	noSecret(t, "search of a closed server", err)

	// Route file problems never echo an env value.
	data := readExample(t, "social.yaml")
	for _, env := range []map[string]string{
		{"SOCIAL_BASE_URL": "http://" + secretToken + "@h", "SOCIAL_TOKEN": secretToken},
		{"SOCIAL_BASE_URL": "ftp://" + secretToken, "SOCIAL_TOKEN": secretToken},
		{"SOCIAL_BASE_URL": "http://h", "SOCIAL_TOKEN": secretToken + "\r\nX: y"},
	} {
		errs := httproute.Check(data, envOf(env))
		if len(errs) != 1 {
			t.Fatalf("%d errors: %v", len(errs), errs)
		}
		noSecret(t, "check error", errs[0])
		_, err := httproute.Load(exampleFile("social.yaml"), envOf(env))
		noSecret(t, "load error", err)
	}
}

// TestCredentialsStayAtOrigin: route headers go to the API's calls only;
// Probe sends no header at all.
func TestCredentialsStayAtOrigin(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]http.Header{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Clone()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/posts":
			_, _ = w.Write([]byte(`{"id":"p_1","url":"` + "http://" + r.Host + `/p/p_1"}`))
		default:
			_, _ = w.Write([]byte(`<p>public page</p>`))
		}
	}))
	t.Cleanup(srv.Close)
	a := loadExample(t, "social.yaml", srv.URL)
	pl, _ := a.NormalizePayload(json.RawMessage(`{"body":"hi"}`))
	res, err := a.Write(bg, writeReq(1, "acct", "", pl))
	if err != nil {
		t.Fatal(err)
	}
	if code, err := a.Probe(bg, res.LiveURL); err != nil || code != http.StatusOK {
		t.Fatalf("probe: %d %v", code, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := seen["/v1/posts"].Get("Authorization"); got != "Bearer "+secretToken {
		t.Fatalf("the write carried Authorization %q", got)
	}
	page := seen["/p/p_1"]
	for name := range page {
		switch strings.ToLower(name) {
		case "user-agent", "accept-encoding":
		default:
			t.Fatalf("the probe sent header %s", name)
		}
	}
}

// TestRedirectNotFollowed: a 3xx is an answer, never followed (a write
// redirected elsewhere would carry credentials away).
func TestRedirectNotFollowed(t *testing.T) {
	var hits sync.Map
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Store(r.URL.Path, r.Header.Get("Authorization"))
	}))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/stolen", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	a := loadExample(t, "social.yaml", srv.URL)
	pl, _ := a.NormalizePayload(json.RawMessage(`{"body":"hi"}`))
	_, err := a.Write(bg, writeReq(1, "acct", "", pl))
	if ce := callError(t, err); ce.Class != adapter.Unknown || ce.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("redirect: %+v", *ce)
	}
	if _, ok := hits.Load("/stolen"); ok {
		t.Fatal("the redirect was followed")
	}
}

// TestHostileAPIEchoesTheToken: an API that answers the route's token as
// the identity, an author, a body: the identity is refused (never used or
// shown), and Inspect (settle routes probe) shows none of it.
func TestHostileAPIEchoesTheToken(t *testing.T) {
	rec := newRecorder(t, func(r *http.Request) (int, string) {
		switch r.URL.Path {
		case "/me":
			return 200, `{"id":"` + secretToken + `"}`
		case "/list":
			return 200, `{"items":[{"id":"i1","by":"` + secretToken + `","body":"see Bearer ` + secretToken + `","at":"2030-01-01T00:00:00Z"}]}`
		case "/items/i1":
			return 200, `{"id":"i1","by":"x","body":"` + secretToken + `","url":"http://127.0.0.1:1/p?` + secretToken + `"}`
		}
		return 404, `{}`
	})
	a := buildYAML(t, []byte(`routes:
  - name: hostile
    base_url: ${env:BASE}
    headers: {Authorization: "Bearer ${env:TOK}"}
    identity: {url: "{{base}}/me", id: $.id}
    write: {method: POST, url: "{{base}}/w", response: {external_id: $.id}}
    search:
      url: "{{base}}/list?since={{from}}"
      items: $.items
      fields: {external_id: $.id, author_id: $.by, created_at: $.at, payload: {body: $.body}}
    readback:
      url: "{{base}}/items/{{external_id}}"
      fields: {external_id: $.id, author_id: $.by, live_url: $.url, payload: {body: $.body}}
    policy: {retry: never}
`), map[string]string{"BASE": rec.srv.URL, "TOK": secretToken})
	_, err := a.Identity(bg)
	if ce := callError(t, err); ce.Code != "identity_is_a_credential" {
		t.Fatalf("identity: %+v", *ce)
	}
	in, err := a.Inspect(bg, httproute.InspectOptions{Account: "someone"})
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "inspection", in)
	if in.Identity == nil || in.Identity.Err == "" || in.Search == nil || len(in.Search.Records) != 1 || in.Readback == nil || in.Readback.Record == nil {
		t.Fatalf("inspection %+v", in)
	}
	if in.Search.Records[0].AuthorID != "[redacted]" {
		t.Fatalf("author %q", in.Search.Records[0].AuthorID)
	}
}
