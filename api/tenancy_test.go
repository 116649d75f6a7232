package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/settle-dev/settle/events"
)

const (
	secretAcme      = "tok_acme_4b8e2c6a1f9d3e7b5c0a"
	secretAcct1Only = "tok_acct1_7d3a9e5c2b8f1e4a6c0b"
)

func tenancyTokens() []Token {
	all := []string{ScopeSubmit, ScopeRead, ScopeOperate}
	return append(testTokens(),
		Token{Name: "acme", Secret: secretAcme, Tenant: "acme", Scopes: all},
		Token{Name: "acct1-only", Secret: secretAcct1Only, Scopes: []string{ScopeSubmit, ScopeRead}, Accounts: []string{"acct_1"}},
	)
}

// Request ids (idempotency keys) are scoped per tenant and account: the
// same key from another tenant or for another account is another intent
// with its own write — never a 422 that tells of someone else's use — and
// no tenant sees another's intents.
func TestKeysAreScopedPerTenantAndAccount(t *testing.T) {
	e := newEnv(t, envOptions{tokens: tenancyTokens()})
	mine := e.do("POST", "/v1/intents", secretAdmin, submitBodyJSON("social_post", "acct_2", "shared-key", `{"body":"acct_2's post"}`))
	if mine.code != http.StatusCreated {
		t.Fatalf("admin: %d %s", mine.code, mine.body)
	}
	// A token limited to acct_1 uses the same key: its own intent.
	ltd := e.do("POST", "/v1/intents", secretAcct1Only, submitBodyJSON("social_post", "acct_1", "shared-key", `{"body":"another payload"}`))
	if ltd.code != http.StatusCreated || ltd.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("account-limited token reusing a key: %d %s", ltd.code, ltd.body)
	}
	// Another tenant, same route, account and key: its own intent too.
	acme := e.do("POST", "/v1/intents", secretAcme, submitBodyJSON("social_post", "acct_2", "shared-key", `{"body":"acme's post"}`))
	if acme.code != http.StatusCreated || acme.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("another tenant reusing a key: %d %s", acme.code, acme.body)
	}
	ids := []string{mine.str(t, "intent_id"), ltd.str(t, "intent_id"), acme.str(t, "intent_id")}
	if ids[0] == ids[1] || ids[0] == ids[2] || ids[1] == ids[2] {
		t.Fatalf("intents share an id: %v", ids)
	}
	if want := events.ScopedIntentID("acme", "social_post", "acct_2", "shared-key"); ids[2] != want {
		t.Fatalf("acme's intent %s, want %s", ids[2], want)
	}
	if e.Social.Effects() != 3 {
		t.Fatalf("effects %d, want 3 (one per intent)", e.Social.Effects())
	}
	if acmeTenant := e.intent("social_post", ids[2]).Recorded.Tenant; acmeTenant != "acme" {
		t.Fatalf("recorded tenant %q", acmeTenant)
	}

	// acme cannot see the default tenant's intent, not even that it exists.
	e.do("GET", "/v1/intents/"+ids[0], secretAcme, "").problem(t, http.StatusNotFound, "")
	e.do("POST", "/v1/intents/"+ids[0]+"/abandon", secretAcme, `{"reason":"not mine"}`).problem(t, http.StatusNotFound, "")
	if r := e.do("GET", "/v1/intents/"+ids[2], secretAcme, ""); r.code != http.StatusOK {
		t.Fatalf("acme reading its own: %d %s", r.code, r.body)
	}
	e.do("GET", "/v1/intents/"+ids[2], secretAdmin, "").problem(t, http.StatusNotFound, "")
	e.CatchUp()
	list := e.do("GET", "/v1/intents?limit=100", secretAcme, "")
	if list.code != http.StatusOK || strings.Contains(string(list.body), ids[0]) || strings.Contains(string(list.body), ids[1]) ||
		!strings.Contains(string(list.body), ids[2]) {
		t.Fatalf("acme's list: %d %s", list.code, list.body)
	}
	list = e.do("GET", "/v1/intents?limit=100", secretAdmin, "")
	if strings.Contains(string(list.body), ids[2]) {
		t.Fatalf("the default tenant lists acme's intent: %s", list.body)
	}
	// Figures over every tenant are the default tenant's operators' only.
	e.do("GET", "/metrics", secretAcme, "").problem(t, http.StatusForbidden, "")
}

