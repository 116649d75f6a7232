package api

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// endpointCase is how to call one served route for the auth table.
type endpointCase struct {
	route string // "METHOD /pattern" as Server.Routes lists it
	path  string
	body  string
	// scoped is a token with every scope but the route's.
	wrongScope string
	// ok is a token that may call it (status must not be 401/403).
	ok string
	// routeLimited/accountLimited variants of path/body, requesting a
	// route/account outside secretRouteLtd/secretAcctLtd's limits.
	routePath, routeBody     string
	accountPath, accountBody string
}

func TestAuthOnEveryEndpoint(t *testing.T) {
	e := newMemEnv(t, envOptions{})
	r := e.do("POST", "/v1/intents", secretSubmitter, submitBodyJSON("social_post", "acct_1", "auth-1", `{"body":"auth"}`))
	if r.code != http.StatusCreated {
		t.Fatalf("setup submit: %d %s", r.code, r.body)
	}
	id := r.str(t, "intent_id")
	submit := submitBodyJSON("social_post", "acct_1", "auth-2", `{"body":"auth 2"}`, "dry_run", "true")
	action := `{"reason":"auth table"}`
	resolve := `{"reason":"auth table","resolution":"abandoned"}`
	cases := []endpointCase{
		{route: "GET /metrics", path: "/metrics", wrongScope: secretSubmitter, ok: secretReader},
		{route: "POST /v1/intents", path: "/v1/intents", body: submit, wrongScope: secretReader, ok: secretSubmitter},
		{route: "GET /v1/intents", path: "/v1/intents", wrongScope: secretSubmitter, ok: secretReader,
			routePath: "/v1/intents?route=social_post", accountPath: "/v1/intents?account=acct_1"},
		{route: "GET /v1/intents/{id}", path: "/v1/intents/" + id, wrongScope: secretSubmitter, ok: secretReader},
		{route: "GET /v1/stats", path: "/v1/stats", wrongScope: secretSubmitter, ok: secretReader,
			routePath: "/v1/stats?route=social_post", accountPath: "/v1/stats?account=acct_1"},
		{route: "POST /v1/intents/{id}/approve", path: "/v1/intents/" + id + "/approve", body: action, wrongScope: secretReader, ok: secretOperator},
		{route: "POST /v1/intents/{id}/resolve", path: "/v1/intents/" + id + "/resolve", body: resolve, wrongScope: secretSubmitter, ok: secretOperator},
		{route: "POST /v1/intents/{id}/abandon", path: "/v1/intents/" + id + "/abandon", body: action, wrongScope: secretReader, ok: secretOperator},
	}
	public := map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /openapi.json": true, "GET /console": true}

	// The table covers every served route.
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.route)
	}
	for _, rt := range e.srv.Routes() {
		if !public[rt] && !slices.Contains(covered, rt) {
			t.Fatalf("route %s is served but not in the auth table", rt)
		}
	}
	for rt := range public {
		if !slices.Contains(e.srv.Routes(), rt) {
			t.Fatalf("public route %s is not served", rt)
		}
	}

	for _, c := range cases {
		method := strings.Fields(c.route)[0]
		t.Run(c.route, func(t *testing.T) {
			r := e.do(method, c.path, "", c.body)
			r.problem(t, http.StatusUnauthorized, "")
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("401 without a Bearer challenge: %q", r.header.Get("WWW-Authenticate"))
			}
			e.do(method, c.path, "tok_wrong_0000000000000000000", c.body).problem(t, http.StatusUnauthorized, "")
			// A prefix or an extension of a real secret is not that secret.
			e.do(method, c.path, secretAdmin[:len(secretAdmin)-1], c.body).problem(t, http.StatusUnauthorized, "")
			e.do(method, c.path, secretAdmin+"x", c.body).problem(t, http.StatusUnauthorized, "")
			// Not a bearer credential at all.
			e.do(method, c.path, "", c.body, "Authorization", "Basic "+secretAdmin).problem(t, http.StatusUnauthorized, "")

			e.do(method, c.path, c.wrongScope, c.body).problem(t, http.StatusForbidden, "")

			rp, rb := c.path, c.body
			if c.routePath != "" {
				rp = c.routePath
			}
			if c.routeBody != "" {
				rb = c.routeBody
			}
			e.do(method, rp, secretRouteLtd, rb).problem(t, http.StatusForbidden, "")
			ap, ab := c.path, c.body
			if c.accountPath != "" {
				ap = c.accountPath
			}
			if c.accountBody != "" {
				ab = c.accountBody
			}
			e.do(method, ap, secretAcctLtd, ab).problem(t, http.StatusForbidden, "")

			if ok := e.do(method, c.path, c.ok, c.body); ok.code == http.StatusUnauthorized || ok.code == http.StatusForbidden {
				t.Fatalf("the right token was refused: %d %s", ok.code, ok.body)
			}
		})
	}

	// Public endpoints need no token and hold no intent data.
	for rt := range public {
		r := e.do("GET", strings.Fields(rt)[1], "", "")
		if r.code != http.StatusOK {
			t.Fatalf("%s without a token: %d %s", rt, r.code, r.body)
		}
		if strings.Contains(string(r.body), id) {
			t.Fatalf("%s shows intent data", rt)
		}
	}

	// Limited tokens work within their limits: a route-limited list implies its route.
	in := e.do("GET", "/v1/intents", secretRouteLtd, "")
	if in.code != http.StatusOK || strings.Contains(string(in.body), id) {
		t.Fatalf("route-limited list: %d %s", in.code, in.body)
	}
	sub := e.do("POST", "/v1/intents", secretRouteLtd, submitBodyJSON("social_other", "acct_1", "auth-3", `{"body":"x"}`, "dry_run", "true"))
	if sub.code != http.StatusOK {
		t.Fatalf("route-limited submit on its route: %d %s", sub.code, sub.body)
	}
	e.do("POST", "/v1/intents", secretAcctLtd, submitBodyJSON("social_post", "acct_1", "auth-4", `{"body":"x"}`, "dry_run", "true")).
		problem(t, http.StatusForbidden, "account")
}

