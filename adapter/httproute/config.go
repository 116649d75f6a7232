package httproute

import (
	"context"
	"net/http"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/events"
)

// RouteError is one problem of a route file, or of a RouteConfig given to
// Build. Route is the route's name ("routes[2]" when it has no valid name;
// "" for a problem of the file itself); Field is the dotted path of the
// offending key inside the route (write.url, search.fields.author_id,
// headers.Authorization, payload.fields.body.type, ...). Reason never
// holds a header value, an environment variable's value or a URL.
type RouteError struct {
	Route  string
	Field  string
	Reason string
}

// Error renders "route <name>: <field>: <reason>"; a problem of the file
// itself renders "routes file: <field>: <reason>".
func (e *RouteError) Error() string {
	prefix := "route " + e.Route
	if e.Route == "" {
		prefix = "routes file"
	}
	if e.Field == "" {
		return prefix + ": " + e.Reason
	}
	return prefix + ": " + e.Field + ": " + e.Reason
}

// RouteConfig is one route as declared in a route file. Parse returns it;
// Build turns it into a adapter.Route. It holds no secret: header values
// and base_url keep their ${env:NAME} references, resolved by Build
// through Env.
//
// Strings documented as templates use {{...}} (see the route manual,
// examples/routes/README.md); "value trees" (Body, payload mappings, defaults) are
// decoded YAML: map[string]any, []any, string, int64, uint64, float64,
// bool or nil.
type RouteConfig struct {
	// Name is the route's token, [a-z0-9_-]{1,64}.
	Name string `yaml:"name"`
	// BaseURL is the API root, http(s), without credentials, query or
	// fragment; it may be (or contain) ${env:NAME}.
	BaseURL string `yaml:"base_url"`
	// Headers are sent with every API call (never with Probe). A value is
	// text with ${env:NAME} references; credentials must come from them.
	Headers []Header `yaml:"headers"`
	// Timeout bounds each HTTP call, or each tool call of an MCP route
	// (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// PropagateTrace sends the W3C traceparent of each call's span to the
	// API (propagate_trace; default off: an API need not learn settle's
	// trace ids). It has no effect while tracing is off.
	PropagateTrace bool `yaml:"propagate_trace"`
	// MCP declares the upstream MCP server of a route whose steps call
	// tools (tool and arguments) instead of URLs; such a route has no
	// base_url and no headers (mcp.headers instead).
	MCP *MCPConfig `yaml:"mcp"`

	Write       *WriteConfig       `yaml:"write"`
	Payload     *PayloadConfig     `yaml:"payload"`
	Search      *SearchConfig      `yaml:"search"`
	Readback    *ReadbackConfig    `yaml:"readback"`
	Status      *StatusConfig      `yaml:"status"`
	Identity    *IdentityConfig    `yaml:"identity"`
	Correlation *CorrelationConfig `yaml:"correlation"`
	// Parent is the shape of an intent's parent (its ParentExternalID);
	// required when a URL uses {{parent}}. A parent that does not fit is
	// refused before anything is recorded or written.
	Parent *ParentConfig `yaml:"parent"`
	// RateLimit declares the API's rate-limit headers; Retry-After is
	// read on every route.
	RateLimit    *RateLimitConfig   `yaml:"rate_limit"`
	Capabilities CapabilitiesConfig `yaml:"capabilities"`
	// Policy is the route policy (adapter.DefaultPolicy() overridden by the
	// file's policy section; key_retention defaults to the capability's).
	Policy events.Policy `yaml:"policy"`

	// Env resolves ${env:NAME}; nil means os.LookupEnv. Go only.
	Env func(string) (string, bool)
	// Client is the HTTP client; nil means one with Timeout that does not
	// follow redirects. It must not retry. Go only.
	Client *http.Client
	// Now is the clock the identity cache is refreshed by and waits are
	// measured on; nil means time.Now. Go only.
	Now func() time.Time
	// Sleep waits d inside one listing (rate_limit.max_wait); nil means a
	// timer that ends with ctx. Go only.
	Sleep func(ctx context.Context, d time.Duration) error
	// MCPTransport, on a route with an mcp section, replaces its command
	// or url: each start of the upstream connects a new transport from it
	// (an upstream in this process). Such an upstream is never shared.
	// Go only.
	MCPTransport func() sdk.Transport

	// upstreams are the MCP upstreams of the route's file (Parse):
	// routes that declare the same one share it.
	upstreams *upstreamPool
}

