package adapter

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
)

// Checks of an adapter's Config (base URL, token, header values) and its
// default HTTP client, shared by the concrete adapters. Errors name the
// field and never echo its value.

// ConfigError is the error an adapter's New returns for a bad Config
// field: "<pkg>: config.<field>: <reason>", wrapping a *events.FieldError.
// reason must never echo the field's value.
func ConfigError(pkg, field, reason string) error {
	return errors.Errorf("%s: %w", pkg, &events.FieldError{Field: "config." + field, Reason: reason})
}

// CheckEndpoint checks the BaseURL and Token of an adapter's Config
// (CheckBaseURL, telling to use Token for credentials, and CheckToken) and
// returns the parsed BaseURL. Errors are ConfigError(pkg, "BaseURL" or
// "Token", reason).
func CheckEndpoint(pkg, baseURL, token string) (*url.URL, error) {
	u, err := CheckBaseURL(baseURL, "use Token")
	if err != nil {
		return nil, ConfigError(pkg, "BaseURL", err.Error())
	}
	if err := CheckToken(token); err != nil {
		return nil, ConfigError(pkg, "Token", err.Error())
	}
	return u, nil
}

// CheckBaseURL parses the root of an API: it must be an http or https URL
// with a host and no credentials, query or fragment. An error's text is the
// reason alone, for the caller to attach to its own field name; credentials
// completes the reason given for a URL with user info ("must not carry
// credentials; " + credentials), telling where credentials go instead.
func CheckBaseURL(raw, credentials string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("is required")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("is not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("must be an http or https URL")
	case u.Host == "":
		return nil, errors.New("has no host")
	case u.User != nil:
		return nil, errors.New("must not carry credentials; " + credentials)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errors.New("must not have a query or a fragment")
	}
	return u, nil
}

// CheckToken checks a bearer token: required, printable, no white space.
// An error's text is the reason alone; it never echoes the token.
func CheckToken(token string) error {
	if token == "" {
		return errors.New("is required")
	}
	if !ValidHeaderValue(token) || strings.ContainsAny(token, " \t") {
		return errors.New("must be printable and contain no white space")
	}
	return nil
}

// ValidHeaderValue refuses control characters (CR, LF, NUL, ...), which
// net/http would refuse before sending.
func ValidHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// NewHTTPClient is an adapter's default HTTP client: timeout, and
// redirects not followed. A redirect is an answer, not something to follow:
// a 3xx to a write is ambiguous, and a live URL redirecting to a login page
// is not a public page. It never retries.
func NewHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
