package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
)

func TestSubmitDroppedResponseThenReplayAndMismatch(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.Social.Next(fakeapi.CommitThenDrop())
	body := submitBodyJSON("social_post", "acct_1", "task-1:step-1", `{"body":"hello"}`)

	first := e.do("POST", "/v1/intents", secretAgent, body)
	if first.code != http.StatusCreated {
		t.Fatalf("first submit: %d %s", first.code, first.body)
	}
	if ct := first.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	if first.header.Get("Idempotent-Replayed") != "" {
		t.Fatal("a first submit is not a replay")
	}
	id := first.str(t, "intent_id")
	if st := first.str(t, "state"); st != string(fsm.Unknown) {
		t.Fatalf("state after the dropped response: %s", st)
	}
	if loc := first.header.Get("Location"); loc != "/v1/intents/"+id {
		t.Fatalf("Location %q", loc)
	}
	if e.Social.Effects() != 1 || e.Social.Writes() != 1 {
		t.Fatalf("effects %d writes %d", e.Social.Effects(), e.Social.Writes())
	}
	m := first.json(t)
	if hist, _ := m["history"].([]any); len(hist) != 2 { // IntentStarted, OutcomeUnknown
		t.Fatalf("history %v", m["history"])
	}

	// The same submit: the stored result, nothing written.
	again := e.do("POST", "/v1/intents", secretAgent, body)
	if again.code != http.StatusOK || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d replayed=%q %s", again.code, again.header.Get("Idempotent-Replayed"), again.body)
	}
	if again.str(t, "intent_id") != id || again.str(t, "state") != string(fsm.Unknown) {
		t.Fatalf("replay answered %s", again.body)
	}
	if e.Social.Effects() != 1 || e.Social.Writes() != 1 {
		t.Fatalf("a replay wrote: effects %d writes %d", e.Social.Effects(), e.Social.Writes())
	}

	// Another payload under the same request id: 422, nothing written.
	other := e.do("POST", "/v1/intents", secretAgent, submitBodyJSON("social_post", "acct_1", "task-1:step-1", `{"body":"HELLO"}`))
	other.problem(t, http.StatusUnprocessableEntity, "")
	if e.Social.Effects() != 1 || e.Social.Writes() != 1 {
		t.Fatalf("a mismatch wrote: effects %d writes %d", e.Social.Effects(), e.Social.Writes())
	}
	if h := e.history("social_post", id); len(h) != 2 {
		t.Fatalf("the log grew: %d events", len(h))
	}
	// The payload is canonicalised: reordered keys and white space are the same payload.
	same := e.do("POST", "/v1/intents", secretAgent, submitBodyJSON("social_post", "acct_1", "task-1:step-1", `{ "body" : "hello" }`))
	if same.code != http.StatusOK || same.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("canonical replay: %d %s", same.code, same.body)
	}
}

func TestSubmitRequestIDFromHeader(t *testing.T) {
	e := newEnv(t, envOptions{})
	noID := submitBodyJSON("social_post", "acct_1", "", `{"body":"via header"}`)

	r := e.do("POST", "/v1/intents", secretAgent, noID, "Idempotency-Key", `"req-h1"`)
	if r.code != http.StatusCreated || r.str(t, "request_id") != "req-h1" {
		t.Fatalf("header request id: %d %s", r.code, r.body)
	}
	id := r.str(t, "intent_id")
	if want := events.ScopedIntentID("default", "social_post", "acct_1", "req-h1"); id != want {
		t.Fatalf("intent id %s, want %s", id, want)
	}
	// The same id in the body is the same request.
	r = e.do("POST", "/v1/intents", secretAgent, submitBodyJSON("social_post", "acct_1", "req-h1", `{"body":"via header"}`))
	if r.code != http.StatusOK || r.header.Get("Idempotent-Replayed") != "true" || r.str(t, "intent_id") != id {
		t.Fatalf("body replay of a header id: %d %s", r.code, r.body)
	}
	// Bare (non-sf-string) header values are accepted, and equal body ids too.
	r = e.do("POST", "/v1/intents", secretAgent, submitBodyJSON("social_post", "acct_1", "req-h1", `{"body":"via header"}`), "Idempotency-Key", "req-h1")
	if r.code != http.StatusOK || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("header and body equal: %d %s", r.code, r.body)
	}
	if e.Social.Writes() != 1 {
		t.Fatalf("writes %d", e.Social.Writes())
	}

	e.do("POST", "/v1/intents", secretAgent, noID).problem(t, http.StatusBadRequest, "request_id")
	e.do("POST", "/v1/intents", secretAgent, submitBodyJSON("social_post", "acct_1", "req-a", `{"body":"x"}`), "Idempotency-Key", `"req-b"`).
		problem(t, http.StatusBadRequest, "Idempotency-Key")
	e.do("POST", "/v1/intents", secretAgent, noID, "Idempotency-Key", `"unterminated`).problem(t, http.StatusBadRequest, "Idempotency-Key")
	e.do("POST", "/v1/intents", secretAgent, noID, "Idempotency-Key", `""`).problem(t, http.StatusBadRequest, "Idempotency-Key")
	bad := e.do("POST", "/v1/intents", secretAgent, noID, "Idempotency-Key", `"tab\there"`)
	if m := bad.problem(t, http.StatusBadRequest, "Idempotency-Key"); strings.Contains(m["detail"].(string), "request_id") {
		t.Fatalf("a header error names request_id: %v", m["detail"])
	}
	if e.Social.Writes() != 1 {
		t.Fatalf("a refused submit wrote: %d", e.Social.Writes())
	}
}