// MCPConfig is the upstream MCP server a route calls: a command settle
// starts and talks to over stdio (Command, Args, Env), or a streamable
// HTTP endpoint (URL, Headers). Command, Args, Env's values, URL and
// Headers' values may use ${env:NAME}; credentials must come from it.
type MCPConfig struct {
	Command string   `yaml:"command"`
	Args    []string `yaml:"args"`
	// Env is the whole environment of the command besides PATH, HOME,
	// TMPDIR and LANG: settle's own environment is not passed on.
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
	Headers []Header          `yaml:"headers"`
	// MaxResult bounds the bytes of one tool result (default 4 MiB); a
	// larger one is a read failure, or unknown for a write.
	MaxResult int `yaml:"max_result"`
	// Reads are upstream tools settle's MCP gateway passes through
	// unchanged, beside those the upstream annotates readOnlyHint: true
	// (mcp.reads). Tools the route's steps read with need not be listed.
	Reads []string `yaml:"reads"`
	// Unprotected are upstream tools the gateway passes through without
	// recording or settling them; every answer says so (mcp.unprotected).
	// Any other tool of the upstream is not offered.
	Unprotected []string `yaml:"unprotected"`
}

// RateLimitConfig declares how an API says it is rate-limiting. A
// response that asks to wait — Retry-After (seconds or an HTTP date), or
// Remaining at "0" with a Reset (Unix seconds) or ResetAfter (seconds) —
// carries the wait in adapter.CallError.RetryAfter, on writes and reads.
type RateLimitConfig struct {
	// Remaining is the header with the requests left (x-ratelimit-remaining).
	Remaining string `yaml:"remaining"`
	// Reset is the header with the Unix time the limit resets
	// (x-ratelimit-reset); ResetAfter one with the seconds until then.
	Reset      string `yaml:"reset"`
	ResetAfter string `yaml:"reset_after"`
	// MaxWait is how long one listing may wait between its pages when
	// the API asks it to (0: never; the read fails with the wait, and the
	// reconciler reads again after it).
	MaxWait time.Duration `yaml:"max_wait"`
}

// Header is one header of a route: Name and its Value text, with
// ${env:NAME} references left unresolved.
type Header struct {
	Name  string
	Value string
}

// WriteConfig is the external write (one request per attempt, never
// retried).
type WriteConfig struct {
	// Tool and Arguments are the write of an MCP route: the tool called
	// and its arguments, a value tree templated like Body.
	Tool      string `yaml:"tool"`
	Arguments any    `yaml:"arguments"`
	// Method is POST, PUT, PATCH or DELETE.
	Method string `yaml:"method"`
	// URL is a URL template starting with {{base}}/.
	URL string `yaml:"url"`
	// IdempotencyHeader carries the intent's idempotency key (the same on
	// every attempt); AttemptHeader the attempt id. Empty: not sent.
	IdempotencyHeader string `yaml:"idempotency_header"`
	AttemptHeader     string `yaml:"attempt_header"`
	// Headers are templated extra headers; a header rendering empty is not
	// sent.
	Headers map[string]string `yaml:"headers"`
	// Body is the request body's value tree (nil: no body). Encoding is
	// "json" (default) or "form" (a flat mapping, URL-encoded).
	Body     any    `yaml:"body"`
	Encoding string `yaml:"encoding"`
	// Response says what a success must look like.
	Response ResponseConfig `yaml:"response"`
	// Outcomes are rules checked in order before the status policy; the
	// first that matches decides.
	Outcomes []OutcomeRule `yaml:"outcomes"`
	// ErrorCode is a JSON path to the API's own error code: a definite
	// rejection carries it (when it is snake_case) instead of http_rejected.
	ErrorCode string `yaml:"error_code"`
	// Status overrides adapter.DefaultStatusPolicy for the listed codes.
	Status *StatusPolicyConfig `yaml:"status"`
}

