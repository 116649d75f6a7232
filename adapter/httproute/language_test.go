package httproute_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
)

// The route language's reach: the intent's values in read templates,
// pagination by page number and offset, window filters, visibility
// mappings, correlation on a status query, and the errors and warnings
// each new key can give.

const scopedRoute = `
routes:
  - name: scoped
    base_url: ${env:BASE}
    payload:
      fields:
        kind: {type: string, required: true}
        text: {type: string, required: true}
    parent: {type: string, pattern: '^th/[0-9]+$'}
    write:
      method: POST
      url: "{{base}}/threads/{{parent}}/notes"
      body: {kind: "{{payload.kind}}", text: "{{payload.text}}"}
      response: {external_id: $.id}
    search:
      url: "{{base}}/threads/{{parent}}/notes?kind={{payload.kind}}&since={{from | unix}}"
      items: $.notes
      fields:
        external_id: $.id
        author_id: $.by
        parent_id: "{{parent}}"
        created_at: $.at
        payload: {kind: $.kind, text: $.text}
    readback:
      url: "{{base}}/accounts/{{account}}/notes/{{external_id}}?req={{request_id}}"
    status:
      url: "{{base}}/lookup?intent={{intent_id}}&key={{idempotency_key}}"
      state: $.state
      external_id: $.id
    capabilities: {search: true, status_query: true}
    policy: {retry: never}
`

// TestReadTemplatesUseTheIntent: search, readback and status URLs use the
// intent's parent, account, ids and payload fields through an
// intent-scoped adapter (adapter.ForIntent); an unscoped read that needs
// them is refused, naming them; SearchKey separates intents whose
// listings differ.
func TestReadTemplatesUseTheIntent(t *testing.T) {
	rec := newRecorder(t, func(r *http.Request) (int, string) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/threads/"):
			return 200, `{"notes":[{"id":"n1","by":"u1","at":1700000000,"kind":"k","text":"hi"}]}`
		case strings.HasPrefix(r.URL.Path, "/accounts/"):
			return 200, `{"id":"n1","by":"u1","kind":"k","text":"hi"}`
		case r.URL.Path == "/lookup":
			return 200, `{"state":"completed","id":"n1"}`
		}
		return 404, `{}`
	})
	a := buildYAML(t, []byte(scopedRoute), map[string]string{"BASE": rec.srv.URL})
	if c := a.Capabilities(); !c.SearchAuthoritative {
		t.Fatalf("a parent-scoped listing mapping parent_id {{parent}} is authoritative: %+v", c)
	}
	q := adapter.SearchQuery{Account: "u1", From: time.Unix(1700000000, 0)}
	if _, err := a.Search(bg, q); err == nil || !strings.Contains(err.Error(), "{{parent}}") || !strings.Contains(err.Error(), "adapter.ForIntent") {
		t.Fatalf("an unscoped search: %v", err)
	}
	if _, err := a.Get(bg, "n1"); err == nil || !strings.Contains(err.Error(), "{{account}}") {
		t.Fatalf("an unscoped get: %v", err)
	}
	if _, err := a.Status(bg, adapter.StatusQuery{RequestID: "r", IdempotencyKey: "k"}); err == nil || !strings.Contains(err.Error(), "{{intent_id}}") {
		t.Fatalf("an unscoped status: %v", err)
	}

	pl := normalized(t, a, `{"kind":"k","text":"hi"}`)
	wr := writeReq(1, "u1", "th/1", pl)
	scope := adapter.ReadScope{IntentID: wr.IntentID, RequestID: wr.RequestID, IdempotencyKey: wr.IdempotencyKey, Account: "u1", ParentExternalID: "th/1", Payload: pl}
	sa := adapter.ForIntent(a, scope)
	recs, err := sa.Search(bg, q)
	if err != nil || len(recs) != 1 || recs[0].ParentID != "th/1" {
		t.Fatalf("scoped search: %+v %v", recs, err)
	}
	if got := rec.last(); got.path != "/threads/th%2F1/notes" || got.query != "kind=k&since=1700000000" {
		t.Fatalf("search request %s?%s", got.path, got.query)
	}
	if r, err := sa.Get(bg, "n1"); err != nil || r.ExternalID != "n1" {
		t.Fatalf("scoped get: %+v %v", r, err)
	}
	if got := rec.last(); got.path != "/accounts/u1/notes/n1" || got.query != "req="+wr.RequestID {
		t.Fatalf("get request %s?%s", got.path, got.query)
	}
	st, err := sa.(adapter.StatusQuerier).Status(bg, adapter.StatusQuery{RequestID: wr.RequestID, IdempotencyKey: wr.IdempotencyKey, Account: "u1"})
	if err != nil || st.ExternalID != "n1" {
		t.Fatalf("scoped status: %+v %v", st, err)
	}
	if got := rec.last(); got.query != "intent="+wr.IntentID+"&key="+wr.IdempotencyKey {
		t.Fatalf("status request %s", got.query)
	}
	// The route's own adapter is untouched by its scoped copies.
	if _, err := a.Search(bg, q); err == nil {
		t.Fatal("ForIntent changed the route's adapter")
	}

	other := scope
	other.ParentExternalID = "th/2"
	same := scope
	same.IntentID, same.RequestID = "in_other", "r-other"
	if k := adapter.SearchKey(a, scope); k == "" || k == adapter.SearchKey(a, other) || k != adapter.SearchKey(a, same) {
		t.Fatalf("search keys: %q, other parent %q, other intent same listing %q", k, adapter.SearchKey(a, other), adapter.SearchKey(a, same))
	}
	social := loadExample(t, "social.yaml", rec.srv.URL)
	if k := adapter.SearchKey(social, scope); k != "" {
		t.Fatalf("a search by account and window alone has key %q", k)
	}
}

