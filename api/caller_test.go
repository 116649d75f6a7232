package api

import (
	"errors"
	"net/http/httptest"
	"slices"
	"testing"
)

// TestAuthenticateForOtherSurfaces: Authenticate gives the same answers as
// the API's own endpoints: the token's name, scopes and limits, or an
// error naming why (never holding the secret).
func TestAuthenticateForOtherSurfaces(t *testing.T) {
	e := newMemEnv(t, envOptions{})
	for _, c := range []struct {
		header string
		want   error
		name   string
	}{
		{"", ErrNoCredentials, ""},
		{"Bearer tok_wrong_0000000000000000000", ErrBadCredentials, ""},
		{"Bearer " + secretAdmin[:len(secretAdmin)-1], ErrBadCredentials, ""},
		{"Basic " + secretAdmin, ErrBadCredentials, ""},
		{"Bearer " + secretRouteLtd, nil, "route-limited"},
		{"Bearer " + secretReader, nil, "reader"},
	} {
		r := httptest.NewRequest("POST", "/mcp", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		got, err := e.srv.Authenticate(r)
		if !errors.Is(err, c.want) {
			t.Fatalf("%q: err %v, want %v", c.header, err, c.want)
		}
		if err != nil {
			if got != nil {
				t.Fatalf("%q: a caller with an error", c.header)
			}
			continue
		}
		if got.Name != c.name || got.Dev {
			t.Fatalf("%q: caller %+v", c.header, got)
		}
		for _, tok := range testTokens() {
			if tok.Name == c.name && (!slices.Equal(tok.Scopes, got.Scopes) || !slices.Equal(tok.Routes, got.Routes) || !slices.Equal(tok.Accounts, got.Accounts)) {
				t.Fatalf("%q: caller %+v, token %+v", c.header, got, tok)
			}
		}
	}

	dev := newMemEnv(t, envOptions{dev: true})
	r := httptest.NewRequest("POST", "http://127.0.0.1/mcp", nil)
	r.RemoteAddr = "127.0.0.1:5555"
	if c, err := dev.srv.Authenticate(r); err != nil || !c.Dev || c.Name != "dev" {
		t.Fatalf("dev loopback: %+v %v", c, err)
	}
	r.RemoteAddr = "10.1.2.3:5555"
	if _, err := dev.srv.Authenticate(r); !errors.Is(err, ErrDevPeer) {
		t.Fatalf("dev from a remote peer: %v", err)
	}
	r = httptest.NewRequest("POST", "http://evil.example/mcp", nil)
	r.RemoteAddr = "127.0.0.1:5555"
	if _, err := dev.srv.Authenticate(r); !errors.Is(err, ErrDevPeer) {
		t.Fatalf("dev with a foreign Host (DNS rebinding): %v", err)
	}
}