func TestSubmitRefusesMalformedRequests(t *testing.T) {
	e := newEnv(t, envOptions{})
	cases := []struct {
		name, body, field string
		code              int
		hdr               []string
		query             string
	}{
		{name: "malformed JSON", body: `{"route":"social_post",`, field: "body", code: 400},
		{name: "not an object", body: `["social_post"]`, field: "body", code: 400},
		{name: "trailing data", body: submitBodyJSON("social_post", "acct_1", "r1", `{"body":"x"}`) + `{}`, field: "body", code: 400},
		{name: "unknown field", body: `{"route":"social_post","account":"acct_1","request_id":"r1","payload":{"body":"x"},"colour":"red"}`, field: "colour", code: 400},
		{name: "duplicate field", body: `{"route":"social_post","route":"social_other","account":"acct_1","request_id":"r1","payload":{"body":"x"}}`, field: "route", code: 400},
		{name: "route not a string", body: `{"route":7,"account":"acct_1","request_id":"r1","payload":{"body":"x"}}`, field: "route", code: 400},
		{name: "route malformed", body: submitBodyJSON("Social Post", "acct_1", "r1", `{"body":"x"}`), field: "route", code: 400},
		{name: "route missing", body: `{"account":"acct_1","request_id":"r1","payload":{"body":"x"}}`, field: "route", code: 400},
		{name: "unknown route", body: submitBodyJSON("no_such_route", "acct_1", "r1", `{"body":"x"}`), field: "route", code: 400},
		{name: "account missing", body: `{"route":"social_post","request_id":"r1","payload":{"body":"x"}}`, field: "account", code: 400},
		{name: "payload missing", body: `{"route":"social_post","account":"acct_1","request_id":"r1"}`, field: "payload", code: 400},
		{name: "payload refused by the route", body: submitBodyJSON("social_post", "acct_1", "r1", `{"text":"x"}`), field: "payload", code: 400},
		{name: "payload duplicate keys", body: `{"route":"social_post","account":"acct_1","request_id":"r1","payload":{"body":"x","body":"y"}}`, field: "payload", code: 400},
		{name: "request id with control character", body: submitBodyJSON("social_post", "acct_1", "r\u0001", `{"body":"x"}`), field: "request_id", code: 400},
		// Strings that are not valid UTF-8, or escape half a surrogate
		// pair, are refused naming the field: never read as U+FFFD (so
		// that "r\xff" and "r\xfe" would be one request id).
		{name: "request id not UTF-8", body: `{"route":"social_post","account":"acct_1","request_id":"r` + "\xff" + `","payload":{"body":"x"}}`, field: "request_id", code: 400},
		{name: "request id with a lone surrogate", body: `{"route":"social_post","account":"acct_1","request_id":"r\ud800","payload":{"body":"x"}}`, field: "request_id", code: 400},
		{name: "account not UTF-8", body: `{"route":"social_post","account":"acct_` + "\xfe" + `","request_id":"r1","payload":{"body":"x"}}`, field: "account", code: 400},
		{name: "parent with a lone surrogate", body: `{"route":"social_post","account":"acct_1","request_id":"r1","parent_external_id":"p\udc00","payload":{"body":"x"}}`, field: "parent_external_id", code: 400},
		{name: "planned_at not a time", body: submitBodyJSON("social_post", "acct_1", "r1", `{"body":"x"}`, "planned_at", "yesterday"), field: "planned_at", code: 400},
		{name: "dry_run not a bool", body: submitBodyJSON("social_post", "acct_1", "r1", `{"body":"x"}`, "dry_run", `"yes"`), field: "dry_run", code: 400},
		{name: "bad wait", body: submitBodyJSON("social_post", "acct_1", "r1", `{"body":"x"}`), query: "?wait=soon", field: "wait", code: 400},
		{name: "unknown query parameter", body: submitBodyJSON("social_post", "acct_1", "r1", `{"body":"x"}`), query: "?colour=red", field: "colour", code: 400},
		{name: "not JSON content", body: `route=social_post`, hdr: []string{"Content-Type", "application/x-www-form-urlencoded"}, code: 415},
		{name: "no content type", body: submitBodyJSON("social_post", "acct_1", "r1", `{"body":"x"}`), hdr: []string{"Content-Type", ""}, code: 415},
		{name: "empty body", body: "", code: 415},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.do("POST", "/v1/intents"+c.query, secretSubmitter, c.body, c.hdr...).problem(t, c.code, c.field)
		})
	}
	if e.Social.Writes() != 0 {
		t.Fatalf("a refused request wrote: %d", e.Social.Writes())
	}
	info, err := e.Store.Stream().Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Fatalf("a refused request appended %d events", info.State.Msgs)
	}
}

