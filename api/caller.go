package api

import (
	"net/http"
	"slices"

	"github.com/cockroachdb/errors"
)

// Errors of Authenticate.
var (
	// ErrNoCredentials: the request carries no Authorization header (401).
	ErrNoCredentials = errors.New("no bearer token: send Authorization: Bearer <token>")
	// ErrBadCredentials: the bearer token is malformed or unknown (401).
	ErrBadCredentials = errors.New("the bearer token is not valid")
	// ErrDevPeer: dev mode and the peer or Host header is not loopback (403).
	ErrDevPeer = errors.New("dev mode serves loopback clients with a loopback Host only")
)

// Caller is the authenticated client of a request, for the surfaces
// mounted beside the API that share its tokens and scopes (the MCP
// endpoint). Dev is the unauthenticated caller of dev mode: it holds every
// scope and no limit.
type Caller struct {
	Name     string
	Tenant   string
	Scopes   []string
	Routes   []string
	Accounts []string
	Dev      bool
}

// Authenticate authenticates r exactly as the API's own endpoints do: in
// dev mode the loopback guard first (a request with a token is still
// authenticated by it), then the bearer token, looked up by digest in
// constant time. The error matches ErrNoCredentials, ErrBadCredentials or
// ErrDevPeer and never holds the secret.
func (s *Server) Authenticate(r *http.Request) (*Caller, error) {
	if s.cfg.Dev && !devRequestOK(r) {
		return nil, ErrDevPeer
	}
	p, aerr := s.authenticate(r)
	switch aerr {
	case "":
	case authMissing:
		return nil, ErrNoCredentials
	default:
		return nil, ErrBadCredentials
	}
	return &Caller{Name: p.name, Tenant: p.tenant, Scopes: slices.Clone(p.scopes), Routes: slices.Clone(p.routes),
		Accounts: slices.Clone(p.accounts), Dev: p.dev}, nil
}