func TestDevModeNeedsNoTokenButOnlyServesLoopback(t *testing.T) {
	e := newMemEnv(t, envOptions{dev: true})
	r := e.do("POST", "/v1/intents", "", submitBodyJSON("social_approval", "acct_1", "dev-1", `{"body":"dev"}`))
	if r.code != http.StatusCreated || r.str(t, "state") != "awaiting_approval" {
		t.Fatalf("dev submit: %d %s", r.code, r.body)
	}
	id := r.str(t, "intent_id")
	if r := e.do("GET", "/metrics", "", ""); r.code != http.StatusOK {
		t.Fatalf("dev metrics: %d", r.code)
	}
	// The operator comes from the body in dev mode.
	r = e.do("POST", "/v1/intents/"+id+"/approve", "", `{"operator":"alice","reason":"looks right"}`)
	if r.code != http.StatusOK || r.str(t, "approved_by") != "alice" {
		t.Fatalf("dev approve: %d %s", r.code, r.body)
	}
	if ev := lastOf(e.history("social_approval", id), "Approved"); ev == nil || !strings.Contains(string(mustEncode(t, *ev)), `"operator":"alice"`) {
		t.Fatalf("Approved event %+v", ev)
	}
	// ... or is "dev".
	r = e.do("POST", "/v1/intents", "", submitBodyJSON("social_approval", "acct_1", "dev-2", `{"body":"dev 2"}`))
	id2 := r.str(t, "intent_id")
	r = e.do("POST", "/v1/intents/"+id2+"/abandon", "", `{"reason":"not needed"}`)
	if r.code != http.StatusOK || r.str(t, "state") != "abandoned" {
		t.Fatalf("dev abandon: %d %s", r.code, r.body)
	}
	if ev := lastOf(e.history("social_approval", id2), "Abandoned"); ev == nil || !strings.Contains(string(mustEncode(t, *ev)), `"by":"dev"`) {
		t.Fatalf("Abandoned event %+v", ev)
	}
	e.do("POST", "/v1/intents/"+id2+"/abandon", "", `{"operator":" bad","reason":"x"}`).problem(t, http.StatusBadRequest, "operator")
	e.do("POST", "/v1/intents/"+id2+"/abandon", "", `{"operator":"bob","reason":"again"}`).problem(t, http.StatusConflict, "")
	// DNS rebinding: a foreign Host header is refused.
	req, _ := http.NewRequest("GET", e.http.URL+"/v1/intents", nil)
	req.Host = "attacker.example:80"
	res, err := e.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign Host in dev mode: %d", res.StatusCode)
	}
}