func TestSubmitDryRunAppendsAndWritesNothing(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.do("POST", "/v1/intents", secretSubmitter, submitBodyJSON("social_post", "acct_1", "dry-1", `{"body":"x"}`, "dry_run", "true"))
	if r.code != http.StatusOK {
		t.Fatalf("dry run: %d %s", r.code, r.body)
	}
	m := r.json(t)
	if m["dry_run"] != true || m["would_write"] != true || m["intent_id"] != events.ScopedIntentID("default", "social_post", "acct_1", "dry-1") {
		t.Fatalf("dry run report %s", r.body)
	}
	info, err := e.Store.Stream().Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 || e.Social.Writes() != 0 {
		t.Fatalf("a dry run appended %d events and made %d writes", info.State.Msgs, e.Social.Writes())
	}
}

func TestSubmitWaitReturnsSettledStateWhileReconcilerRuns(t *testing.T) {
	e := newEnv(t, envOptions{maxWait: time.Minute})
	e.Social.Next(fakeapi.CommitThenDrop(), fakeapi.CommitThenDrop())

	// Without a reconciler the first submit stays unknown.
	body := submitBodyJSON("social_post", "acct_1", "wait-1", `{"body":"wait for me"}`)
	first := e.do("POST", "/v1/intents", secretAgent, body)
	if first.code != http.StatusCreated || first.str(t, "state") != string(fsm.Unknown) {
		t.Fatalf("first: %d %s", first.code, first.body)
	}
	e.RunReconciler("w1")

	// A replay with ?wait= waits on the log until reconciliation settles it.
	r := e.do("POST", "/v1/intents?wait=45s", secretAgent, body)
	if r.code != http.StatusOK || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay with wait: %d %s", r.code, r.body)
	}
	if st := r.str(t, "state"); st != string(fsm.Confirmed) {
		t.Fatalf("replay with wait answered state %s: %s", st, r.body)
	}
	m := r.json(t)
	rc, _ := m["receipt"].(map[string]any)
	if rc == nil || rc["external_id"] != e.Social.Posts()[0].ID || m["settled"] != true {
		t.Fatalf("receipt %v", m["receipt"])
	}

	// A first submit with ?wait= also waits through its own dropped response.
	r = e.do("POST", "/v1/intents?wait=45s", secretAgent, submitBodyJSON("social_post", "acct_1", "wait-2", `{"body":"me too"}`))
	if r.code != http.StatusCreated || r.str(t, "state") != string(fsm.Confirmed) {
		t.Fatalf("first submit with wait: %d %s", r.code, r.body)
	}
	if e.Social.Effects() != 2 || e.Social.Writes() != 2 {
		t.Fatalf("effects %d writes %d", e.Social.Effects(), e.Social.Writes())
	}
}

