package httproute_test

import (
	"strings"
	"testing"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/fakeapi"
)

// TestRoutesThatCannotFindTheirWriteAreRefused: a route whose reads could never find its own write, or could
// take a look-alike for it, is refused at load — by routes check and by
// serve, which both compile through Parse — naming the route, the field
// and what to add. Each refused file loaded (with a warning at most)
// before.
func TestRoutesThatCannotFindTheirWriteAreRefused(t *testing.T) {
	social := readExample(t, "social.yaml")
	github := readExample(t, "github_comments.yaml")
	env := exampleEnv("http://127.0.0.1:9")
	for _, c := range []struct {
		name, route, field string
		data               []byte
		want               []string // in the reason
	}{
		// Without the creation time a look-alike made by hand before
		// the intent is confirmed as ours, and our write never happens.
		{"search without created_at", "social_post", "search.fields.created_at",
			mutate(t, social, "        created_at: $.created_at\n", ""), []string{"look-alike", "created_at: $.created_at", "correlation marker"}},
		// The same with retry: never: no second write, but the look-alike
		// would be confirmed as this intent's effect.
		{"search without created_at, retry never", "social_post", "search.fields.created_at",
			mutate(t, social, "        created_at: $.created_at\n", "", "retry: auto", "retry: never"), []string{"look-alike", "would confirm it", "correlation marker"}},
		// A body that changes a compared payload field.
		{"text around the payload", "social_post", "write.body.body",
			mutate(t, social, `body: "{{payload.body}}"`, `body: "{{payload.body}} (via settle)"`), []string{"search.fields.payload.body", "declare how to compare"}},
		{"a filter on the payload", "social_post", "write.body.body",
			mutate(t, social, `body: "{{payload.body}}"`, `body: "{{payload.body | lower}}"`), []string{"search.fields.payload.body", `"{{payload.body}}"`}},
		{"changed in the readback's own mapping", "github_issue_comment", "write.body.body",
			mutate(t, github, `body: "{{payload.body}}{{marker}}"`, `body: "Note: {{payload.body}}{{marker}}"`,
				"url: \"{{base}}/issues/comments/{{external_id}}\"\n", "url: \"{{base}}/issues/comments/{{external_id}}\"\n      fields: {external_id: $.id, author_id: $.user.id, parent_id: \"{{$.issue_url | last_segment}}\", created_at: $.created_at, payload: {body: \"{{$.body | trim_prefix:'Note: '}}\"}}\n"),
			[]string{"search.fields.payload.body"}},
		// A short page does not end a listing.
		{"page pagination without an end proof", "social_post", "search.end",
			mutate(t, social, "cursor={{cursor}}", "page={{page}}&per_page={{page_size}}", "      next_cursor: $.next_cursor\n", "      page_size: 100\n"),
			[]string{"end: empty_page", "total: $."}},
		{"offset pagination without an end proof", "social_post", "search.end",
			mutate(t, social, "cursor={{cursor}}", "offset={{offset}}&limit={{page_size}}", "      next_cursor: $.next_cursor\n", "      page_size: 50\n"),
			[]string{"end: empty_page"}},
		// A parent in a URL needs a declared shape.
		{"parent without a shape", "github_issue_comment", "parent",
			mutate(t, github, "    parent: {type: integer, minimum: 1}\n", ""), []string{"write.url uses {{parent}}", "parent: {type: integer}"}},
		{"optional parent in a URL path", "github_issue_comment", "parent.required",
			mutate(t, github, "parent: {type: integer, minimum: 1}", "parent: {type: integer, required: false}"), []string{"write.url"}},
		{"string parent without a pattern", "github_issue_comment", "parent.pattern",
			mutate(t, github, "parent: {type: integer, minimum: 1}", "parent: {type: string}"), []string{"RE2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			oneError(t, c.data, env, c.route, c.field, c.want...)
		})
	}

	// What the errors ask for is enough: each fixed file loads.
	for _, fixed := range [][]byte{
		mutate(t, social, "        created_at: $.created_at\n", "", "retry: auto", "retry: never",
			"    write:\n", "    correlation:\n      marker: \" <!-- settle:{{intent_id}} -->\"\n      read: $.body\n\n    write:\n",
			`body: "{{payload.body}}"`, `body: "{{payload.body}}{{marker}}"`),
		mutate(t, social, `body: "{{payload.body}}"`, `body: "{{payload.body}} (via settle)"`,
			"payload: {body: $.body, assets: $.assets}", `payload: {body: "{{$.body | before:' (via settle)'}}", assets: $.assets}`),
		mutate(t, social, "cursor={{cursor}}", "page={{page}}&per_page={{page_size}}", "      next_cursor: $.next_cursor\n", "      page_size: 100\n      end: empty_page\n"),
		mutate(t, social, "cursor={{cursor}}", "offset={{offset}}&limit={{page_size}}", "      next_cursor: $.next_cursor\n", "      page_size: 50\n      total: $.total\n"),
		mutate(t, github, "parent: {type: integer, minimum: 1}", "parent: {type: string, pattern: '^[0-9]+$'}"),
		// The marker next to the payload is not a change: reads remove it.
		github,
	} {
		if errs := httproute.Check(fixed, envOf(env)); errs != nil {
			t.Fatalf("a fixed file is refused: %v", errs)
		}
	}
}

