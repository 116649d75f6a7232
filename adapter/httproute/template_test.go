package httproute

import (
	"encoding/json"
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
