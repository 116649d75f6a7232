package httproute_test

import (
	"testing"
)

// TestDedupProofRules: a route whose retry policy is not never must carry a
// dedup proof (an idempotency key with a retention, or a search that maps
// author and parent from the listed item); a search must map the author; a
// status route cannot retry on "not found" alone. Each broken variant gives
// one error naming route and field and saying what to add.
func TestDedupProofRules(t *testing.T) {
	social := readExample(t, "social.yaml")
	bookingFile := readExample(t, "booking.yaml")
	env := exampleEnv("http://127.0.0.1:9")
	noKey := func(data []byte) []byte {
		return mutate(t, data, "idempotency_key: true", "idempotency_key: false", "      key_retention: 24h\n", "")
	}
	trustOnly := []byte(`routes:
  - name: notes
    base_url: http://127.0.0.1:9
    write: {method: POST, url: "{{base}}/notes", response: {external_id: $.id}}
    policy: {trust_response: true, retry: auto}
`)
	cases := []struct {
		name  string
		data  []byte
		route string
		field string
		want  []string // each must appear in the reason
	}{
		{"search without author", mutate(t, social, "        author_id: $.author_id\n", ""), "social_post", "search.fields.author_id",
			[]string{"is required", "author"}},
		{"author from the query", mutate(t, social, "author_id: $.author_id", "author_id: bot"), "social_post", "search.fields.author_id",
			[]string{"must read the item"}},
		{"parent not mapped", mutate(t, social, "        parent_id: $.parent_id\n", ""), "social_post", "search.fields.parent_id",
			[]string{"take a parent", "idempotency_key", "retry: never"}},
		{"parent constant", mutate(t, social, "parent_id: $.parent_id", "parent_id: p_1"), "social_post", "search.fields.parent_id",
			[]string{"must read the item"}},
		{"status route without key", noKey(bookingFile), "booking_change", "policy.retry",
			[]string{"not found", "idempotency_key", "retry: never"}},
		{"no search, no key", trustOnly, "notes", "policy.retry",
			[]string{"no dedup proof", "search", "idempotency_key", "retry: never"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			oneError(t, c.data, env, c.route, c.field, c.want...)
		})
	}

	// What is accepted, and whether the search is authoritative.
	for _, c := range []struct {
		name          string
		data          []byte
		authoritative bool
	}{
		{"social", social, true},
		{"parent not mapped, retry never", mutate(t, social, "        parent_id: $.parent_id\n", "", "retry: auto", "retry: never"), false},
		{"parent not mapped, writes take none", mutate(t, social, "        parent_id: $.parent_id\n", "", `        parent_id: "{{parent | omitempty}}"`+"\n", ""), true},
		{"status route without key, retry never", mutate(t, noKey(bookingFile), "retry: approval", "retry: never"), false},
		{"trust only, retry never", mutate(t, trustOnly, "retry: auto", "retry: never"), false},
	} {
		t.Run("ok/"+c.name, func(t *testing.T) {
			a := buildYAML(t, c.data, env)
			if got := a.Capabilities().SearchAuthoritative; got != c.authoritative {
				t.Fatalf("SearchAuthoritative %v, want %v", got, c.authoritative)
			}
		})
	}
}
