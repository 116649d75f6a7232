package httproute_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter/httproute"
)

// mutate applies old->new replacements to a file, failing when one does
// not apply (so a test never silently checks the unmodified file).
func mutate(t testing.TB, data []byte, pairs ...string) []byte {
	t.Helper()
	s := string(data)
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("mutation %q does not apply", pairs[i])
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return []byte(s)
}

var allExamples = []string{"social.yaml", "booking.yaml", "payment.yaml", "github_comments.yaml", "slack_message.yaml", "stripe_payment_intent.yaml"}

func TestExamplesAreValid(t *testing.T) {
	for _, f := range allExamples {
		if errs := httproute.Check(readExample(t, f), envOf(exampleEnv("http://127.0.0.1:9"))); errs != nil {
			t.Fatalf("%s: %v", f, errs)
		}
	}
}

// TestRouteFileErrors: each broken variant of an example yields exactly
// one error, naming the route and the field.
func TestRouteFileErrors(t *testing.T) {
	social := readExample(t, "social.yaml")
	bookingFile := readExample(t, "booking.yaml")
	env := exampleEnv("http://127.0.0.1:9")
	noToken := exampleEnv("http://127.0.0.1:9")
	delete(noToken, "SOCIAL_TOKEN")
	dup := mutate(t, social, "routes:\n", "routes:\n  - name: social_post\n    base_url: http://127.0.0.1:9\n    write: {method: POST, url: \"{{base}}/x\", response: {external_id: $.id}}\n    policy: {trust_response: true, retry: never}\n")

	cases := []struct {
		name  string
		data  []byte
		env   map[string]string
		route string
		field string
	}{
		{"missing field", mutate(t, social, `      url: "{{base}}/v1/posts"`+"\n", ""), env, "social_post", "write.url"},
		{"missing section", mutate(t, social, "    readback:\n      url: \"{{base}}/v1/posts/{{external_id}}\"\n", ""), env, "social_post", "readback"},
		{"unknown variable", mutate(t, social, `"{{base}}/v1/posts"`, `"{{base}}/v1/posts/{{nope}}"`), env, "social_post", "write.url"},
		{"unbalanced braces", mutate(t, social, `"{{base}}/v1/posts"`, `"{{base}}/v1/posts/{{account"`), env, "social_post", "write.url"},
		{"stray closing braces", mutate(t, social, `body: "{{payload.body}}"`, `body: "{{payload.body}}}}"`), env, "social_post", "write.body.body"},
		{"unknown payload field", mutate(t, social, `"{{payload.body}}"`, `"{{payload.text}}"`), env, "social_post", "write.body.body"},
		{"variable out of place", mutate(t, social, `"{{base}}/v1/posts"`, `"{{base}}/v1/posts?c={{cursor}}"`), env, "social_post", "write.url"},
		{"unknown filter", mutate(t, social, "| omitempty}}\"\n        parent_id", "| upper}}\"\n        parent_id"), env, "social_post", "write.body.assets"},
		{"unknown capability", mutate(t, social, "      search: true\n", "      search: true\n      frobnicate: true\n"), env, "social_post", "capabilities.frobnicate"},
		{"unknown route key", mutate(t, social, "    timeout: 10s\n", "    timeout: 10s\n    descriptoin: typo\n"), env, "social_post", "descriptoin"},
		{"bad duration", mutate(t, social, "attempt_deadline: 1m", "attempt_deadline: 1 minute"), env, "social_post", "policy.attempt_deadline"},
		{"bad duration with dependants", mutate(t, bookingFile, "key_retention: 24h", "key_retention: 1d"), env, "booking_change", "capabilities.key_retention"},
		{"bad JSON path", mutate(t, social, "author_id: $.author_id", "author_id: $.author..id"), env, "social_post", "search.fields.author_id"},
		{"bad JSON index", mutate(t, social, "items: $.items", "items: $.items[x]"), env, "social_post", "search.items"},
		{"bad method", mutate(t, social, "method: POST", "method: FETCH"), env, "social_post", "write.method"},
		{"policy invalid", mutate(t, social, "retry_budget: 1", "retry_budget: 11"), env, "social_post", "policy.retry_budget"},
		{"policy value", mutate(t, social, "retry: auto", "retry: sometimes"), env, "social_post", "policy.retry"},
		{"missing env var", social, noToken, "social_post", "headers.Authorization"},
		{"literal secret", mutate(t, social, "Bearer ${env:SOCIAL_TOKEN}", "Bearer abc123"), env, "social_post", "headers.Authorization"},
		{"env outside headers", mutate(t, social, `"{{base}}/v1/posts"`, `"{{base}}/v1/posts?k=${env:SOCIAL_TOKEN}"`), env, "social_post", "write.url"},
		{"duplicate route", dup, env, "social_post", "name"},
		{"bad name", mutate(t, social, "name: social_post", "name: Social Post"), env, "routes[0]", "name"},
		{"wrong type", mutate(t, social, "max_pages: 100", "max_pages: many"), env, "social_post", "search.max_pages"},
		{"capability disagrees", mutate(t, social, "status_query: false", "status_query: true"), env, "social_post", "capabilities.status_query"},
		{"url leaves base", mutate(t, social, `url: "{{base}}/v1/posts"`, `url: "https://elsewhere.example/v1/posts"`), env, "social_post", "write.url"},
		{"bad base_url", social, map[string]string{"SOCIAL_BASE_URL": "ftp://x", "SOCIAL_TOKEN": "t"}, "social_post", "base_url"},
		{"bad field type", mutate(t, social, "{type: string, required: true, non_empty: true}", "{type: text, required: true}"), env, "social_post", "payload.fields.body.type"},
		{"cursor without next_cursor", mutate(t, social, "      next_cursor: $.next_cursor\n", ""), env, "social_post", "search.next_cursor"},
		{"outcome without code", mutate(t, bookingFile, "code: accepted_processing", "code: Accepted Processing"), env, "booking_change", "write.outcomes[1].code"},
		{"unknown normalisation", mutate(t, social, "      near_match: [body]\n", "      near_match: [body]\n      normalize: [entities, html]\n"), env, "social_post", "payload.normalize[1]"},
		{"normalisation twice", mutate(t, social, "      near_match: [body]\n", "      near_match: [body]\n      normalize: [links, links]\n"), env, "social_post", "payload.normalize[1]"},
		{"bad state map", mutate(t, bookingFile, "processing: processing,", "processing: pending,"), env, "booking_change", "status.map.processing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := httproute.Check(c.data, envOf(c.env))
			if len(errs) != 1 {
				t.Fatalf("%d errors, want 1: %v", len(errs), errs)
			}
			var re *httproute.RouteError
			if !errors.As(errs[0], &re) {
				t.Fatalf("%T is not a *RouteError", errs[0])
			}
			if re.Route != c.route || re.Field != c.field || re.Reason == "" {
				t.Fatalf("got route %q field %q (%v), want route %q field %q", re.Route, re.Field, re, c.route, c.field)
			}
			if want := "route " + c.route + ": " + c.field + ": "; !strings.HasPrefix(re.Error(), want) {
				t.Fatalf("text %q does not start with %q", re.Error(), want)
			}
			if _, err := httproute.Parse(c.data, envOf(c.env)); err == nil || !errors.As(err, &re) {
				t.Fatalf("Parse accepted a broken file: %v", err)
			}
		})
	}
}

