package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
)

// The CLI's errors over the API say what to do: a hint (printed by main
// after the error) for a server that does not answer, a missing or
// refused token, an unknown intent and a refused action.
func TestCLIErrorsCarryHints(t *testing.T) {
	answer := func(status int, typ string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"type":"https://settle.dev/problems/` + typ + `","title":"t","status":1,"detail":"d"}`))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	for _, c := range []struct {
		name, api string
		args      []string
		hint      string
	}{
		{"no server", closed, []string{"intents", "list"}, "is settle serve running at " + closed},
		{"no token", answer(401, "unauthorized"), []string{"intents", "list"}, "$SETTLE_TOKEN"},
		{"no scope", answer(403, "forbidden"), []string{"approve", "in_x", "--reason", "r"}, "scope"},
		{"no intent", answer(404, "not-found"), []string{"intents", "show", "in_x"}, "settle intents list"},
		{"refused", answer(409, "action-not-allowed"), []string{"abandon", "in_x", "--reason", "r"}, "settle intents show ID"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			m := &Main{Stdout: &out, Stderr: &errb}
			err := m.Run(t.Context(), append(c.args, "--api", c.api))
			if err == nil {
				t.Fatal("no error")
			}
			if h := errors.FlattenHints(err); !strings.Contains(h, c.hint) {
				t.Fatalf("error %v: hint %q, want it to name %q", err, h, c.hint)
			}
		})
	}
}
