package testharness

import (
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/examples/routes"
)

// Fake is what a route needs of a fake API (package fakeapi's servers):
// its root URL and its bearer token.
type Fake interface {
	URL() string
	Token() string
}

// At is an API at a fixed address with a fixed token, for a route whose
// calls must fail or never be made (nothing need listen there).
type At struct{ Addr, Secret string }

// URL is the address.
func (a At) URL() string { return a.Addr }

// Token is the token.
func (a At) Token() string { return a.Secret }

// FakeEnv resolves every ${env:...} of the example route files against
// one fake API: each base URL is its URL, each token its token.
func FakeEnv(api Fake) map[string]string {
	u, tok := api.URL(), api.Token()
	return map[string]string{
		"SOCIAL_BASE_URL": u, "SOCIAL_TOKEN": tok,
		"BOOKING_BASE_URL": u, "BOOKING_TOKEN": tok,
		"PAYMENT_BASE_URL": u, "PAYMENT_TOKEN": tok,
		"GITHUB_API_URL": u, "GITHUB_REPOSITORY": "octo-org/hello-world", "GITHUB_TOKEN": tok,
		"SLACK_API_URL": u, "SLACK_BOT_TOKEN": tok,
		"STRIPE_API_URL": u, "STRIPE_SECRET_KEY": tok,
	}
}

// RouteFile returns the example route file name (examples/routes), with
// each (old, new) pair of edits applied once; an edit that does not apply
// fails the test.
func RouteFile(t testing.TB, name string, edits ...string) []byte {
	t.Helper()
	b, err := routes.File(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(edits)%2 != 0 {
		t.Fatalf("%s: edits come in (old, new) pairs", name)
	}
	text := string(b)
	for i := 0; i < len(edits); i += 2 {
		if !strings.Contains(text, edits[i]) {
			t.Fatalf("%s: edit %q does not apply", name, edits[i])
		}
		text = strings.Replace(text, edits[i], edits[i+1], 1)
	}
	return []byte(text)
}

// CompileRoute compiles the only route of a route file, its ${env:...}
// resolved from env, after each mod changed its config (its name, clock,
// client, ...).
func CompileRoute(t testing.TB, data []byte, env map[string]string, mods ...func(*httproute.RouteConfig)) adapter.Route {
	t.Helper()
	cfgs, err := httproute.Parse(data, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("route file: %v", err)
	}
	if len(cfgs) != 1 {
		t.Fatalf("route file: %d routes, want 1", len(cfgs))
	}
	c := cfgs[0]
	for _, m := range mods {
		m(&c)
	}
	r, err := httproute.Build(c)
	if err != nil {
		t.Fatalf("route %s: %v", c.Name, err)
	}
	return r
}

// RouteTimeout sets a route's timeout of each HTTP call (a test whose
// fake holds a response fails the call sooner than the file's timeout).
func RouteTimeout(d time.Duration) func(*httproute.RouteConfig) {
	return func(c *httproute.RouteConfig) { c.Timeout = d }
}

// ExampleRoute compiles the example route file name against a fake API
// (FakeEnv), after each mod changed its config.
func ExampleRoute(t testing.TB, name string, api Fake, mods ...func(*httproute.RouteConfig)) adapter.Route {
	t.Helper()
	return CompileRoute(t, RouteFile(t, name), FakeEnv(api), mods...)
}
