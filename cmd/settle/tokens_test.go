package main

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
	toks, err := parseTokens([]byte(`{"tokens":[{"name":"agent","secret_env":"AGENT_TOKEN","scopes":["submit","read"],"routes":["social_post"]}]}`),
		env(map[string]string{"AGENT_TOKEN": secret}))
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
		_, err := parseTokens([]byte(in), env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "inline-secret-value") {
			t.Errorf("error echoes a secret: %v", err)
		}
	}
}

func FuzzParseTokens(f *testing.F) {
	f.Add([]byte(`{"tokens":[{"name":"agent","secret_env":"T","scopes":["submit"]}]}`))
	f.Add([]byte(`{"tokens":[{}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		toks, err := parseTokens(b, env(map[string]string{"T": "fuzz-secret-0123456789abcdef"}))
		if err == nil && len(toks) == 0 {
			t.Fatal("no error and no token")
		}
		if err != nil && strings.Contains(err.Error(), "fuzz-secret") {
			t.Fatalf("error echoes the secret: %v", err)
		}
	})
}