// TestCheckReportsEveryProblem: problems in several routes and fields
// are all reported, not only the first.
func TestCheckReportsEveryProblem(t *testing.T) {
	data := mutate(t, readExample(t, "social.yaml"),
		"method: POST", "method: SEND",
		"author_id: $.author_id", "author_id: $.",
		"search: true\n", "search: true\n      extra: 1\n",
		"attempt_deadline: 1m", "attempt_deadline: soon",
	)
	data = append(data, []byte(`  - name: second
    base_url: http://127.0.0.1:9
    write: {method: POST, url: "{{base}}/x/{{bogus}}", response: {external_id: $.id}}
    policy: {trust_response: true, retry_budget: -1}
`)...)
	errs := httproute.Check(data, envOf(exampleEnv("http://127.0.0.1:9")))
	want := map[string]bool{
		"social_post/write.method": true, "social_post/search.fields.author_id": true,
		"social_post/capabilities.extra": true, "social_post/policy.attempt_deadline": true,
		"second/write.url": true, "second/policy.retry_budget": true,
	}
	got := map[string]bool{}
	for _, e := range errs {
		var re *httproute.RouteError
		if !errors.As(e, &re) {
			t.Fatalf("%T", e)
		}
		got[re.Route+"/"+re.Field] = true
	}
	if len(errs) != len(want) {
		t.Fatalf("%d errors, want %d: %v", len(errs), len(want), errs)
	}
	for k := range want {
		if !got[k] {
			t.Fatalf("missing %s in %v", k, errs)
		}
	}
}

