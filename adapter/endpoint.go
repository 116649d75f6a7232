package adapter

import (
	"net/http"
	"net/url"
	"time"

	"github.com/cockroachdb/errors"
)

// CheckBaseURL parses the root of an API: an http or https URL with a
// host and no credentials, query or fragment. An error's text is the
// reason alone (never the value), for the caller to prefix with its field
// name; credentials tells where credentials go instead of user info.
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

// NewHTTPClient is an adapter's default HTTP client: timeout, redirects
// not followed, and a transport of its own (NewTransport). A redirect is
// an answer, not something to follow: a 3xx to a write is ambiguous, and a
// live URL redirecting to a login page is not a public page. It never
// retries.
func NewHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Transport:     NewTransport(),
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// MaxIdleConnsPerHost is how many idle connections an adapter's transport
// keeps to one host (http.DefaultTransport keeps 2: every concurrent call
// past the second would dial again).
const MaxIdleConnsPerHost = 256

// NewTransport is an adapter's HTTP transport: http.DefaultTransport's
// settings (proxy from the environment, dial and TLS timeouts) keeping
// MaxIdleConnsPerHost idle connections to each host.
func NewTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 4 * MaxIdleConnsPerHost
	tr.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return tr
}
