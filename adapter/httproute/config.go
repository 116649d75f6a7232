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
	Name string
	// BaseURL is the API root, http(s), without credentials, query or
	// fragment; it may be (or contain) ${env:NAME}.
	BaseURL string
	// Headers are sent with every API call (never with Probe). A value is
	// text with ${env:NAME} references; credentials must come from them.
	Headers []Header
	// Timeout bounds each HTTP call, or each tool call of an MCP route
	// (default 10s).
	Timeout time.Duration
	// PropagateTrace sends the W3C traceparent of each call's span to the
	// API (propagate_trace; default off: an API need not learn settle's
	// trace ids). It has no effect while tracing is off.
	PropagateTrace bool
	// MCP declares the upstream MCP server of a route whose steps call
	// tools (tool and arguments) instead of URLs; such a route has no
	// base_url and no headers (mcp.headers instead).
	MCP *MCPConfig

	Write       *WriteConfig
	Payload     *PayloadConfig
	Search      *SearchConfig
	Readback    *ReadbackConfig
	Status      *StatusConfig
	Identity    *IdentityConfig
	Correlation *CorrelationConfig
	// Parent is the shape of an intent's parent (its ParentExternalID);
	// required when a URL uses {{parent}}. A parent that does not fit is
	// refused before anything is recorded or written.
	Parent *ParentConfig
	// RateLimit declares the API's rate-limit headers; Retry-After is
	// read on every route.
	RateLimit    *RateLimitConfig
	Capabilities CapabilitiesConfig
	// Policy is the route policy (adapter.DefaultPolicy() overridden by the
	// file's policy section; key_retention defaults to the capability's).
	Policy events.Policy

	// Env resolves ${env:NAME}; nil means os.LookupEnv. Go only.
	Env func(string) (string, bool) `yaml:"-"`
	// Client is the HTTP client; nil means one with Timeout that does not
	// follow redirects. It must not retry. Go only.
	Client *http.Client `yaml:"-"`
	// Now is the clock the identity cache is refreshed by and waits are
	// measured on; nil means time.Now. Go only.
	Now func() time.Time `yaml:"-"`
	// Sleep waits d inside one listing (rate_limit.max_wait); nil means a
	// timer that ends with ctx. Go only.
	Sleep func(ctx context.Context, d time.Duration) error `yaml:"-"`
	// MCPTransport, on a route with an mcp section, replaces its command
	// or url: each start of the upstream connects a new transport from it
	// (an upstream in this process). Such an upstream is never shared.
	// Go only.
	MCPTransport func() sdk.Transport `yaml:"-"`

	// upstreams are the MCP upstreams of the route's file (Parse):
	// routes that declare the same one share it.
	upstreams *upstreamPool
}

// MCPConfig is the upstream MCP server a route calls: a command settle
// starts and talks to over stdio (Command, Args, Env), or a streamable
// HTTP endpoint (URL, Headers). Command, Args, Env's values, URL and
// Headers' values may use ${env:NAME}; credentials must come from it.
type MCPConfig struct {
	Command string
	Args    []string
	// Env is the whole environment of the command besides PATH, HOME,
	// TMPDIR and LANG: settle's own environment is not passed on.
	Env     map[string]string
	URL     string
	Headers []Header
	// MaxResult bounds the bytes of one tool result (default 4 MiB); a
	// larger one is a read failure, or unknown for a write.
	MaxResult int
	// Reads are upstream tools settle's MCP gateway passes through
	// unchanged, beside those the upstream annotates readOnlyHint: true
	// (mcp.reads). Tools the route's steps read with need not be listed.
	Reads []string
	// Unprotected are upstream tools the gateway passes through without
	// recording or settling them; every answer says so (mcp.unprotected).
	// Any other tool of the upstream is not offered.
	Unprotected []string
}

// RateLimitConfig declares how an API says it is rate-limiting. A
// response that asks to wait — Retry-After (seconds or an HTTP date), or
// Remaining at "0" with a Reset (Unix seconds) or ResetAfter (seconds) —
// carries the wait in adapter.CallError.RetryAfter, on writes and reads.
type RateLimitConfig struct {
	// Remaining is the header with the requests left (x-ratelimit-remaining).
	Remaining string
	// Reset is the header with the Unix time the limit resets
	// (x-ratelimit-reset); ResetAfter one with the seconds until then.
	Reset      string
	ResetAfter string
	// MaxWait is how long one listing may wait between its pages when
	// the API asks it to (0: never; the read fails with the wait, and the
	// reconciler reads again after it).
	MaxWait time.Duration
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
	Tool      string
	Arguments any
	// Method is POST, PUT, PATCH or DELETE.
	Method string
	// URL is a URL template starting with {{base}}/.
	URL string
	// IdempotencyHeader carries the intent's idempotency key (the same on
	// every attempt); AttemptHeader the attempt id. Empty: not sent.
	IdempotencyHeader string
	AttemptHeader     string
	// Headers are templated extra headers; a header rendering empty is not
	// sent.
	Headers map[string]string
	// Body is the request body's value tree (nil: no body). Encoding is
	// "json" (default) or "form" (a flat mapping, URL-encoded).
	Body     any
	Encoding string
	// Response says what a success must look like.
	Response ResponseConfig
	// Outcomes are rules checked in order before the status policy; the
	// first that matches decides.
	Outcomes []OutcomeRule
	// ErrorCode is a JSON path to the API's own error code: a definite
	// rejection carries it (when it is snake_case) instead of http_rejected.
	ErrorCode string
	// Status overrides adapter.DefaultStatusPolicy for the listed codes.
	Status *StatusPolicyConfig
}