// A replay shows the intent as it is now, so it is served only to a token
// that may read that intent: a submit-only token replaying someone's
// request gets 403 with none of the intent, and nothing is written.
func TestReplayNeedsReadAccess(t *testing.T) {
	e := newEnv(t, envOptions{tokens: tenancyTokens()})
	body := submitBodyJSON("social_post", "acct_1", "admin-req", `{"body":"the admin's post"}`)
	first := e.do("POST", "/v1/intents", secretAdmin, body)
	if first.code != http.StatusCreated {
		t.Fatalf("admin: %d %s", first.code, first.body)
	}
	id := first.str(t, "intent_id")
	for name, token := range map[string]string{"submit-only": secretSubmitter} {
		r := e.do("POST", "/v1/intents", token, body)
		p := r.problem(t, http.StatusForbidden, "Idempotency-Key")
		if r.header.Get("Idempotent-Replayed") != "" || p["intent_id"] != nil || strings.Contains(string(r.body), id) ||
			strings.Contains(string(r.body), "the admin's post") || strings.Contains(string(r.body), "history") {
			t.Fatalf("%s: the refusal shows the intent: %s", name, r.body)
		}
		dry := e.do("POST", "/v1/intents", token, submitBodyJSON("social_post", "acct_1", "admin-req", `{"body":"the admin's post"}`, "dry_run", "true"))
		dry.problem(t, http.StatusForbidden, "")
	}
	// A token that may read it gets the replay.
	for _, token := range []string{secretAgent, secretAcct1Only} {
		r := e.do("POST", "/v1/intents", token, body)
		if r.code != http.StatusOK || r.header.Get("Idempotent-Replayed") != "true" || r.str(t, "intent_id") != id {
			t.Fatalf("replay with read access: %d %s", r.code, r.body)
		}
	}
	if e.Social.Writes() != 1 {
		t.Fatalf("writes %d", e.Social.Writes())
	}
	if h := e.history("social_post", id); len(h) != 2 {
		t.Fatalf("refused replays appended: %d events", len(h))
	}
}

// The Idempotency-Key header takes the draft's sf-string form ("key") and
// a bare key; both name the same intent.
func TestQuotedAndBareIdempotencyKeysAreOneIntent(t *testing.T) {
	e := newEnv(t, envOptions{})
	noID := submitBodyJSON("social_post", "acct_1", "", `{"body":"keyed"}`)
	quoted := e.do("POST", "/v1/intents", secretAgent, noID, "Idempotency-Key", `"task-1:step-1"`)
	if quoted.code != http.StatusCreated || quoted.str(t, "request_id") != "task-1:step-1" {
		t.Fatalf("quoted key: %d %s", quoted.code, quoted.body)
	}
	bare := e.do("POST", "/v1/intents", secretAgent, noID, "Idempotency-Key", `task-1:step-1`)
	if bare.code != http.StatusOK || bare.str(t, "intent_id") != quoted.str(t, "intent_id") {
		t.Fatalf("bare key: %d %s", bare.code, bare.body)
	}
	escaped := e.do("POST", "/v1/intents", secretAgent, submitBodyJSON("social_post", "acct_1", "", `{"body":"esc"}`), "Idempotency-Key", `"a\"b\\c"`)
	if escaped.code != http.StatusCreated || escaped.str(t, "request_id") != `a"b\c` {
		t.Fatalf("escaped key: %d %s", escaped.code, escaped.body)
	}
	if e.Social.Writes() != 2 {
		t.Fatalf("writes %d", e.Social.Writes())
	}
}
