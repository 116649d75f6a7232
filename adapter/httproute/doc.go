// Package httproute declares routes in YAML and drives them with one
// generic HTTP adapter, so that adding an external API needs no Go code.
// A route file says how to make the write, how to validate and shape its
// payload, how to find a lost write again (search, readback, status query)
// and which capabilities and policy the route has; Load turns it into
// producer.Routes whose Adapter is an *Adapter.
//
// The generic adapter keeps the port's rules (package adapter): every call
// is one adapter.Do (never retried, GetBody cleared, classified with
// httptrace), redirects are not followed, route headers (credentials) go
// to base_url's origin only and never with Probe, and no header value,
// environment value, URL or response body ever appears in an error, a
// record or a formatted Adapter. examples/routes holds the social, booking
// and payment APIs of the hand-written adapters, declared; the tests drive
// both against the same fakes and compare results.
//
// # API
//
//	Load(path, env) ([]producer.Route, error)   read, check, build
//	Parse(data, env) ([]RouteConfig, error)     decode and check
//	Check(data, env) []error                    every problem, each a *RouteError
//	Build(cfg) (producer.Route, error)          one route (also for configs written in Go)
//	New(cfg) (*Adapter, error)                  Build without the Route
//
// env resolves ${env:NAME} (nil: os.LookupEnv). A *RouteError names the
// route (its name; "routes[2]" when it has none) and the field as a dotted
// path (write.url, search.fields.author_id, headers.Authorization,
// payload.fields.body.type, write.outcomes[1].code), and renders as
// "route <name>: <field>: <reason>". Check reports every problem, each
// once: a value that failed to decode is not checked again, a field gets
// one error, and cross-checks skip sections that are already broken.
//
// *Adapter implements adapter.Adapter, adapter.StatusQuerier,
// adapter.PayloadNormalizer and adapter.Resembler. Go cannot drop a method,
// so Status exists on every route: without a status section it returns
// ErrNoStatusQuery and Capabilities().StatusQuery is false (true exactly
// when the route has a status section); Get without readback returns
// ErrNoReadback; Search without search returns nil, nil; Resembles without
// payload.near_match returns false.
//
// # File format
//
// YAML, decoded with github.com/goccy/go-yaml and then strictly: unknown
// keys, wrong types, duplicate keys, several documents and non-string keys
// are refused; a null value counts as absent. Anchors and aliases may be
// used (to share a field mapping), up to 100 000 values once expanded; a
// file is at most 1 MiB.
//
//	version: 1                    # optional; only 1
//	routes:                       # required, non-empty list
//	  - name: social_post         # required token [a-z0-9_-]{1,64}, unique
//	    base_url: ${env:SOCIAL_BASE_URL}   # http(s), no credentials/query/fragment
//	    headers: {Authorization: "Bearer ${env:SOCIAL_TOKEN}"}
//	    timeout: 10s              # per HTTP call; default 10s, at most 10m
//	    payload: ...              # validation and canonical shape
//	    write: ...                # required
//	    search: ...               # optional: list by account and window
//	    readback: ...             # read one object back by external id
//	    status: ...               # optional: look a write up by request id or key
//	    capabilities: ...
//	    policy: ...               # events.Policy; default producer.DefaultPolicy()
//
// Durations are Go durations ("30s", "5m", "24h"; no "d"). Lists of one
// may be written as a scalar (status: 409).
//
// # Secrets
//
// ${env:NAME} is resolved from the environment, and is allowed only in
// route headers and base_url. A header whose name carries credentials
// (Authorization, Proxy-Authorization, Cookie, or a name containing token,
// secret, auth, password, session, signature, credential or api-key) must
// take them from at least one ${env:NAME}: a route file holds no secret. A
// missing or empty variable, or one with control characters, is an error
// naming the variable, never its value. Headers that carry credentials
// cannot be set in write.headers. Host, Content-Length, Transfer-Encoding,
// Connection, Upgrade, TE and Trailer are the client's.
//
// # Templates
//
// URLs, header values and value expressions are templates: text with
// {{variable}} or {{variable | filter}} parts. Braces must balance ("{{"
// without "}}", or a stray "}}", is an error) and a variable must be
// available where it is used:
//
//	write (url, headers, body)   base account request_id intent_id attempt_id
//	                             idempotency_key parent payload payload.<path>
//	write.response, outcomes     the same, and $.<path> (the response)
//	search.url                   base account from to cursor
//	search.fields                base account $.<path> (a listed item)
//	readback.url                 base external_id
//	readback.fields, expect      base external_id $.<path> (the item read)
//	status.url                   base request_id idempotency_key account
//	status fields, expect        the same, and $.<path> (the item read)
//
// payload is the canonical payload; payload.<path> a value in it, whose
// first name must be a declared payload field. from and to are the search
// window's bounds in RFC 3339 UTC (absent when zero). cursor is the last
// page's next_cursor ("" on the first page).
//
// Filters: omitempty (write.body only: leave out the key when the value is
// "", null, [] or {}), unix (from and to as Unix seconds), before:<text>
// (the text up to the first <text>, e.g. {{external_id | before:@}}).
//
// A value expression is a template, and a string that starts with "$." or
// "$[" ("$" alone where a response is read) is a JSON path: "$.id" is
// short for "{{$.id}}". JSON paths are $ followed by .name (letters,
// digits, _ and -), [n] or ["any name"]; e.g. $.data.post.id,
// $.items[0].id, $["odd key"].
//
// A template that is exactly one {{...}} keeps the value's JSON type (a
// number stays a number, an array an array); otherwise values are
// rendered as text (numbers in JSON form, objects and arrays as JSON) and
// a part that is absent (a missing path, a null) makes the whole text
// absent, so "{{$.id}}@v{{$.version}}" is absent, not "x@v", when version
// is.
//
// URL templates must start with "{{base}}/" (credentials go to base_url's
// origin only; checked again on every call). Values are path-escaped
// before the first "?" and query-escaped after it; {{base}} is inserted as
// it is. A query parameter whose value is one template rendering empty
// ("cursor={{cursor}}" on the first page) is left out. White space and "#"
// are refused outside {{...}}.
//
// Strictness of a write: a request variable (account, request_id,
// intent_id, attempt_id, idempotency_key) that the URL or the body needs
// and that is empty makes the write NotSent (invalid_request, nothing
// sent), unless the value has omitempty; parent and payload values may be
// empty. A write.headers value rendering empty is not sent.
//
// # payload
//
//	payload:
//	  fields:                     # in the order they are checked
//	    body: {type: string, required: true, non_empty: true}
//	    assets: {type: array, items: sha256, default: []}
//	    description: {type: string, max_length: 1000, omit_empty: true}
//	  near_match: [body]          # adapter.Resembler
//
// Types: string, sha256 (64 lowercase hex), integer, number, boolean,
// array (items: a type or a field spec), object (fields: nested specs;
// none: any object), any. A bare type ("items: sha256") is a spec. Keys:
// required, non_empty (string: not blank; array/object: not empty),
// omit_empty (leave "", [], {} out of the canonical form), pattern (RE2,
// strings), min_length/max_length (bytes of a string, elements of an
// array), minimum/maximum (numbers), enum (strings), default (used when
// the field is absent; must satisfy the spec).
//
// NormalizePayload canonicalises (canon/v1) and validates: unknown fields
// are refused, then the fields are checked in order; the result holds the
// declared fields with defaults applied and omit_empty fields left out.
// Errors are *events.FieldError naming the field (payload.body,
// payload.assets[2], payload["odd key"]) and never quoting a value.
// Without payload.fields any JSON value is accepted and canonicalised.
//
// Payloads rebuilt from responses (search, readback, status,
// write.response.payload) are put in the same shape - absent or null
// fields take their default or are left out, omit_empty fields that are
// empty are left out, other keys are kept - but not validated: a record
// is evidence, and a difference shows in its hash.
//
// # write
//
//	write:
//	  method: POST                # POST, PUT, PATCH or DELETE
//	  url: "{{base}}/v1/posts"
//	  idempotency_header: Idempotency-Key   # the intent's key, same on every attempt
//	  attempt_header: X-Settle-Attempt      # the attempt id
//	  headers: {X-Request-Id: "{{attempt_id}}"}
//	  encoding: json              # or form (a flat mapping, URL-encoded)
//	  body: {account: "{{account}}", body: "{{payload.body}}", parent_id: "{{parent | omitempty}}"}
//	  outcomes:                   # checked in order; the first match decides
//	    - {status: [409], match: {$.error: version_conflict}, outcome: rejected, code: version_conflict}
//	    - {non_empty: [$.partial_effects], outcome: unknown, code: failed_with_partial_effects}
//	    - {status: [200, 201], unless: {$.status: succeeded}, outcome: unknown, code: charge_not_succeeded}
//	  error_code: $.error.code    # the API's code for a definite rejection
//	  status: {definite_4xx: [400, 422], retryable_4xx: [429], unknown: [408, 409]}
//	  response:
//	    success: [200, 201]       # default: every 2xx
//	    external_id: $.id         # required; not a constant
//	    live_url: $.url
//	    expect: {$.request_id: "{{request_id}}"}
//	    require: [$.id]
//	    payload: {amount: $.amount, currency: $.currency}
//
// body is a value tree: mappings, lists, literals and templates; "{{payload}}"
// sends the whole canonical payload. Content-Type follows encoding;
// Accept is application/json.
//
// A response is classified in this order:
//
//  1. outcomes: a rule matches when all its conditions hold - status (one
//     of), match (every path equals its template), unless (not every one
//     does), non_empty (every path holds a non-empty value); at least one
//     condition is required. outcome is rejected (proven not executed),
//     retryable (rejected, and a retry is invited) or unknown; code is a
//     stable snake_case code; message a fixed text.
//  2. the status policy: adapter.DefaultStatusPolicy, with the codes listed
//     in write.status overriding it (definite_4xx and retryable_4xx: 4xx;
//     unknown: 4xx or 5xx). A definite rejection carries the snake_case
//     value at error_code instead of http_rejected.
//  3. success: a 2xx outside response.success is unknown
//     (unexpected_status); a body that is not JSON, or an empty
//     external_id, is unknown (response_unparseable); a require, expect or
//     payload that does not hold is unknown (response_mismatch).
//
// Transport failures are adapter.Do's: not sent (DNS, refused, TLS) or
// unknown (reset, timeout, dropped response after the request was
// written).
//
// # search, readback, status
//
//	search:
//	  url: "{{base}}/v1/accounts/{{account}}/posts?since={{from}}&until={{to}}&cursor={{cursor}}"
//	  items: $.items              # the page's array (absent or null: none)
//	  next_cursor: $.next_cursor  # none: one page; required when url uses {{cursor}}
//	  max_pages: 100              # default 100, at most 1000; more is an error
//	  fields:                     # external_id required; payload required unless omits_body
//	    external_id: $.id
//	    live_url: $.url
//	    author_id: $.author_id
//	    parent_id: $.parent_id
//	    visibility: $.visibility
//	    created_at: $.created_at  # RFC 3339 text or Unix seconds
//	    payload: {body: $.body, assets: $.assets}
//	  omits_body: false           # true: listed records are Partial
//	readback:
//	  url: "{{base}}/v1/posts/{{external_id}}"   # must use {{external_id}}
//	  item: $.post                # optional: where the object is ($ by default)
//	  fields: ...                 # default: search.fields
//	  expect: ...                 # as in write.response
//	  require: ...
//	status:
//	  url: "{{base}}/v1/requests/{{request_id}}"  # must use request_id or idempotency_key
//	  item, expect, require: ...
//	  state: $.state              # required
//	  map: {succeeded: completed, pending: processing, failed: failed}
//	  external_id, live_url, version, applied_version, code, partial_effects, received_at, payload
//
// Search deduplicates items by external id; a listed item missing a
// required payload field, or any item when omits_body is set, is Partial
// (the reconciler Gets it). Get and Status answer adapter.ErrNotFound on
// 404 or when item is absent; other failures wrap a *adapter.CallError. A
// read whose expect or require does not hold is unparseable. Status maps
// the state with map (none: completed, processing and failed as they are;
// any other state is unparseable), keeps code for failed states only, and
// leaves Payload nil when a required payload field is absent, so a hash
// check fails rather than guessing.
//
// A route without status and without policy.trust_response must have a
// readback: the reconciler verifies writes by reading them back.
//
// A search must map author_id from the listed item. A route whose
// policy.retry is not never needs a dedup proof: capabilities
// idempotency_key with key_retention, or (without a status section) a
// search whose author_id, and parent_id when the write uses {{parent}},
// read the listed item; Capabilities().SearchAuthoritative is true exactly
// for such a search. See examples/routes/README.md.
//
// # capabilities and policy
//
//	capabilities:
//	  idempotency_key: true       # the API deduplicates by the key ...
//	  key_retention: 24h          # ... for this long (required with idempotency_key)
//	  reflection_delay: 5s        # status routes: how long a write may stay invisible
//	  status_query: true          # optional; must agree with the status section
//	  search: false               # optional; must agree with the search section
//	policy:                       # events.Policy, checked with Validate
//	  first_write: auto           # auto | approval
//	  retry: approval             # auto | approval | never
//	  retry_budget: 1
//	  attempt_deadline: 30s
//	  search_before: 5m
//	  search_after: 30m
//	  key_retention: 24h          # default: capabilities.key_retention; never more
//	  retention_margin: 1h
//	  trust_response: false
//	  clock_skew: 5s
//
// idempotency_key requires write.idempotency_header (the key must reach
// the API); a policy key_retention needs idempotency_key.
//
// httproute imports adapter, events and producer (for producer.Route);
// nothing in settle imports it but wiring.
package httproute