// ResponseConfig maps a success response.
type ResponseConfig struct {
	// Success lists the success statuses (default: every 2xx); another
	// 2xx is unknown (unexpected_status).
	Success []int `yaml:"success"`
	// ExternalID (required) and LiveURL are value expressions: a JSON path
	// ($.id) or a template ({{$.booking_id}}@v{{$.version}}).
	ExternalID string `yaml:"external_id"`
	LiveURL    string `yaml:"live_url"`
	// Expect maps JSON paths to the template their value must equal;
	// Require lists JSON paths that must not be empty. Otherwise the
	// outcome is unknown (response_mismatch).
	Expect  map[string]string `yaml:"expect"`
	Require []string          `yaml:"require"`
	// Payload, when set, rebuilds the payload from the response; it must
	// hash like the payload sent, else unknown (response_mismatch).
	Payload any `yaml:"payload"`
}

// OutcomeRule classifies a response before the status policy. Every
// condition given must hold: Status (one of), Match (every JSON path
// equals its template), Unless (not every one does), NonEmpty (every
// JSON path holds a non-empty value).
type OutcomeRule struct {
	Status   []int             `yaml:"status"`
	Match    map[string]string `yaml:"match"`
	Unless   map[string]string `yaml:"unless"`
	NonEmpty []string          `yaml:"non_empty"`
	// Headers maps response header names to the text their value must
	// equal (x-ratelimit-remaining: "0"); HasHeaders lists headers that
	// must be present (retry-after).
	Headers    map[string]string `yaml:"headers"`
	HasHeaders []string          `yaml:"has_headers"`
	// Text is a text the result of an MCP tool that answered isError
	// holds (rules of an MCP route classify such results only).
	Text string `yaml:"text"`
	// Outcome is rejected (proven not executed), retryable (rejected and
	// inviting a retry), unknown, or key_reused: the API says the
	// idempotency key was already used with another request — evidence
	// that an earlier request reached it, classified unknown with code
	// adapter.CodeKeyReused (Code may then be left out).
	Outcome string `yaml:"outcome"`
	// Code is the stable snake_case code recorded; Message a fixed text.
	Code    string `yaml:"code"`
	Message string `yaml:"message"`
}

// StatusPolicyConfig overrides how HTTP statuses classify a write.
type StatusPolicyConfig struct {
	Definite4xx  []int `yaml:"definite_4xx"`
	Retryable4xx []int `yaml:"retryable_4xx"`
	Unknown      []int `yaml:"unknown"`
}

// PayloadConfig declares the route's payload: validation and canonical
// shape (adapter.PayloadNormalizer).
type PayloadConfig struct {
	// Fields, in the order they are checked. Unknown fields are refused.
	Fields []FieldConfig `yaml:"fields"`
	// NearMatch names fields on which a record that is not an exact match
	// still resembles the intent (adapter.Resembler), e.g. [body].
	NearMatch []string `yaml:"near_match"`
	// Normalize names the rewritings the API documents for the text it
	// stores (links, entities, whitespace): applied to both sides before
	// a read's payload is compared with the intent's.
	Normalize []string `yaml:"normalize"`
}

// FieldConfig is one payload field.
type FieldConfig struct {
	Name string
	// Type is string, sha256, integer, number, boolean, array, object or
	// any.
	Type      string   `yaml:"type"`
	Required  bool     `yaml:"required"`
	NonEmpty  bool     `yaml:"non_empty"`  // string: not blank; array, object: at least one element
	OmitEmpty bool     `yaml:"omit_empty"` // "", [], {} and null are left out of the canonical form
	Pattern   string   `yaml:"pattern"`
	MinLength *int     `yaml:"min_length"` // bytes of a string, elements of an array
	MaxLength *int     `yaml:"max_length"`
	Minimum   *float64 `yaml:"minimum"`
	Maximum   *float64 `yaml:"maximum"`
	Enum      []string `yaml:"enum"`
	// Default is used when the field is absent (a value tree).
	Default any `yaml:"default"`
	// Items is the element of an array; Fields the fields of an object
	// (none: any object).
	Items  *FieldConfig  `yaml:"items"`
	Fields []FieldConfig `yaml:"fields"`
}

