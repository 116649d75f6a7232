package api

import (
	"net/http"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/internal/errkind"
	"github.com/settle-dev/settle/service"
)

// Errors of Authenticate. ErrNoCredentials and ErrBadCredentials match
// service.ErrUnauthenticated too.
var (
	// ErrNoCredentials: the request carries no Authorization header (401).
	ErrNoCredentials = errors.New("no bearer token: send Authorization: Bearer <token>")
	// ErrBadCredentials: the bearer token is malformed or unknown (401).
	ErrBadCredentials = errors.New("the bearer token is not valid")
	// ErrDevPeer: dev mode and the peer or Host header is not loopback (403).
	ErrDevPeer = errors.New("dev mode serves loopback clients with a loopback Host only")
)

// Authenticate returns the caller of r exactly as the API's own endpoints
// do, for the surfaces mounted beside the API that share its tokens (the
// MCP endpoint: it is an mcp.Authenticator): in dev mode the loopback
// guard first (a request with a token is still authenticated by it),
// then the bearer token, looked up by digest in constant time. The
// caller carries the token's name, tenant, scopes and limits; dev mode's
// holds every scope and no limit. The error matches ErrNoCredentials or
// ErrBadCredentials (and service.ErrUnauthenticated), or ErrDevPeer, and
// never holds the secret.
func (s *Server) Authenticate(r *http.Request) (*service.Caller, error) {
	if s.cfg.Dev && !devRequestOK(r) {
		return nil, ErrDevPeer
	}
	c, aerr := s.authenticate(r)
	switch aerr {
	case "":
	case authMissing:
		return nil, errkind.Wrap(service.ErrUnauthenticated, ErrNoCredentials)
	default:
		return nil, errkind.Wrap(service.ErrUnauthenticated, ErrBadCredentials)
	}
	return c, nil
}