// A submit whose write is still in flight, seen by the same process (the
// in-process registry) and by another process (write_started on the log),
// answers 409 — or, with ?wait=, the settled result.
func TestSubmitInFlightConflicts(t *testing.T) {
	e := newEnv(t, envOptions{maxWait: time.Minute})
	// A second API process over the same log.
	cfg := DefaultConfig()
	cfg.Service = newService(t, e.Prod, e.Proj, e.Clock.Now)
	cfg.Log, cfg.Now, cfg.Logger, cfg.Tokens = e.Store, e.Clock.Now, e.Logger, testTokens()
	other, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e2 := *e
	e2.srv = other
	e2.http = newLoopbackServer(t, other)

	// The fake holds the response for 3s: the two conflicting submits below
	// only need to arrive while it does (a margin, not an assertion on time).
	e.Social.Next(fakeapi.Delay(3 * time.Second))
	body := submitBodyJSON("social_post", "acct_1", "slow-1", `{"body":"slow"}`)
	var wg sync.WaitGroup
	var first *response
	wg.Add(1)
	go func() { defer wg.Done(); first = e.do("POST", "/v1/intents", secretAgent, body) }()
	// Wait until the fake holds the write (WriteStarted is on the log).
	for i := 0; e.Social.Writes() == 0; i++ {
		if i > 2000 {
			t.Fatal("the write never reached the fake")
		}
		time.Sleep(5 * time.Millisecond)
	}
	same := e.do("POST", "/v1/intents", secretAgent, body)
	same.problem(t, http.StatusConflict, "")
	if same.header.Get("Retry-After") == "" {
		t.Fatal("409 without Retry-After")
	}
	elsewhere := e2.do("POST", "/v1/intents", secretAgent, body)
	p := elsewhere.problem(t, http.StatusConflict, "")
	if p["state"] != string(fsm.WriteStarted) {
		t.Fatalf("the other process's 409 names state %v", p["state"])
	}
	// With ?wait= the other process waits on the log for the settled result
	// (the write returns, the reconciler reads it back).
	e.RunReconciler("w1")
	waited := e2.do("POST", "/v1/intents?wait=45s", secretAgent, body)
	if waited.code != http.StatusOK || waited.str(t, "state") != string(fsm.Confirmed) {
		t.Fatalf("wait on the other process: %d %s", waited.code, waited.body)
	}
	wg.Wait()
	if first.code != http.StatusCreated {
		t.Fatalf("first: %d %s", first.code, first.body)
	}
	if e.Social.Writes() != 1 || e.Social.Effects() != 1 {
		t.Fatalf("writes %d effects %d", e.Social.Writes(), e.Social.Effects())
	}
}