// TestPageAndOffsetPagination: {{page}} from first_page and {{offset}} in
// steps of page_size; with end: empty_page the listing ends at the first
// empty page (the short third page does not end it).
func TestPageAndOffsetPagination(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	rec := newRecorder(t, func(r *http.Request) (int, string) {
		mu.Lock()
		seen = append(seen, r.URL.RawQuery)
		mu.Unlock()
		q := r.URL.Query()
		start := 0
		switch {
		case q.Has("page"):
			start = (atoi(q.Get("page")) - atoi(q.Get("first"))) * 2
		case q.Has("offset"):
			start = atoi(q.Get("offset"))
		}
		var items []string
		for i := start; i < 5 && i < start+2; i++ {
			items = append(items, `{"id":"i`+itoa(i)+`","by":"u","t":"x"}`)
		}
		return 200, `{"rows":[` + strings.Join(items, ",") + `]}`
	})
	route := func(url, extra string) []byte {
		return []byte(`routes:
  - name: paged
    base_url: ${env:BASE}
    write: {method: POST, url: "{{base}}/w", response: {external_id: $.id}}
    search:
      url: "` + url + `"
      items: $.rows
      end: empty_page
      page_size: 2` + extra + `
      fields: {external_id: $.id, author_id: $.by, created_at: $.at, payload: {t: $.t}}
    readback: {url: "{{base}}/r/{{external_id}}"}
    policy: {retry: never}
`)
	}
	for _, c := range []struct {
		name, url, extra string
		want             []string
	}{
		{"page", "{{base}}/l?page={{page}}&per={{page_size}}&first=1", "", []string{"page=1&per=2&first=1", "page=2&per=2&first=1", "page=3&per=2&first=1", "page=4&per=2&first=1"}},
		{"page from 0", "{{base}}/l?page={{page}}&first=0", "\n      first_page: 0", []string{"page=0&first=0", "page=1&first=0", "page=2&first=0", "page=3&first=0"}},
		{"offset", "{{base}}/l?offset={{offset}}&limit={{page_size}}", "", []string{"offset=0&limit=2", "offset=2&limit=2", "offset=4&limit=2", "offset=5&limit=2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			a := buildYAML(t, route(c.url, c.extra), map[string]string{"BASE": rec.srv.URL})
			recs, err := a.Search(bg, adapter.SearchQuery{Account: "u"})
			if err != nil || len(recs) != 5 {
				t.Fatalf("search: %d records, %v", len(recs), err)
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(seen, " ") != strings.Join(c.want, " ") {
				t.Fatalf("pages %v, want %v", seen, c.want)
			}
		})
	}
}

func atoi(s string) int {
	var n int
	_ = json.Unmarshal([]byte(s), &n)
	return n
}

// TestWindowFilterAndItems: with window_filter updated_at the upper bound
// is not sent and items created outside the window are dropped; a page
// without its items (absent, null, not a list) is an error, never an
// empty page.
func TestWindowFilterAndItems(t *testing.T) {
	var body string
	rec := newRecorder(t, func(*http.Request) (int, string) { return 200, body })
	const file = `routes:
  - name: w
    base_url: ${env:BASE}
    write: {method: POST, url: "{{base}}/w", response: {external_id: $.id}}
    search:
      url: "{{base}}/l?since={{from | rfc3339}}&until={{to | rfc3339}}"
      items: $.items
      window_filter: updated_at
      fields: {external_id: $.id, author_id: $.by, created_at: $.created, payload: {t: $.t}}
    readback: {url: "{{base}}/r/{{external_id}}"}
    policy: {retry: never}
`
	a := buildYAML(t, []byte(file), map[string]string{"BASE": rec.srv.URL})
	from := time.Date(2030, 5, 1, 10, 0, 0, 0, time.UTC)
	q := adapter.SearchQuery{Account: "u", From: from, To: from.Add(time.Hour)}
	body = `{"items":[
		{"id":"old","by":"u","created":"2030-05-01T09:00:00Z","t":"edited today"},
		{"id":"in","by":"u","created":"2030-05-01T10:30:00Z","t":"x"},
		{"id":"late","by":"u","created":"2030-05-01T12:00:00Z","t":"y"}]}`
	recs, err := a.Search(bg, q)
	if err != nil || len(recs) != 1 || recs[0].ExternalID != "in" {
		t.Fatalf("records %+v %v", recs, err)
	}
	if got := rec.last().query; got != "since=2030-05-01T10%3A00%3A00Z" {
		t.Fatalf("query %q: an upper bound on update time would hide objects changed after the window", got)
	}
	for _, b := range []string{`{}`, `{"items":null}`, `{"items":{"id":"x"}}`, `{"error":"rate limited"}`} {
		body = b
		if recs, err := a.Search(bg, q); err == nil || recs != nil {
			t.Fatalf("%s: %v %v, want an error", b, recs, err)
		}
	}
	body = `{"items":[]}`
	if recs, err := a.Search(bg, q); err != nil || len(recs) != 0 {
		t.Fatalf("an empty page: %v %v", recs, err)
	}
}

// TestVisibilityMapAndStatusMarker: visibility mapped from an item field
// (an unmapped value is "unknown"); a status answer's marker is read into
// StatusResult.CorrelationID and kept out of its payload.
func TestVisibilityMapAndStatusMarker(t *testing.T) {
	var body string
	rec := newRecorder(t, func(r *http.Request) (int, string) { return 200, body })
	const file = `routes:
  - name: v
    base_url: ${env:BASE}
    payload: {fields: {text: {type: string, required: true}}}
    correlation: {marker: " [{{intent_id}}]", read: $.text}
    write: {method: POST, url: "{{base}}/w", body: {text: "{{payload.text}}{{marker}}"}, response: {external_id: $.id}}
    readback:
      url: "{{base}}/r/{{external_id}}"
      fields:
        external_id: $.id
        author_id: $.by
        visibility: {from: $.private, map: {"false": public, "true": private}}
        payload: {text: $.text}
    status:
      url: "{{base}}/s/{{request_id}}"
      credential_scoped: true
      state: $.state
      external_id: $.id
      payload: {text: $.text}
    policy: {retry: never}
`
	a := buildYAML(t, []byte(file), map[string]string{"BASE": rec.srv.URL})
	id := writeReq(1, "u", "", nil).IntentID
	for v, want := range map[string]string{`false`: "public", `true`: "private", `"maybe"`: "unknown", `null`: "unknown"} {
		body = `{"id":"x","by":"u","private":` + v + `,"text":"hi [` + id + `]"}`
		r, err := a.Get(bg, "x")
		if err != nil || r.Visibility != want || r.CorrelationID != id || string(r.Payload) != `{"text":"hi"}` {
			t.Fatalf("private=%s: %+v %v", v, r, err)
		}
	}
	body = `{"state":"completed","id":"x","text":"hi [` + id + `]"}`
	st, err := a.Status(bg, adapter.StatusQuery{RequestID: "r"})
	if err != nil || st.CorrelationID != id || string(st.Payload) != `{"text":"hi"}` {
		t.Fatalf("status %+v %v", st, err)
	}
	// A marker naming no intent is no marker.
	body = `{"state":"completed","id":"x","text":"hi [in_short]"}`
	if st, _ := a.Status(bg, adapter.StatusQuery{RequestID: "r"}); st.CorrelationID != "" || string(st.Payload) != `{"text":"hi [in_short]"}` {
		t.Fatalf("a bogus marker: %+v", st)
	}
}

// TestLanguageErrors: each mistake with the new keys gives one error
// naming route and field.
func TestLanguageErrors(t *testing.T) {
	gh := readExample(t, "github_comments.yaml")
	env := exampleEnv("http://127.0.0.1:9")
	cases := []struct {
		name  string
		data  []byte
		field string
		want  string
	}{
		{"page without page_size", mutate(t, gh, "&per_page={{page_size}}", "&page={{page}}", "      next_link: true\n", "      end: empty_page\n", "      page_size: 100      # GitHub's largest page\n", ""), "search.page_size", "is required"},
		{"page_size without its use", mutate(t, gh, "&per_page={{page_size}}", "&per_page=100"), "search.page_size", "applies only"},
		{"two paginations", mutate(t, gh, "&per_page={{page_size}}", "&per_page={{page_size}}&page={{page}}", "      next_link: true\n", "      next_link: true\n      end: empty_page\n"), "search.url", "more than one pagination"},
		{"bad window filter", mutate(t, gh, "window_filter: updated_at", "window_filter: modified"), "search.window_filter", "not created_at"},
		{"updated_at without created_at", mutate(t, gh, "        created_at: $.created_at\n", ""), "search.fields.created_at", "window_filter: updated_at"},
		{"identity without id", mutate(t, gh, "      id: $.data.viewer.databaseId\n", ""), "identity.id", "is required"},
		{"identity id constant", mutate(t, gh, "      id: $.data.viewer.databaseId\n", "      id: me\n"), "identity.id", "must read"},
		{"identity refresh", mutate(t, gh, "      id: $.data.viewer.databaseId\n", "      id: $.id\n      refresh: 10ms\n"), "identity.refresh", "between 1s and 24h"},
		{"identity leaves origin", mutate(t, gh, "{{base | regex:'^(.*?)(?:/v3)?/repos/'}}/graphql", "{{base | before:.}}/graphql"), "identity.url", "leaves base_url's origin"},
		{"identity POST without body", mutate(t, gh, "      body: {query: \"query { viewer { databaseId } }\"}\n", ""), "identity.body", "is required with method POST"},
		{"identity method", mutate(t, gh, "method: POST", "method: DELETE"), "identity.method", "not GET or POST"},
		{"identity body with a variable", mutate(t, gh, "viewer { databaseId }", "viewer { {{account}} }"), "identity.body.query", "unknown variable"},
		{"marker without intent", mutate(t, gh, "<!-- settle:{{intent_id}} -->", "<!-- settle -->"), "correlation.marker", "exactly once"},
		{"marker twice", mutate(t, gh, "<!-- settle:{{intent_id}} -->", "<!-- {{intent_id}} {{intent_id}} -->"), "correlation.marker", "exactly once"},
		{"marker with other variable", mutate(t, gh, "<!-- settle:{{intent_id}} -->", "<!-- {{intent_id}} {{account}} -->"), "correlation.marker", "unknown variable"},
		{"marker never sent", mutate(t, gh, `"{{payload.body}}{{marker}}"`, `"{{payload.body}}"`), "correlation.marker", "never sent"},
		{"marker without correlation", mutate(t, readExample(t, "social.yaml"), `body: "{{payload.body}}"`, `body: "{{payload.body}}{{marker}}"`), "write.body.body", "unknown variable {{marker}}"},
		{"correlation without read", mutate(t, gh, "      read: $.body\n", ""), "correlation.read", "is required"},
		{"unknown check", mutate(t, gh, "checks: [author, payload, parent]", "checks: [author, payload, smell]"), "readback.checks[2]", "not a check"},
		{"checks without author", mutate(t, gh, "checks: [author, payload, parent]", "checks: [payload, url]"), "readback.checks", "must include author"},
		{"visibility map without from", mutate(t, gh, "        created_at: $.created_at\n", "        created_at: $.created_at\n        visibility: {map: {a: public}}\n"), "search.fields.visibility.from", "is required"},
		{"visibility probe and from", mutate(t, gh, "        created_at: $.created_at\n", "        created_at: $.created_at\n        visibility: {probe: true, from: $.state}\n"), "search.fields.visibility.probe", "instead of"},
		{"parent from the query, listing not scoped", mutate(t, gh, `parent_id: "{{$.issue_url | last_segment}}"`, `parent_id: "{{parent}}"`), "search.fields.parent_id", "exactly {{parent}}"},
		{"record payload from the intent", mutate(t, gh, "        payload: {body: $.body}\n\n    readback", "        payload: {body: \"{{account}}\"}\n\n    readback"), "search.fields.payload.body", "unknown variable {{account}}"},
		{"author from the query", mutate(t, gh, "author_id: $.user.id", `author_id: "{{account}}"`), "search.fields.author_id", "must read the item"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := httproute.Check(c.data, envOf(env))
			if len(errs) != 1 {
				t.Fatalf("%d errors, want 1: %v", len(errs), errs)
			}
			var re *httproute.RouteError
			if !errors.As(errs[0], &re) || re.Route != "github_issue_comment" && re.Route != "social_post" || re.Field != c.field || !strings.Contains(re.Reason, c.want) {
				t.Fatalf("got %v, want field %s saying %q", errs[0], c.field, c.want)
			}
		})
	}
}

