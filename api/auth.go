package api

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/settle-dev/settle/service"
)

// keyring holds the tokens, as the callers they authenticate, by the
// SHA-256 digest of their secret; the secrets themselves are not kept.
type keyring struct {
	digests [][32]byte
	callers []service.Caller
}

func newKeyring(tokens []Token) *keyring {
	k := &keyring{}
	for _, t := range tokens {
		k.digests = append(k.digests, sha256.Sum256([]byte(t.Secret)))
		tenant := cmp.Or(t.Tenant, DefaultTenant)
		k.callers = append(k.callers, service.Caller{Name: t.Name, Tenant: tenant, Scopes: slices.Clone(t.Scopes),
			Routes: slices.Clone(t.Routes), Accounts: slices.Clone(t.Accounts)})
	}
	return k
}

// lookup finds the token whose secret is presented. Every digest is
// compared, in constant time, whatever matches: neither the position of a
// match nor the length of any secret shows in the time taken.
func (k *keyring) lookup(secret string) (*service.Caller, bool) {
	d := sha256.Sum256([]byte(secret))
	found := -1
	for i := range k.digests {
		eq := subtle.ConstantTimeCompare(d[:], k.digests[i][:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return nil, false
	}
	c := k.callers[found]
	c.Scopes, c.Routes, c.Accounts = slices.Clone(c.Scopes), slices.Clone(c.Routes), slices.Clone(c.Accounts)
	return &c, true
}

// authError is why a request is not authenticated (401).
type authError string

const (
	authMissing authError = "missing"
	authInvalid authError = "invalid"
)

// bearer extracts the credential of "Authorization: Bearer <secret>". A
// request with several Authorization headers is refused.
func bearer(r *http.Request) (string, authError) {
	vals := r.Header.Values("Authorization")
	if len(vals) == 0 {
		return "", authMissing
	}
	if len(vals) > 1 {
		return "", authInvalid
	}
	scheme, cred, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", authInvalid
	}
	cred = strings.TrimSpace(cred)
	if cred == "" {
		return "", authInvalid
	}
	return cred, ""
}

// authenticate returns the caller of r, or the reason it has none.
func (s *Server) authenticate(r *http.Request) (*service.Caller, authError) {
	if s.cfg.Dev && r.Header.Get("Authorization") == "" {
		return &service.Caller{Name: "dev", Tenant: DefaultTenant, Dev: true}, ""
	}
	secret, aerr := bearer(r)
	if aerr != "" {
		return nil, aerr
	}
	p, ok := s.keys.lookup(secret)
	if !ok {
		return nil, authInvalid
	}
	return p, ""
}

// devRequestOK is the dev-mode guard: the peer must be on loopback and the
// Host header must name loopback, so a web page elsewhere cannot reach the
// unauthenticated API through DNS rebinding.
func devRequestOK(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || !isLoopbackHost(host) {
		return false
	}
	h := r.Host
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	return isLoopbackHost(h)
}
