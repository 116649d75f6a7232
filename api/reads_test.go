package api

import (
	"net/http"
	"testing"
)

// A new submit does not read the log (Execute records it with CAS
// "subject empty"; the answer is the intent as Execute left it), a replay
// reads it once (after that CAS failed), and so do a GET and an
// operator action (the action appends to the intent as it was read, and
// answers from it).
func TestOneLogReadPerRequest(t *testing.T) {
	e := newEnv(t, envOptions{})
	reads := func(what string, want int64, do func() *response, code int) *response {
		t.Helper()
		before := e.Store.Loads()
		r := do()
		if r.code != code {
			t.Fatalf("%s: %d %s", what, r.code, r.body)
		}
		if got := e.Store.Loads() - before; got != want {
			t.Fatalf("%s read the log %d times, want %d", what, got, want)
		}
		return r
	}
	body := submitBodyJSON("social_post", "acct_1", "reads-1", `{"body":"hello"}`)
	first := reads("a submit", 0, func() *response { return e.do("POST", "/v1/intents", secretAgent, body) }, http.StatusCreated)
	id := first.str(t, "intent_id")
	if first.str(t, "state") != "verifying" || e.Social.Effects() != 1 {
		t.Fatalf("submit: %s, %d effects", first.body, e.Social.Effects())
	}
	// The answer is what the log holds: its last sequence and version.
	h := e.history("social_post", id)
	if m := first.json(t); int(m["version"].(float64)) != len(h) || uint64(m["last_seq"].(float64)) == 0 || len(m["history"].([]any)) != len(h) {
		t.Fatalf("submit answer %s, log has %d events", first.body, len(h))
	}
	reads("a replay", 1, func() *response { return e.do("POST", "/v1/intents", secretAgent, body) }, http.StatusOK)
	reads("a GET", 1, func() *response { return e.do("GET", "/v1/intents/"+id, secretAgent, "") }, http.StatusOK)

	pending := e.do("POST", "/v1/intents", secretAgent, submitBodyJSON("social_approval", "acct_1", "reads-2", `{"body":"hi"}`))
	pid := pending.str(t, "intent_id")
	if pending.code != http.StatusCreated || pending.str(t, "state") != "awaiting_approval" {
		t.Fatalf("approval route: %d %s", pending.code, pending.body)
	}
	ok := reads("an approval", 1, func() *response {
		return e.do("POST", "/v1/intents/"+pid+"/approve", secretAdmin, `{"reason":"fine"}`)
	}, http.StatusOK)
	if ok.str(t, "state") != "approved" || lastOf(e.history("social_approval", pid), "Approved") == nil {
		t.Fatalf("approve: %s", ok.body)
	}
	// A refused action reads once too, and names the state it read.
	refused := reads("a refused approval", 1, func() *response {
		return e.do("POST", "/v1/intents/"+pid+"/approve", secretAdmin, `{"reason":"again"}`)
	}, http.StatusConflict)
	if refused.str(t, "state") != "approved" {
		t.Fatalf("refusal: %s", refused.body)
	}
}
