package httproute_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/testharness"
)

// secretToken is distinctive so that a leak into any string is caught.
const secretToken = "s3cr3t-TOKEN-must-never-leak-9c1e"

const (
	asset1 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	asset2 = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
)

var examplesDir = filepath.Join("..", "..", "examples", "routes")

func exampleFile(name string) string { return filepath.Join(examplesDir, name) }

func readExample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(exampleFile(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// exampleEnv points every example at base with the secret token.
func exampleEnv(base string) map[string]string {
	return testharness.FakeEnv(testharness.At{Addr: base, Secret: secretToken})
}

// loadExample loads an example file with Load and returns its only route's
// adapter.
func loadExample(t testing.TB, name, base string) *httproute.Adapter {
	t.Helper()
	routes, err := httproute.Load(exampleFile(name), envOf(exampleEnv(base)))
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	if len(routes) != 1 {
		t.Fatalf("%s: %d routes", name, len(routes))
	}
	a, ok := routes[0].Adapter.(*httproute.Adapter)
	if !ok {
		t.Fatalf("%s: adapter is %T", name, routes[0].Adapter)
	}
	return a
}

// buildYAML parses and builds a route file's only route.
func buildYAML(t testing.TB, data []byte, env map[string]string) *httproute.Adapter {
	t.Helper()
	cfgs, err := httproute.Parse(data, envOf(env))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	r, err := httproute.Build(cfgs[0])
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return r.Adapter.(*httproute.Adapter)
}

func callError(t testing.TB, err error) *adapter.CallError {
	t.Helper()
	noSecret(t, "error", err)
	var ce *adapter.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("want *adapter.CallError, got %T %v", err, err)
	}
	return ce
}

// noSecret fails when v, formatted in every common way, holds the token.
func noSecret(t testing.TB, what string, v any) {
	t.Helper()
	if v == nil {
		return
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(f, v); strings.Contains(s, secretToken) {
			t.Fatalf("%s leaks the secret with %s: %s", what, f, s)
		}
	}
	if err, ok := v.(error); ok {
		var ce *adapter.CallError
		if errors.As(err, &ce) && strings.Contains(ce.Message, secretToken) {
			t.Fatalf("%s: CallError message leaks the secret", what)
		}
	}
	if b, err := json.Marshal(v); err == nil && strings.Contains(string(b), secretToken) {
		t.Fatalf("%s leaks the secret in JSON", what)
	}
}

func writeReq(n int, account, parent string, payload json.RawMessage) adapter.WriteRequest {
	reqID := fmt.Sprintf("req-%d", n)
	intent := events.ScopedIntentID("default", "route", "acct_1", reqID)
	return adapter.WriteRequest{
		IntentID:         intent,
		AttemptID:        events.AttemptID(intent, 1),
		RequestID:        reqID,
		IdempotencyKey:   events.IdempotencyKey(intent),
		Account:          account,
		ParentExternalID: parent,
		Payload:          payload,
	}
}

func hashOf(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	h, err := events.PayloadSHA256(raw)
	if err != nil {
		t.Fatalf("hash %s: %v", raw, err)
	}
	return h
}

var bg = context.Background()

// oneError asserts that Check finds exactly one problem in data, naming
// route and field and saying each of want, and that Parse (what Load and
// serve use) refuses the file too.
func oneError(t *testing.T, data []byte, env map[string]string, route, field string, want ...string) {
	t.Helper()
	errs := httproute.Check(data, envOf(env))
	if len(errs) != 1 {
		t.Fatalf("%d errors, want 1: %v", len(errs), errs)
	}
	var re *httproute.RouteError
	if !errors.As(errs[0], &re) || re.Route != route || re.Field != field {
		t.Fatalf("got %v, want route %s field %s", errs[0], route, field)
	}
	for _, w := range want {
		if !strings.Contains(re.Reason, w) {
			t.Fatalf("reason %q does not say %q", re.Reason, w)
		}
	}
	if _, err := httproute.Parse(data, envOf(env)); err == nil {
		t.Fatal("Parse accepted it")
	}
}

// itoa is n in decimal.
func itoa(n int) string { return strconv.Itoa(n) }
