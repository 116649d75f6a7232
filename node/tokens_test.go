package node

import (
	"strings"
	"testing"

	"github.com/settle-dev/settle/api"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseTokens(t *testing.T) {
	secret := "s3cr3t-0123456789abcdef0123"
	toks, err := ParseTokens([]byte(`{"tokens":[{"name":"agent","secret_env":"AGENT_TOKEN","scopes":["submit","read"],"routes":["social_post"]}]}`),
		env(map[string]string{"AGENT_TOKEN": secret}), []string{"social_post"})
	if err != nil || len(toks) != 1 || toks[0].Secret != secret || toks[0].Name != "agent" || toks[0].Scopes[0] != api.ScopeSubmit {
		t.Fatalf("%+v %v", toks, err)
	}
	for in, want := range map[string]string{
		`{"tokens":[{"name":"a","scopes":["read"]}]}`:                         "tokens[0].secret_env: is required",
		`{"tokens":[{"name":"a","secret_env":"NOPE"}]}`:                       `tokens[0].secret_env: environment variable "NOPE" is not set`,
		`{"tokens":[{"name":"a","secret":"inline-secret-value-0123456789"}]}`: "not a token file",
		`{"tokens":[]}`: "at least one token",
		`not json`:      "not a token file",
	} {
		_, err := ParseTokens([]byte(in), env(nil), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "inline-secret-value") {
			t.Errorf("error echoes a secret: %v", err)
		}
	}
}

// Errors name the token file's own fields (never api.Token's Go names)
// and the environment variable of a bad secret; a route limit must name a
// configured route.
func TestTokenFileErrorsNameFileFields(t *testing.T) {
	vars := env(map[string]string{"GOOD": "good-secret-0123456789abcdef", "SHORT": "short", "GOOD2": "other-secret-0123456789abcdef"})
	routes := []string{"social_post", "booking_update"}
	for in, want := range map[string]string{
		`{"tokens":[{"name":"a","secret_env":"SHORT","scopes":["read"]}]}`:                                                   "tokens[0].secret_env: the secret in $SHORT is shorter than 16 bytes",
		`{"tokens":[{"name":"a","secret_env":"GOOD","scopes":["read","write"]}]}`:                                            `tokens[0].scopes[1]: "write" is not submit, read or operate`,
		`{"tokens":[{"name":"a","secret_env":"GOOD","scopes":["read"],"routes":["social_pots"]}]}`:                           `tokens[0].routes[0]: route "social_pots" is not configured (configured: social_post, booking_update)`,
		`{"tokens":[{"name":"a","secret_env":"GOOD","scopes":["read"],"accounts":[" x"]}]}`:                                  "tokens[0].accounts[0]: has leading or trailing white space",
		`{"tokens":[{"name":"a","secret_env":"GOOD","scopes":["read"],"tenant":"Acme!"}]}`:                                   "tokens[0].tenant: has 'A' at byte 0; allowed are a-z 0-9 _ -",
		`{"tokens":[{"name":"","secret_env":"GOOD","scopes":["read"]}]}`:                                                     "tokens[0].name: is required",
		`{"tokens":[{"name":"a","secret_env":"GOOD","scopes":[]}]}`:                                                          "tokens[0].scopes: at least one scope is required",
		`{"tokens":[{"name":"a","secret_env":"GOOD","scopes":["read"]},{"name":"b","secret_env":"GOOD","scopes":["read"]}]}`: "tokens[1].secret_env: the secret in $GOOD is the secret of another token",
	} {
		_, err := ParseTokens([]byte(in), vars, routes)
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", in, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "Tokens[") || strings.Contains(err.Error(), ".Secret") || strings.Contains(err.Error(), "good-secret")) {
			t.Errorf("error uses Go field names or a secret: %v", err)
		}
	}
	toks, err := ParseTokens([]byte(`{"tokens":[{"name":"a","secret_env":"GOOD","tenant":"acme","scopes":["read"]}]}`), vars, routes)
	if err != nil || toks[0].Tenant != "acme" {
		t.Fatalf("tenant: %+v %v", toks, err)
	}
}

func FuzzParseTokens(f *testing.F) {
	f.Add([]byte(`{"tokens":[{"name":"agent","secret_env":"T","scopes":["submit"]}]}`))
	f.Add([]byte(`{"tokens":[{}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		toks, err := ParseTokens(b, env(map[string]string{"T": "fuzz-secret-0123456789abcdef"}), []string{"social_post"})
		if err == nil && len(toks) == 0 {
			t.Fatal("no error and no token")
		}
		if err != nil && strings.Contains(err.Error(), "fuzz-secret") {
			t.Fatalf("error echoes the secret: %v", err)
		}
	})
}
