package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
)

// Client calls one settle API.
type Client struct {
	base  string
	shown string // base as printed: its password, if any, redacted
	token string
	// tokenEnv names the variable the token came from (for hints).
	tokenEnv string
	http     *http.Client
}

// New returns a client of the API at apiURL with the token in the
// environment variable tokenEnv (none: no Authorization header).
func New(apiURL, tokenEnv string) (*Client, error) {
	u, err := url.Parse(apiURL)
	if err != nil {
		// The text is not printed: it may hold a password.
		return nil, errors.New("--api: is not a URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.Errorf("--api: %q is not an http(s) URL", u.Redacted())
	}
	return &Client{base: strings.TrimRight(apiURL, "/"), shown: strings.TrimRight(u.Redacted(), "/"), token: os.Getenv(tokenEnv), tokenEnv: tokenEnv,
		http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// problem is an RFC 9457 error body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

// hint says what the user can do about an answer of the API.
func (c *Client) hint(status int, p problem) string {
	switch {
	case status == http.StatusUnauthorized:
		return "put a token of the server's --tokens file in $" + c.tokenEnv + " (or name another variable with --token-env)"
	case status == http.StatusForbidden:
		return "the token lacks the scope (read, operate) or the route/account this needs: use a token that has them"
	case status == http.StatusNotFound:
		return "check the intent id: settle intents list shows the intents the token may see"
	case strings.HasSuffix(p.Type, "/action-not-allowed"), strings.HasSuffix(p.Type, "/conflict"):
		return "see where the intent is now (settle intents show ID) and decide again"
	case status >= 500:
		return "the server could not answer: see its log, and try again"
	}
	return ""
}

// Do sends one request (body, if not nil, as JSON) and returns the
// answer's body; an error status is an error naming the problem, with a
// hint.
func (c *Client) Do(ctx context.Context, method, path string, body any) ([]byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, errors.WithHint(errors.Wrapf(err, "%s %s", method, path),
			"is settle serve running at "+c.shown+"? Name its address with --api or $SETTLE_API")
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		var p problem
		err := errors.Errorf("%s %s: HTTP %d", method, path, resp.StatusCode)
		if json.Unmarshal(out, &p) == nil && p.Title != "" {
			msg := fmt.Sprintf("%d %s", resp.StatusCode, p.Title)
			if p.Detail != "" {
				msg += ": " + p.Detail
			}
			err = errors.Errorf("%s %s: %s", method, path, msg)
		}
		if h := c.hint(resp.StatusCode, p); h != "" {
			err = errors.WithHint(err, h)
		}
		return nil, err
	}
	return out, nil
}
