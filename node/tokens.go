package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/api"
)

// tokenFile is the --tokens file: names, tenant, scopes and limits in
// JSON; the secrets themselves come from environment variables, never from
// the file.
type tokenFile struct {
	Tokens []struct {
		Name      string   `json:"name"`
		SecretEnv string   `json:"secret_env"`
		Tenant    string   `json:"tenant,omitempty"`
		Scopes    []string `json:"scopes"`
		Routes    []string `json:"routes,omitempty"`
		Accounts  []string `json:"accounts,omitempty"`
	} `json:"tokens"`
}

// LoadTokens reads and checks the token file: every error names the
// file's own fields (tokens[1].secret_env) and is reported before
// anything starts. routes are the configured route names (limits must
// name one of them).
func LoadTokens(path string, routes []string) ([]api.Token, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Errorf("--tokens: %w", err)
	}
	toks, err := ParseTokens(b, os.LookupEnv, routes)
	if err != nil {
		return nil, errors.Errorf("--tokens %s: %w", path, err)
	}
	return toks, nil
}

// ParseTokens reads a token file; errors name the entry and field as the
// file spells them, and never hold a secret.
func ParseTokens(b []byte, env func(string) (string, bool), routes []string) ([]api.Token, error) {
	var tf tokenFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tf); err != nil {
		return nil, errors.Errorf("not a token file: %w", err)
	}
	if len(tf.Tokens) == 0 {
		return nil, errors.New("tokens: at least one token is required")
	}
	var out []api.Token
	for i, t := range tf.Tokens {
		if t.SecretEnv == "" {
			return nil, errors.Errorf("tokens[%d].secret_env: is required (secrets come from the environment)", i)
		}
		secret, ok := env(t.SecretEnv)
		if !ok || secret == "" {
			return nil, errors.Errorf("tokens[%d].secret_env: environment variable %q is not set", i, t.SecretEnv)
		}
		out = append(out, api.Token{Name: t.Name, Secret: secret, Tenant: t.Tenant, Scopes: t.Scopes, Routes: t.Routes, Accounts: t.Accounts})
	}
	if err := api.ValidateTokens(out, routes); err != nil {
		var te *api.TokenError
		if !errors.As(err, &te) {
			return nil, err
		}
		return nil, errors.Errorf("tokens[%d].%s: %s", te.Index, fileField(te.Field), secretReason(te, tf.Tokens[te.Index].SecretEnv))
	}
	return out, nil
}

// fileField maps api.Token's field names to the token file's.
func fileField(goField string) string {
	name, _, _ := strings.Cut(goField, "[")
	if name == "Secret" {
		return "secret_env"
	}
	return strings.ToLower(name) + goField[len(name):]
}

// secretReason says which variable holds the bad secret.
func secretReason(te *api.TokenError, secretEnv string) string {
	if te.Field == "Secret" {
		return fmt.Sprintf("the secret in $%s %s", secretEnv, te.Reason)
	}
	return te.Reason
}

// RouteSecrets are the values no tool result and no log line may show:
// the route headers' ${env:NAME} values (credentials may only come from
// there).
func RouteSecrets(routesPath string) []string {
	var out []string
	data, err := os.ReadFile(routesPath)
	if err != nil {
		return nil
	}
	cfgs, err := httproute.Parse(data, os.LookupEnv)
	if err != nil {
		return nil
	}
	ref := regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}`)
	for _, c := range cfgs {
		for _, h := range c.Headers {
			for _, m := range ref.FindAllStringSubmatch(h.Value, -1) {
				if v, ok := os.LookupEnv(m[1]); ok {
					out = append(out, v)
				}
			}
		}
	}
	return out
}