// ResponseConfig maps a success response.
type ResponseConfig struct {
	// Success lists the success statuses (default: every 2xx); another
	// 2xx is unknown (unexpected_status).
	Success []int
	// ExternalID (required) and LiveURL are value expressions: a JSON path
	// ($.id) or a template ({{$.booking_id}}@v{{$.version}}).
	ExternalID string
	LiveURL    string
	// Expect maps JSON paths to the template their value must equal;
	// Require lists JSON paths that must not be empty. Otherwise the
	// outcome is unknown (response_mismatch).
	Expect  map[string]string
	Require []string
	// Payload, when set, rebuilds the payload from the response; it must
	// hash like the payload sent, else unknown (response_mismatch).
	Payload any
}

// OutcomeRule classifies a response before the status policy. Every
// condition given must hold: Status (one of), Match (every JSON path
// equals its template), Unless (not every one does), NonEmpty (every
// JSON path holds a non-empty value).
type OutcomeRule struct {
	Status   []int
	Match    map[string]string
	Unless   map[string]string
	NonEmpty []string
	// Headers maps response header names to the text their value must
	// equal (x-ratelimit-remaining: "0"); HasHeaders lists headers that
	// must be present (retry-after).
	Headers    map[string]string
	HasHeaders []string
	// Text is a text the result of an MCP tool that answered isError
	// holds (rules of an MCP route classify such results only).
	Text string
	// Outcome is rejected (proven not executed), retryable (rejected and
	// inviting a retry), unknown, or key_reused: the API says the
	// idempotency key was already used with another request — evidence
	// that an earlier request reached it, classified unknown with code
	// adapter.CodeKeyReused (Code may then be left out).
	Outcome string
	// Code is the stable snake_case code recorded; Message a fixed text.
	Code    string
	Message string
}

// StatusPolicyConfig overrides how HTTP statuses classify a write.
type StatusPolicyConfig struct {
	Definite4xx  []int
	Retryable4xx []int
	Unknown      []int
}

// PayloadConfig declares the route's payload: validation and canonical
// shape (adapter.PayloadNormalizer).
type PayloadConfig struct {
	// Fields, in the order they are checked. Unknown fields are refused.
	Fields []FieldConfig
	// NearMatch names fields on which a record that is not an exact match
	// still resembles the intent (adapter.Resembler), e.g. [body].
	NearMatch []string
	// Normalize names the rewritings the API documents for the text it
	// stores (links, entities, whitespace): applied to both sides before
	// a read's payload is compared with the intent's.
	Normalize []string
}

// FieldConfig is one payload field.
type FieldConfig struct {
	Name string `yaml:"-"`
	// Type is string, sha256, integer, number, boolean, array, object or
	// any.
	Type      string
	Required  bool
	NonEmpty  bool // string: not blank; array, object: at least one element
	OmitEmpty bool // "", [], {} and null are left out of the canonical form
	Pattern   string
	MinLength *int // bytes of a string, elements of an array
	MaxLength *int
	Minimum   *float64
	Maximum   *float64
	Enum      []string
	// Default is used when the field is absent (a value tree).
	Default any
	// Items is the element of an array; Fields the fields of an object
	// (none: any object).
	Items  *FieldConfig
	Fields []FieldConfig
}

// RecordFields maps a JSON object to an adapter.Record. Each is a value
// expression; Payload is a value tree rebuilt in the intent's shape.
type RecordFields struct {
	ExternalID string
	LiveURL    string
	AuthorID   string
	ParentID   string
	// Visibility is a value expression whose text is the visibility
	// ("public" passes); with VisibilityMap its text is looked up there
	// (an unmapped value is "unknown"); with VisibilityProbe the object
	// is "public" when its live URL answers 200 without credentials.
	Visibility      string
	VisibilityMap   map[string]string `yaml:"-"`
	VisibilityProbe bool              `yaml:"-"`
	// CreatedAt is the object's creation time: RFC 3339 text, or Unix
	// seconds (a number or a decimal string, e.g. Slack's "1712345678.000100";
	// values of 10^11 and more are Unix milliseconds). On a route that may
	// retry, an item whose CreatedAt is absent (null, 0) cannot be mapped.
	CreatedAt string
	Payload   any
}

