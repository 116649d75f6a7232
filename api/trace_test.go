package api

import (
	"net/http"
	"testing"

	"github.com/settle-dev/settle/events"
)

// A submit's W3C traceparent is recorded on the intent (IntentStarted),
// tracing on or off, so that its reconciliation continues the caller's
// trace; a malformed one is ignored, and the submit goes on.
func TestSubmitRecordsTheCallersTraceparent(t *testing.T) {
	e := newEnv(t, envOptions{})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, c := range []struct{ key, header, want string }{
		{"traced-1", tp, tp},
		{"traced-2", "00-not-a-trace", ""},
	} {
		r := e.do("POST", "/v1/intents", secretAgent, submitBodyJSON("social_post", "acct_1", c.key, `{"body":"traced"}`), "traceparent", c.header)
		if r.code != http.StatusCreated {
			t.Fatalf("%s: %d %s", c.key, r.code, r.body)
		}
		h := e.history("social_post", r.str(t, "intent_id"))
		started, ok := h[0].Data.(*events.IntentStartedData)
		if !ok {
			t.Fatalf("%s: first event %s, want IntentStarted", c.key, h[0].Type)
		}
		if started.Traceparent != c.want {
			t.Fatalf("%s: traceparent %q, want %q", c.key, started.Traceparent, c.want)
		}
	}
}