// RecordFields maps a JSON object to an adapter.Record. Each is a value
// expression; Payload is a value tree rebuilt in the intent's shape.
type RecordFields struct {
	ExternalID string `yaml:"external_id"`
	LiveURL    string `yaml:"live_url"`
	AuthorID   string `yaml:"author_id"`
	ParentID   string `yaml:"parent_id"`
	// Visibility is a value expression whose text is the visibility
	// ("public" passes); with VisibilityMap its text is looked up there
	// (an unmapped value is "unknown"); with VisibilityProbe the object
	// is "public" when its live URL answers 200 without credentials.
	Visibility      string `yaml:"visibility"`
	VisibilityMap   map[string]string
	VisibilityProbe bool
	// CreatedAt is the object's creation time: RFC 3339 text, or Unix
	// seconds (a number or a decimal string, e.g. Slack's "1712345678.000100";
	// values of 10^11 and more are Unix milliseconds). On a route that may
	// retry, an item whose CreatedAt is absent (null, 0) cannot be mapped.
	CreatedAt string `yaml:"created_at"`
	Payload   any    `yaml:"payload"`
}

// SearchConfig lists an account's objects in a time window.
type SearchConfig struct {
	// URL may use {{account}}, {{from}}, {{to}}, the pagination variables
	// ({{cursor}}, {{page}}, {{offset}}, {{page_size}}) and the intent's
	// values (see the route manual).
	URL string `yaml:"url"`
	// Tool and Arguments replace URL on an MCP route: the listing tool
	// and its arguments, templated as URL is (cursor, page, from, to).
	Tool      string `yaml:"tool"`
	Arguments any    `yaml:"arguments"`
	// Items is the JSON path of the page's array; a page without it is an
	// error, never an empty page.
	Items string `yaml:"items"`
	// Pagination, at most one: NextCursor is the path of the next page's
	// cursor in the body ({{cursor}} in URL; an empty cursor ends the
	// listing); NextLink follows the Link header's rel="next" (a response
	// without one ends it); PageSize with {{page}} (from FirstPage,
	// default 1) or {{offset}} in URL counts pages. None: one page (an
	// answer with a Link rel="next" is then an incomplete listing).
	// PageSize is also what {{page_size}} renders, in any pagination;
	// a URL that uses it must declare one.
	NextCursor string `yaml:"next_cursor"`
	NextLink   bool   `yaml:"next_link"`
	PageSize   int    `yaml:"page_size"`
	FirstPage  *int   `yaml:"first_page"`
	// Page and offset pagination must prove the end of a listing, since
	// an API may cap the page size silently (a short page proves
	// nothing): Total is the JSON path of the listing's total count (the
	// listing ends once that many items were read, or at an empty page);
	// End "empty_page" ends it at the first page without items.
	Total string `yaml:"total"`
	End   string `yaml:"end"`
	// MaxPages bounds the pages one search reads; a listing that needs
	// more is a read failure (listing_incomplete), never a shorter list.
	MaxPages int `yaml:"max_pages"`
	// WindowFilter is the item field the API's from/to filter compares:
	// created_at (default), updated_at (the upper bound is then not sent,
	// and items created outside the window are dropped by their
	// created_at, unless a correlation marker names an intent in them)
	// or none (the API does not filter by time).
	WindowFilter string       `yaml:"window_filter"`
	Fields       RecordFields `yaml:"fields"`
	// OmitsBody: listed items lack the payload; records are Partial.
	OmitsBody bool `yaml:"omits_body"`
}