func TestFileLevelErrors(t *testing.T) {
	for _, c := range []struct {
		name, data, field string
	}{
		{"empty", "", "routes"},
		{"not yaml", "routes: [", ""},
		{"no routes", "version: 1\n", "routes"},
		{"empty routes", "routes: []\n", "routes"},
		{"unknown top key", "routes: []\nextra: 1\n", "extra"},
		{"bad version", "version: 2\nroutes: [{}]\n", "version"},
		{"two documents", "routes: []\n---\nroutes: []\n", ""},
		{"duplicate key", "routes: []\nroutes: []\n", ""},
		{"scalar", "hello\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := httproute.Check([]byte(c.data), envOf(nil))
			if len(errs) == 0 {
				t.Fatal("no error")
			}
			var re *httproute.RouteError
			if !errors.As(errs[0], &re) || re.Route != "" || re.Field != c.field {
				t.Fatalf("got %#v, want a file error at %q", errs[0], c.field)
			}
			if !strings.HasPrefix(re.Error(), "routes file: ") {
				t.Fatalf("text %q", re.Error())
			}
		})
	}
}

// TestAliasBomb: anchors that expand exponentially are refused, fast.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 10; i++ {
		p := "*a" + itoa(i-1)
		b.WriteString("a" + itoa(i) + ": &a" + itoa(i) + " [" + strings.Repeat(p+", ", 9) + p + "]\n")
	}
	b.WriteString("routes: [*a9]\n")
	errs := httproute.Check([]byte(b.String()), envOf(nil))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "anchors") {
		t.Fatalf("alias bomb: %v", errs)
	}
}

// FuzzParse: no route file makes Parse, Check or Build panic; every
// problem is a *RouteError with a reason; a file that parses builds.
func FuzzParse(f *testing.F) {
	for _, name := range allExamples {
		data := readExample(f, name)
		f.Add(data)
		f.Add(data[:len(data)/2])
		f.Add(mutate(f, data, "{{base}}/", "{{base/"))
		f.Add(mutate(f, data, "$.", "$.."))
		f.Add(mutate(f, data, "routes:", "routes: &r\n  - *r\nx:"))
	}
	f.Add([]byte("routes:\n  - name: a\n    base_url: http://h\n    write: {method: POST, url: \"{{base}}/{{payload.x[0]}}\", body: [\"{{payload}}\", 1, 2.5, null, true, {a: \"$.b\"}], response: {external_id: \"{{$.a}}\"}}\n    policy: {trust_response: true}\n"))
	f.Add([]byte("routes: [{name: a, write: {body: {a: !!binary aGk=}}}]"))
	f.Add([]byte("routes: [{name: a, payload: {fields: {x: {type: array, items: {type: object, fields: {y: integer}}, default: [{}]}}}}]"))
	f.Add([]byte("? [a]\n: b\n"))
	env := envOf(exampleEnv("http://127.0.0.1:9"))
	f.Fuzz(func(t *testing.T, data []byte) {
		errs := httproute.Check(data, env)
		for _, e := range errs {
			var re *httproute.RouteError
			if !errors.As(e, &re) || re.Reason == "" {
				t.Fatalf("not a RouteError with a reason: %#v", e)
			}
			if strings.Contains(e.Error(), secretToken) {
				t.Fatalf("an error holds the secret: %v", e)
			}
		}
		cfgs, err := httproute.Parse(data, env)
		if (err == nil) != (len(errs) == 0) {
			t.Fatalf("Parse (%v) and Check (%d errors) disagree", err, len(errs))
		}
		for _, cfg := range cfgs {
			r, err := httproute.Build(cfg)
			if err != nil {
				t.Fatalf("a parsed route does not build: %v", err)
			}
			noSecret(t, "route", r)
		}
	})
}

// Every field of events.Policy can be declared in a route file:
// resend_budget and read_failing_after (in ARCHITECTURE's policy) were
// refused as unknown keys. Out-of-range values are refused naming them.
func TestPolicyTakesResendBudgetAndReadFailingAfter(t *testing.T) {
	social := readExample(t, "social.yaml")
	env := envOf(exampleEnv("http://127.0.0.1:9"))
	data := mutate(t, social, "      clock_skew: 5s\n", "      clock_skew: 5s\n      resend_budget: 2\n      read_failing_after: 45m\n")
	cfgs, err := httproute.Parse(data, env)
	if err != nil {
		t.Fatal(err)
	}
	p := cfgs[0].Policy
	if p.ResendBudget != 2 || p.ReadFailingAfter.D() != 45*time.Minute {
		t.Fatalf("policy resend_budget %d, read_failing_after %s", p.ResendBudget, p.ReadFailingAfter.D())
	}
	if errs := httproute.Check(data, env); errs != nil {
		t.Fatalf("refused: %v", errs)
	}
	bad := mutate(t, social, "      clock_skew: 5s\n", "      clock_skew: 5s\n      resend_budget: 99\n")
	errs := httproute.Check(bad, env)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "resend_budget") {
		t.Fatalf("resend_budget 99: %v", errs)
	}
}
