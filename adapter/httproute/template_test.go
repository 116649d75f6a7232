package httproute

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestJSONPaths(t *testing.T) {
	doc, err := decodeJSON([]byte(`{"a":{"b":[{"id":"x"},{"id":7}],"odd key":true,"n":null},"items":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want any
		ok   bool
	}{
		{"$.a.b[0].id", "x", true},
		{"$.a.b[1].id", json.Number("7"), true},
		{`$.a["odd key"]`, true, true},
		{`$['a'].b[0]['id']`, "x", true},
		{"$.a.n", nil, true},
		{"$.a.b[2].id", nil, false},
		{"$.a.missing", nil, false},
		{"$.items[0]", nil, false},
		{"$.a.b.id", nil, false},
	} {
		p, err := parsePath(c.path)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		got, ok := p.eval(doc)
		if ok != c.ok || got != c.want {
			t.Fatalf("%s: %v %v, want %v %v", c.path, got, ok, c.want, c.ok)
		}
	}
	for _, bad := range []string{"", "a.b", "$.", "$..a", "$.a.", "$[", "$[x]", "$[-1]", "$[01]", "$[+1]", `$["a]`, "$ a", "$.a b", "$[9999999999]"} {
		if _, err := parsePath(bad); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
}

func TestTemplates(t *testing.T) {
	ctx := tctx{vars: []string{varBase, varAccount, varFrom, varExternalID}, payload: true, doc: "a test document", omitEmpty: true}
	s := &scope{
		vars:    map[string]string{varBase: "http://h/api", varAccount: "a b", varExternalID: "B-1@v2"},
		times:   map[string]time.Time{varFrom: time.Unix(1700000000, 5).UTC()},
		payload: map[string]any{"n": json.Number("3"), "l": []any{"x"}}, hasPay: true,
		doc: map[string]any{"id": "i/1"}, hasDoc: true,
	}
	for _, c := range []struct {
		src, want string
		ok        bool
	}{
		{"plain", "plain", true},
		{"{{account}}-{{payload.n}}", "a b-3", true},
		{"{{ from }}", "2023-11-14T22:13:20.000000005Z", true},
		{"{{from | unix}}", "1700000000", true},
		{"{{external_id | before:@}}", "B-1", true},
		{"{{payload.l}}", `["x"]`, true},
		{"$.id", "i/1", true},
		{"x{{$.missing}}y", "", false},
	} {
		tm, err := parseTemplate(c.src, ctx)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		got, ok, err := tm.render(s, nil, false)
		if err != nil || ok != c.ok || got != c.want {
			t.Fatalf("%s: %q %v %v, want %q %v", c.src, got, ok, err, c.want, c.ok)
		}
	}
	for _, bad := range []string{"{{", "}}", "{{a}", "{{}}", "{{ {{a}} }}", "{{nope}}", "{{account | upper}}", "{{account | unix}}", "{{x | before:}}", "{{$.a..b}}", "{{payload.}}"} {
		if _, err := parseTemplate(bad, ctx); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
	u, err := parseURLTemplate("{{base}}/x/{{account}}?q={{account}}&e={{external_id | before:#}}&c=1", ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	s.vars[varExternalID] = "#v"
	got, _, _ := u.render(s, false)
	if got != "http://h/api/x/a%20b?q=a+b&c=1" {
		t.Fatalf("url %q", got)
	}
	for _, bad := range []string{"http://h/x", "{{base}}x", "{{base}}@evil/x", "x{{base}}/", "{{base}}/a b", "{{base}}/a#f", "{{account}}/x"} {
		if _, err := parseURLTemplate(bad, ctx, true); err == nil {
			t.Fatalf("URL %q parsed", bad)
		}
	}
}

func TestFilters(t *testing.T) {
	ctx := tctx{vars: []string{varBase, varParent, varFrom, varTo, varExternalID}, doc: "a test document"}
	from := time.Date(2030, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	s := &scope{
		vars:  map[string]string{varBase: "http://h/api", varParent: "Octo-Org/Hello#42", varExternalID: "C1:1712345678.000100"},
		times: map[string]time.Time{varFrom: from, varTo: from},
		doc: map[string]any{
			"issue_url": "https://api.github.com/repos/o/r/issues/1347",
			"html":      "https://github.com/o/r/issues/7/?x=1#frag",
			"n":         json.Number("12"),
			"slack":     "see <https://x.org/a?b=1&amp;c=2> and <http://www.y.org|www.y.org>, a &lt;3 &amp;lt; b",
		}, hasDoc: true,
	}
	for _, c := range []struct {
		src, want string
		ok        bool
	}{
		{"{{$.issue_url | last_segment}}", "1347", true},
		{"{{$.slack | slack_plain}}", "see https://x.org/a?b=1&c=2 and www.y.org, a <3 &lt; b", true},
		{"{{$.html | last_segment}}", "7", true},
		{"{{$.n | last_segment}}", "12", true},
		{"{{parent | lower}}", "octo-org/hello#42", true},
		{"{{parent | regex:#([0-9]+)$}}", "42", true},
		{"{{parent | regex:'^([^/]+)/'}}", "Octo-Org", true},
		{"{{parent | regex:'(a|O)cto'}}", "O", true},
		{"{{parent | regex:'^(x)'}}", "", false}, // no match: absent
		{"{{$.issue_url | trim_prefix:https://api.github.com/repos/ | before:/issues}}", "o/r", true},
		{"{{$.issue_url | trim_prefix:'https://' | before:/ | lower}}", "api.github.com", true},
		{"{{external_id | before:: }}", "C1", true},
		{"{{external_id | regex:':(.*)$'}}", "1712345678.000100", true},
		{"{{from}}", "2030-01-02T03:04:05.6Z", true},
		{"{{from | rfc3339}}", "2030-01-02T03:04:05Z", true}, // from rounds down
		{"{{to | rfc3339}}", "2030-01-02T03:04:06Z", true},   // to rounds up
		{"{{from | unix}}", "1893553445", true},
		{"{{to | unix}}", "1893553446", true},
		{"{{from | unix_ms}}", "1893553445600", true},
		{"x-{{$.missing | last_segment}}", "", false},
	} {
		tm, err := parseTemplate(c.src, ctx)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		got, ok, err := tm.render(s, nil, false)
		if err != nil || ok != c.ok || got != c.want {
			t.Fatalf("%s: %q %v %v, want %q %v", c.src, got, ok, err, c.want, c.ok)
		}
	}
	for bad, want := range map[string]string{
		"{{parent | regex:'[a-'}}":           "not a valid regular expression",
		"{{parent | regex:'a'}}":             "exactly one capturing group",
		"{{parent | regex:'(a)(b)'}}":        "exactly one capturing group",
		"{{parent | regex:}}":                "needs an expression",
		"{{parent | regex:'(a}}":             "not closed",
		"{{parent | unix}}":                  "only from and to are times",
		"{{from | unix | rfc3339}}":          "one time format only",
		"{{from | unix | lower}}":            "last filter",
		"{{parent | trim_prefix:}}":          "needs a prefix",
		"{{parent | upper}}":                 "unknown filter",
		"{{parent | omitempty}}":             "only applies to write.body",
		"{{$.issue_url | last_segment:foo}}": "unknown filter",
	} {
		_, err := parseTemplate(bad, ctx)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v, want %q", bad, err, want)
		}
	}
}

func TestParseTime(t *testing.T) {
	for _, c := range []struct {
		v    any
		want time.Time
		ok   bool
	}{
		{"2024-01-02T03:04:05Z", time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), true},
		{"2024-01-02T03:04:05.123+09:00", time.Date(2024, 1, 1, 18, 4, 5, 123e6, time.UTC), true},
		{json.Number("1712345678"), time.Unix(1712345678, 0), true},
		{"1712345678.000100", time.Unix(1712345678, 100_000), true}, // Slack's ts
		{json.Number("1712345678.5"), time.Unix(1712345678, 5e8), true},
		{json.Number("1712345678123"), time.UnixMilli(1712345678123), true}, // milliseconds
		{"", time.Time{}, true},
		{nil, time.Time{}, true},
		{json.Number("0"), time.Time{}, true},
		{"yesterday", time.Time{}, false},
		{json.Number("-5"), time.Time{}, false},
		{json.Number("1e9"), time.Time{}, false},
		{true, time.Time{}, false},
	} {
		got, ok := parseTime(c.v, true)
		if ok != c.ok || !got.Equal(c.want) {
			t.Fatalf("%v: %v %v, want %v %v", c.v, got, ok, c.want, c.ok)
		}
	}
}

func TestLinkHeader(t *testing.T) {
	for h, want := range map[string]string{
		`<https://api.github.com/x?page=2>; rel="next", <https://api.github.com/x?page=5>; rel="last"`: "https://api.github.com/x?page=2",
		`<https://a/x?page=1>; rel="prev", <https://a/x?page=3>; rel="next"`:                           "https://a/x?page=3",
		`<https://a/x?q=a,b>; rel="next"`:                                                              "https://a/x?q=a,b",
		`<https://a/x>; title="a, b"; rel="next last"`:                                                 "https://a/x",
		`<https://a/x>; REL=next`:                                                                      "https://a/x",
		`<https://a/x?page=5>; rel="last"`:                                                             "",
		`https://a/x; rel="next"`:                                                                      "",
		``:                                                                                             "",
	} {
		if got := nextLink(http.Header{"Link": {h}}); got != want {
			t.Fatalf("%q: %q, want %q", h, got, want)
		}
	}
}

// FuzzTemplate: no template text makes parsing or rendering panic.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"{{base}}/x/{{parent | regex:'#([0-9]+)$'}}?a={{from | unix}}", "{{$.a | last_segment | lower}}",
		"{{parent | trim_prefix:'a|b' | before:/}}", "{{ {{", "{{x | regex:'(}}", "$.a[0]"} {
		f.Add(s)
	}
	ctx := tctx{vars: []string{varBase, varParent, varFrom, varTo}, doc: "doc", payload: true}
	s := &scope{vars: map[string]string{varBase: "http://h", varParent: "p/1#2"}, times: map[string]time.Time{varFrom: time.Unix(5, 5)},
		doc: map[string]any{"a": []any{"x/y"}}, hasDoc: true, payload: map[string]any{}, hasPay: true}
	f.Fuzz(func(t *testing.T, src string) {
		if tm, err := parseTemplate(src, ctx); err == nil {
			_, _, _ = tm.render(s, url.QueryEscape, false)
		}
		if u, err := parseURLTemplate(src, ctx, true); err == nil {
			_, _, _ = u.render(s, false)
		}
	})
}
