package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
)

// Helpers shared by the concrete adapters (adapter/social, adapter/booking,
// adapter/payment, adapter/httproute). Their error texts are part of each
// adapter's contract: change one and every adapter's message changes.

// ConfigError is the error an adapter's New returns for a bad Config
// field: "<pkg>: config.<field>: <reason>", wrapping a *events.FieldError.
// reason must never echo the field's value.
func ConfigError(pkg, field, reason string) error {
	return fmt.Errorf("%s: %w", pkg, &events.FieldError{Field: "config." + field, Reason: reason})
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

// InvalidRequest is a write that cannot be built (bad payload, missing
// request id, ...): NotSent and not retryable.
func InvalidRequest(code, msg string) error {
	return &CallError{Class: NotSent, Code: code, Message: msg}
}

// Unparseable is a response to what (e.g. "the write", "a get") that
// cannot be parsed: Unknown, code response_unparseable.
func Unparseable(status int, what string) error {
	return &CallError{Class: Unknown, Code: "response_unparseable", StatusCode: status,
		Message: "the response to " + what + " cannot be parsed"}
}

// AuthGet sends one GET with "Authorization: Bearer token" and
// "Accept: application/json" and returns the response of any status.
func AuthGet(ctx context.Context, client *http.Client, token, u string) (*Response, error) {
	req, err := NewRequest(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	return Do(ctx, client, req)
}

// --- payloads ---

// PayloadError is a payload validation error naming the field
// (payload.body, payload.assets[2], ...): a *events.FieldError.
func PayloadError(field, reason string) error {
	return &events.FieldError{Field: field, Reason: reason}
}

// FieldPath renders parent.key, or parent["key"] when key is not a plain
// identifier; long keys are cut.
func FieldPath(parent, key string) string {
	plain := key != ""
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			plain = false
			break
		}
	}
	if len(key) > 64 {
		key = strings.ToValidUTF8(key[:64], "") + "..."
		plain = false
	}
	if plain {
		return parent + "." + key
	}
	return parent + "[" + strconv.Quote(key) + "]"
}

// IsSHA256Hex reports whether s is a sha256 in 64 lowercase hex characters.
func IsSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CanonicalJSON is canon/v1 of v's JSON encoding: how an adapter builds a
// canonical payload from its payload struct. Errors are json.Marshal's or
// events.Canonicalize's, unwrapped.
func CanonicalJSON(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	c, err := events.Canonicalize(b)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(c), nil
}

// CanonicalizePayload returns canon/v1 of a caller's payload. Errors are
// *events.FieldError: "payload" when it is empty or not canonicalizable,
// the offending member (payload.a[1], ...) when canon/v1 names one.
func CanonicalizePayload(raw []byte) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, PayloadError("payload", "is required")
	}
	canon, err := events.Canonicalize(raw)
	if err != nil {
		var ce *events.CanonError
		if errors.As(err, &ce) {
			return nil, PayloadError("payload"+strings.TrimPrefix(ce.Path, "$"), ce.Reason)
		}
		return nil, PayloadError("payload", "is not canonicalizable")
	}
	return canon, nil
}

// ObjectMembers decodes raw, which must be a JSON object, into its members,
// refusing any member not in known. Errors are *events.FieldError naming
// field, or the first unknown member in sorted order; the reason lists
// known in the order given.
func ObjectMembers(raw []byte, field string, known ...string) (map[string]json.RawMessage, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, PayloadError(field, "must be a JSON object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, PayloadError(field, "must be a JSON object")
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, PayloadError(FieldPath(field, unknown[0]), "is not a known field (known: "+strings.Join(known, ", ")+")")
	}
	return m, nil
}

// PayloadObject is the common start of a route's payload validation: the
// payload is required, canonicalized (CanonicalizePayload), must be a JSON
// object and may hold only the known members (ObjectMembers with field
// "payload"). It returns the canonical members.
func PayloadObject(raw []byte, known ...string) (map[string]json.RawMessage, error) {
	canon, err := CanonicalizePayload(raw)
	if err != nil {
		return nil, err
	}
	return ObjectMembers(canon, "payload", known...)
}