// IdentityConfig reads the identity the route's credential acts as.
type IdentityConfig struct {
	// URL is a GET with the route's headers, starting with {{base}}.
	URL string `yaml:"url"`
	// Tool and Arguments (constant) replace URL on an MCP route.
	Tool      string `yaml:"tool"`
	Arguments any    `yaml:"arguments"`
	// Method is GET (default) or POST; a POST sends Body (a constant
	// value tree) as JSON: a read such as a GraphQL query ({viewer
	// {databaseId}}), never a write.
	Method string `yaml:"method"`
	Body   any    `yaml:"body"`
	// ID is a value expression reading the identity ($.id).
	ID      string            `yaml:"id"`
	Expect  map[string]string `yaml:"expect"`
	Require []string          `yaml:"require"`
	// Refresh is how long a resolved identity is trusted (default 10m).
	Refresh time.Duration `yaml:"refresh"`
}

// ParentConfig is the shape of an intent's parent. Type is integer (a
// decimal number, without sign or leading zeros, at least Minimum) or
// string (matching Pattern, at most MaxLength bytes, no control
// characters). Required (default true) refuses an empty parent.
type ParentConfig struct {
	Type      string `yaml:"type"`
	Pattern   string `yaml:"pattern"`
	Minimum   *int64 `yaml:"minimum"`
	MaxLength *int   `yaml:"max_length"`
	Required  *bool  `yaml:"required"`
}

// CorrelationConfig is the marker that names an intent in its write.
type CorrelationConfig struct {
	// Marker is a template using {{intent_id}} exactly once; write
	// templates send it as {{marker}}.
	Marker string `yaml:"marker"`
	// Read is the JSON path of the item field that carries the marker.
	Read string `yaml:"read"`
}

// ReadbackConfig reads one object back by external id.
type ReadbackConfig struct {
	URL string `yaml:"url"`
	// Tool and Arguments replace URL on an MCP route.
	Tool      string `yaml:"tool"`
	Arguments any    `yaml:"arguments"`
	// Item is the JSON path of the object in the response (default $).
	Item string `yaml:"item"`
	// Fields default to the search's.
	Fields  *RecordFields     `yaml:"fields"`
	Expect  map[string]string `yaml:"expect"`
	Require []string          `yaml:"require"`
	// Checks are the readback checks the route declares
	// (adapter.CheckDeclarer); default: url, author, payload, parent,
	// visibility.
	Checks []string `yaml:"checks"`
}

// StatusConfig looks a write up by request id or idempotency key.
type StatusConfig struct {
	URL string `yaml:"url"`
	// Tool and Arguments replace URL on an MCP route.
	Tool      string `yaml:"tool"`
	Arguments any    `yaml:"arguments"`
	Item      string `yaml:"item"`
	State     string `yaml:"state"`
	// Map maps the API's states to completed, processing or failed (none:
	// those three words as they are).
	Map            map[string]string `yaml:"map"`
	ExternalID     string            `yaml:"external_id"`
	LiveURL        string            `yaml:"live_url"`
	Version        string            `yaml:"version"`
	AppliedVersion string            `yaml:"applied_version"`
	Code           string            `yaml:"code"`
	PartialEffects string            `yaml:"partial_effects"`
	ReceivedAt     string            `yaml:"received_at"`
	Payload        any               `yaml:"payload"`
	Expect         map[string]string `yaml:"expect"`
	Require        []string          `yaml:"require"`
	// Account is a value expression reading the account the answer
	// belongs to (adapter.StatusResult.Account); an answer of another
	// account is "not found". CredentialScoped declares that the API
	// scopes request ids per credential, so a lookup by request id alone
	// cannot find another account's write. A status query naming the
	// write by {{request_id}} alone needs one of them, or {{account}} in
	// its URL or expectations.
	Account          string `yaml:"account"`
	CredentialScoped bool   `yaml:"credential_scoped"`
}

// CapabilitiesConfig are the capabilities a route declares. StatusQuery
// and Search follow from the status and search sections; when given they
// must agree with them.
type CapabilitiesConfig struct {
	IdempotencyKey  bool          `yaml:"idempotency_key"`
	KeyRetention    time.Duration `yaml:"key_retention"`
	ReflectionDelay time.Duration `yaml:"reflection_delay"`
	StatusQuery     *bool         `yaml:"status_query"`
	Search          *bool         `yaml:"search"`
}