// SearchConfig lists an account's objects in a time window.
type SearchConfig struct {
	// URL may use {{account}}, {{from}}, {{to}}, the pagination variables
	// ({{cursor}}, {{page}}, {{offset}}, {{page_size}}) and the intent's
	// values (see the route manual).
	URL string
	// Tool and Arguments replace URL on an MCP route: the listing tool
	// and its arguments, templated as URL is (cursor, page, from, to).
	Tool      string
	Arguments any
	// Items is the JSON path of the page's array; a page without it is an
	// error, never an empty page.
	Items string
	// Pagination, at most one: NextCursor is the path of the next page's
	// cursor in the body ({{cursor}} in URL; an empty cursor ends the
	// listing); NextLink follows the Link header's rel="next" (a response
	// without one ends it); PageSize with {{page}} (from FirstPage,
	// default 1) or {{offset}} in URL counts pages. None: one page (an
	// answer with a Link rel="next" is then an incomplete listing).
	// PageSize is also what {{page_size}} renders, in any pagination;
	// a URL that uses it must declare one.
	NextCursor string
	NextLink   bool
	PageSize   int
	FirstPage  *int
	// Page and offset pagination must prove the end of a listing, since
	// an API may cap the page size silently (a short page proves
	// nothing): Total is the JSON path of the listing's total count (the
	// listing ends once that many items were read, or at an empty page);
	// End "empty_page" ends it at the first page without items.
	Total string
	End   string
	// MaxPages bounds the pages one search reads; a listing that needs
	// more is a read failure (listing_incomplete), never a shorter list.
	MaxPages int
	// WindowFilter is the item field the API's from/to filter compares:
	// created_at (default), updated_at (the upper bound is then not sent,
	// and items created outside the window are dropped by their
	// created_at, unless a correlation marker names an intent in them)
	// or none (the API does not filter by time).
	WindowFilter string
	Fields       RecordFields
	// OmitsBody: listed items lack the payload; records are Partial.
	OmitsBody bool
}

// IdentityConfig reads the identity the route's credential acts as.
type IdentityConfig struct {
	// URL is a GET with the route's headers, starting with {{base}}.
	URL string
	// Tool and Arguments (constant) replace URL on an MCP route.
	Tool      string
	Arguments any
	// Method is GET (default) or POST; a POST sends Body (a constant
	// value tree) as JSON: a read such as a GraphQL query ({viewer
	// {databaseId}}), never a write.
	Method string
	Body   any
	// ID is a value expression reading the identity ($.id).
	ID      string
	Expect  map[string]string
	Require []string
	// Refresh is how long a resolved identity is trusted (default 10m).
	Refresh time.Duration
}

// ParentConfig is the shape of an intent's parent. Type is integer (a
// decimal number, without sign or leading zeros, at least Minimum) or
// string (matching Pattern, at most MaxLength bytes, no control
// characters). Required (default true) refuses an empty parent.
type ParentConfig struct {
	Type      string
	Pattern   string
	Minimum   *int64
	MaxLength *int
	Required  *bool
}

// CorrelationConfig is the marker that names an intent in its write.
type CorrelationConfig struct {
	// Marker is a template using {{intent_id}} exactly once; write
	// templates send it as {{marker}}.
	Marker string
	// Read is the JSON path of the item field that carries the marker.
	Read string
}

// ReadbackConfig reads one object back by external id.
type ReadbackConfig struct {
	URL string
	// Tool and Arguments replace URL on an MCP route.
	Tool      string
	Arguments any
	// Item is the JSON path of the object in the response (default $).
	Item string
	// Fields default to the search's.
	Fields  *RecordFields
	Expect  map[string]string
	Require []string
	// Checks are the readback checks the route declares
	// (adapter.CheckDeclarer); default: url, author, payload, parent,
	// visibility.
	Checks []string
}

// StatusConfig looks a write up by request id or idempotency key.
type StatusConfig struct {
	URL string
	// Tool and Arguments replace URL on an MCP route.
	Tool      string
	Arguments any
	Item      string
	State     string
	// Map maps the API's states to completed, processing or failed (none:
	// those three words as they are).
	Map            map[string]string
	ExternalID     string
	LiveURL        string
	Version        string
	AppliedVersion string
	Code           string
	PartialEffects string
	ReceivedAt     string
	Payload        any
	Expect         map[string]string
	Require        []string
	// Account is a value expression reading the account the answer
	// belongs to (adapter.StatusResult.Account); an answer of another
	// account is "not found". CredentialScoped declares that the API
	// scopes request ids per credential, so a lookup by request id alone
	// cannot find another account's write. A status query naming the
	// write by {{request_id}} alone needs one of them, or {{account}} in
	// its URL or expectations.
	Account          string
	CredentialScoped bool
}

// CapabilitiesConfig are the capabilities a route declares. StatusQuery
// and Search follow from the status and search sections; when given they
// must agree with them.
type CapabilitiesConfig struct {
	IdempotencyKey  bool
	KeyRetention    time.Duration
	ReflectionDelay time.Duration
	StatusQuery     *bool
	Search          *bool
}