func TestGetAndListIntents(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.Social.Next(fakeapi.CommitThenDrop())
	var ids []string
	for i, rid := range []string{"l-1", "l-2", "l-3"} {
		e.Clock.Advance(time.Second)
		acct := "acct_1"
		if i == 2 {
			acct = "acct_2"
		}
		r := e.do("POST", "/v1/intents", secretSubmitter, submitBodyJSON("social_post", acct, rid, `{"body":"list `+rid+`"}`))
		if r.code != http.StatusCreated {
			t.Fatalf("submit %s: %d %s", rid, r.code, r.body)
		}
		ids = append(ids, r.str(t, "intent_id"))
	}
	// GET reads the log.
	g := e.do("GET", "/v1/intents/"+ids[0], secretReader, "")
	if g.code != http.StatusOK || g.str(t, "state") != string(fsm.Unknown) {
		t.Fatalf("get: %d %s", g.code, g.body)
	}
	m := g.json(t)
	if hist, _ := m["history"].([]any); len(hist) != 2 { // IntentStarted, OutcomeUnknown
		t.Fatalf("history %v", m["history"])
	}
	if att, _ := m["attempt_history"].([]any); len(att) != 1 {
		t.Fatalf("attempts %v", m["attempt_history"])
	}
	if m["last_seq"].(float64) == 0 {
		t.Fatal("no last_seq")
	}
	e.do("GET", "/v1/intents/in_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", secretReader, "").problem(t, http.StatusNotFound, "")
	e.do("GET", "/v1/intents/nope", secretReader, "").problem(t, http.StatusBadRequest, "intent_id")

	e.CatchUp()
	list := func(q string) (items []string, next string) {
		t.Helper()
		r := e.do("GET", "/v1/intents"+q, secretReader, "")
		if r.code != http.StatusOK {
			t.Fatalf("list %s: %d %s", q, r.code, r.body)
		}
		var pg struct {
			Items []struct {
				IntentID string `json:"intent_id"`
			} `json:"items"`
			Next string `json:"next"`
		}
		if err := json.Unmarshal(r.body, &pg); err != nil {
			t.Fatal(err)
		}
		for _, it := range pg.Items {
			items = append(items, it.IntentID)
		}
		return items, pg.Next
	}
	all, _ := list("")
	if len(all) != 3 || all[0] != ids[2] {
		t.Fatalf("list all: %v (want newest first %v)", all, ids)
	}
	if got, _ := list("?state=unknown"); len(got) != 1 || got[0] != ids[0] {
		t.Fatalf("state filter: %v", got)
	}
	if got, _ := list("?account=acct_2&route=social_post"); len(got) != 1 || got[0] != ids[2] {
		t.Fatalf("account filter: %v", got)
	}
	if got, _ := list("?from=" + t0.Add(1500*time.Millisecond).Format(time.RFC3339Nano) + "&to=" + t0.Add(2500*time.Millisecond).Format(time.RFC3339Nano)); len(got) != 1 || got[0] != ids[1] {
		t.Fatalf("time filter: %v", got)
	}
	p1, next := list("?limit=2")
	if len(p1) != 2 || next == "" {
		t.Fatalf("page 1: %v next %q", p1, next)
	}
	p2, next2 := list("?limit=2&after=" + next)
	if len(p2) != 1 || next2 != "" || p2[0] != ids[0] {
		t.Fatalf("page 2: %v next %q", p2, next2)
	}
	for q, field := range map[string]string{
		"?state=bogus": "state", "?state=none": "state", "?limit=0": "limit", "?limit=5000": "limit",
		"?from=yesterday": "from", "?after=zzz": "after", "?route=Bad!": "route", "?colour=red": "colour",
		"?state=unknown&state=confirmed": "state",
	} {
		e.do("GET", "/v1/intents"+q, secretReader, "").problem(t, http.StatusBadRequest, field)
	}
	// Unknown endpoints and methods are problems too.
	e.do("GET", "/v2/nothing", secretReader, "").problem(t, http.StatusNotFound, "")
	r := e.do("DELETE", "/v1/intents", secretReader, "")
	r.problem(t, http.StatusMethodNotAllowed, "")
	if !strings.Contains(r.header.Get("Allow"), "POST") {
		t.Fatalf("Allow %q", r.header.Get("Allow"))
	}
}

// An intent whose expiry has passed is a normal result in state
// abandoned — recorded, never written — not a server error, however often
// it is resubmitted.
func TestSubmitExpiredIntentIsAbandonedNotAnError(t *testing.T) {
	e := newEnv(t, envOptions{})
	past := e.Clock.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	body := submitBodyJSON("social_post", "acct_1", "task-exp:1", `{"body":"too late"}`, "expires_at", `"`+past+`"`)
	first := e.do("POST", "/v1/intents", secretAgent, body)
	if first.code != http.StatusCreated || first.str(t, "state") != string(fsm.Abandoned) {
		t.Fatalf("first submit: %d %s", first.code, first.body)
	}
	for k := 0; k < 5; k++ {
		r := e.do("POST", "/v1/intents", secretAgent, body)
		if r.code != http.StatusOK || r.str(t, "state") != string(fsm.Abandoned) {
			t.Fatalf("resubmit %d: %d %s", k, r.code, r.body)
		}
	}
	if e.Social.Writes() != 0 {
		t.Fatalf("%d writes for an expired intent", e.Social.Writes())
	}
	h := e.history("social_post", first.str(t, "intent_id"))
	if countType(h, events.Abandoned) != 1 || countType(h, events.WriteStarted) != 0 {
		t.Fatalf("history %v", h)
	}
}

// A payload whose event would exceed the log's limit is 413 naming the
// payload, with nothing recorded or written.
func TestSubmitPayloadTooLargeForTheLogIs413(t *testing.T) {
	e := newEnv(t, envOptions{})
	big := strings.Repeat("a", events.MaxEventSize-1024)
	r := e.do("POST", "/v1/intents", secretAgent, submitBodyJSON("social_post", "acct_1", "task-big:1", `{"body":"`+big+`"}`))
	r.problem(t, http.StatusRequestEntityTooLarge, "payload")
	if e.Social.Writes() != 0 {
		t.Fatalf("%d writes", e.Social.Writes())
	}
	if n, err := e.Store.Stream().Info(context.Background()); err != nil || n.State.Msgs != 0 {
		t.Fatalf("the log holds %v messages (%v)", n.State.Msgs, err)
	}
}
