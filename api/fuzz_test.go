package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// submitSeeds are bodies and Idempotency-Key headers of submits: dry runs,
// invalid routes, malformed JSON and fields out of range.
var submitSeeds = []struct{ body, key string }{
	{submitBodyJSON("social_post", "acct_1", "f-1", `{"body":"x"}`, "dry_run", "true"), ""},
	{submitBodyJSON("social_post", "acct_1", "", `{"body":"x","assets":[]}`, "dry_run", "true"), `"f-2"`},
	{submitBodyJSON("no_route", "acct_1", "f-3", `{"body":"x"}`), ""},
	{submitBodyJSON("Bad Route", "acct_1", "f-4", `{"body":"x"}`), ""},
	{submitBodyJSON("social_post", "acct_1", "f-5", `{"body":"x"}`, "dry_run", "true", "planned_at", "2026-07-22T09:00:00Z", "expires_at", "2026-07-23T09:00:00Z"), ""},
	{`{"route":"no_route","account":"a","request_id":"r","payload":{"body":"\u00e9","n":1e400}}`, ""},
	{`{"route":"no_route","account":"a","request_id":"r","payload":[1,2,{"a":{"b":null}}]}`, `"x\"y"`},
	{`{"route":"social_post","account":"a","request_id":"r","payload":{"body":"x","body":"y"},"dry_run":true}`, ""},
	{`{"route":"social_post","dry_run":true,"account":"` + strings.Repeat("a", 300) + `","request_id":"r","payload":{}}`, ""},
	{`{"route":"social_post","dry_run":true,"account":"a","request_id":"r","payload":{"body":"` + strings.Repeat("[", 100) + `"}}`, ""},
	{`{"route":"social_post","dry_run":true,"account":"a","request_id":"r","payload":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, ""},
	{`{"route":"social_post","dry_run":true,"account":"a","request_id":"r","payload":{"body":"x"},"planned_at":"0000-01-01T00:00:00Z"}`, ""},
	{`{"route":"social_post","dry_run":null,"account":null,"request_id":"r","payload":null}`, ""},
	{`{"route":"social_post","dry_run":true,"account":"a","payload":{"body":"x"}}`, "\"r\u0001\""},
	{`{}`, ""}, {`[]`, ""}, {`null`, ""}, {``, ""}, {`{"a":`, ""}, {"\xff\xfe", "\x00"}, {`{"route":"x"}{"route":"y"}`, ""},
}

// FuzzSubmitBody: whatever the body and Idempotency-Key header of a submit,
// the server answers without panicking, with JSON (a problem for every
// error), and never with a 5xx — those are for real I/O failures of the log
// or the projector, and the fuzzer causes none. It runs over the in-memory
// intent store (no NATS): what it checks is the API's, and it runs fast.
func FuzzSubmitBody(f *testing.F) {
	e := newMemEnv(f, envOptions{})
	for _, s := range submitSeeds {
		f.Add([]byte(s.body), s.key)
	}
	f.Fuzz(func(t *testing.T, body []byte, key string) { checkSubmitAnswer(t, e, body, key) })
}

// The seeds over the real producer and log: Execute validates what the
// API no longer does, and every refusal still names its field.
func TestSubmitSeedsOverTheLog(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, s := range submitSeeds {
		checkSubmitAnswer(t, e, []byte(s.body), s.key)
	}
	if e.Social.Writes() != 0 {
		t.Fatalf("a seed wrote: %d writes", e.Social.Writes())
	}
}

// checkSubmitAnswer sends one submit and checks the answer: no 5xx, a JSON
// object, a problem for every error, and a field for every 400.
func checkSubmitAnswer(t *testing.T, e *env, body []byte, key string) {
	t.Helper()
	req := httptest.NewRequest("POST", "/v1/intents", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+secretAdmin)
	if key != "" {
		req.Header["Idempotency-Key"] = []string{key}
	}
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	if rec.Code >= 500 {
		t.Fatalf("status %d for body %q key %q: %s", rec.Code, body, key, rec.Body.Bytes())
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("status %d with a body that is not a JSON object: %q", rec.Code, rec.Body.Bytes())
	}
	if rec.Code >= 400 {
		if rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("error %d is not a problem: %q", rec.Code, rec.Header().Get("Content-Type"))
		}
		if st, _ := m["status"].(float64); int(st) != rec.Code {
			t.Fatalf("problem status %v for %d", m["status"], rec.Code)
		}
		if rec.Code == http.StatusBadRequest {
			if f, _ := m["field"].(string); f == "" {
				t.Fatalf("400 without a field: %s", rec.Body.Bytes())
			}
		}
	}
}