// TestWarnings: a constant visibility and a search without a creation time
// work, but settle sees less: routes check warns, naming route and field.
func TestWarnings(t *testing.T) {
	social := readExample(t, "social.yaml")
	env := envOf(exampleEnv("http://127.0.0.1:9"))
	for _, c := range []struct {
		name  string
		data  []byte
		field string
		want  string
	}{
		{"constant visibility", mutate(t, social, "visibility: $.visibility", "visibility: public"), "search.fields.visibility", "constant"},
		// A marked route: settle knows its own write by the marker.
		{"no creation time", mutate(t, social, "        created_at: $.created_at\n", "", "retry: auto", "retry: never",
			"    write:\n", "    correlation:\n      marker: \" <!-- settle:{{intent_id}} -->\"\n      read: $.body\n\n    write:\n",
			`body: "{{payload.body}}"`, `body: "{{payload.body}}{{marker}}"`), "search.fields.created_at", "look-alike"},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs, warnings := httproute.Lint(c.data, env)
			if errs != nil || len(warnings) != 1 {
				t.Fatalf("errors %v, warnings %v", errs, warnings)
			}
			var re *httproute.RouteError
			if !errors.As(warnings[0], &re) || re.Route != "social_post" || re.Field != c.field || !strings.Contains(re.Reason, c.want) {
				t.Fatalf("warning %v", warnings[0])
			}
			if _, err := httproute.Parse(c.data, env); err != nil {
				t.Fatalf("a warning refused the file: %v", err)
			}
		})
	}
}