// TestMalformedParentIsNeverSent: an empty or
// non-numeric issue number is refused by CheckParent (which the producer
// asks before recording an intent) and by Write, before anything is sent;
// the fake counts no request.
func TestMalformedParentIsNeverSent(t *testing.T) {
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken))
	a := buildFile(t, "github_comments.yaml", githubEnv(api), nil)
	pl := normalized(t, a, `{"body":"hello"}`)
	for _, bad := range []string{"", "abc", "7a", "-7", "+7", "07", "0", "7/../8", " 7"} {
		err := a.CheckParent(bad)
		if err == nil {
			t.Fatalf("parent %q accepted", bad)
		}
		if bad != "" && strings.Contains(err.Error(), bad) && len(bad) > 1 {
			t.Fatalf("the error quotes the value: %v", err)
		}
		_, werr := a.Write(bg, writeReq(1, api.UserID(), bad, pl))
		ce := callError(t, werr)
		if ce.Class != adapter.NotSent || ce.Code != "invalid_parent" || ce.Retryable {
			t.Fatalf("parent %q: %+v", bad, *ce)
		}
	}
	if n := api.Writes(); n != 0 {
		t.Fatalf("%d requests reached the API", n)
	}
	if err := a.CheckParent("7"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write(bg, writeReq(2, api.UserID(), "7", pl)); err != nil || api.Effects() != 1 {
		t.Fatalf("a good parent: %v, %d effects", err, api.Effects())
	}
	var pc adapter.ParentChecker = a
	_ = pc
}

// TestKeyReusedIsNeverARejection: an outcome that names the key-reused
// code must be key_reused (unknown): a route saying "rejected" for it is
// refused at load, since a retry after a route edit would be recorded as
// "nothing happened" while the first attempt had paid.
func TestKeyReusedIsNeverARejection(t *testing.T) {
	payment := readExample(t, "payment.yaml")
	env := exampleEnv("http://127.0.0.1:9")
	oneError(t, mutate(t, payment, "outcome: key_reused", "outcome: rejected\n          code: idempotency_key_reused"), env,
		"payment_charge", "write.outcomes[1].outcome", "key_reused", "never a rejection")
	oneError(t, mutate(t, payment, "outcome: key_reused", "outcome: key_reused\n          code: other_code"), env,
		"payment_charge", "write.outcomes[1].code", "idempotency_key_reused")
	for _, f := range []string{"payment.yaml", "booking.yaml", "stripe_payment_intent.yaml"} {
		if !strings.Contains(string(readExample(t, f)), "outcome: key_reused") {
			t.Fatalf("%s does not declare key_reused", f)
		}
	}
}
