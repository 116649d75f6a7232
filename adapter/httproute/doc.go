// Package httproute declares routes in YAML and drives them with one
// generic HTTP adapter, so that adding an external API needs no Go code.
// A route file says how to make the write, how to validate and shape its
// payload, how to find a lost write again (search, readback, status
// query), who the credential is (identity), how a write names its intent
// (correlation marker), and which capabilities and policy the route has;
// Load turns it into adapter.Routes whose Adapter is an *Adapter.
//
// The route manual — file format, templates and filters, pagination,
// time fields, visibility, identity, the correlation marker, the dedup
// proof a retry needs, errors and warnings, and the example files for
// GitHub, Slack and Stripe — is examples/routes/README.md.
//
// env resolves ${env:NAME} (nil: os.LookupEnv). Every problem is a
// *RouteError naming route and field.
//
// A route that could not find its own write is refused at load: a search
// without created_at when it may retry, a write that sends a compared
// payload field changed, page or offset pagination without a proven end,
// a search URL asking for {{page_size}} items without a pagination,
// a {{marker}} inside a compared field that correlation.read does not read,
// {{parent}} in a URL without a declared shape, a status query by a bare
// request id, a key-reused answer declared a rejection.
//
// *Adapter implements adapter.Adapter, adapter.StatusQuerier,
// adapter.PayloadNormalizer, adapter.Resembler, adapter.IdentityChecker,
// adapter.ParentChecker, adapter.IntentScoped and adapter.CheckDeclarer.
// Without a status section Status returns ErrNoStatusQuery; Get without
// readback returns ErrNoReadback; Search without search returns nil, nil.
// A failure classified from a response carries the wait the API asked for
// (adapter.CallError.RetryAfter).
//
// The generic adapter keeps the port's rules (package adapter): every call
// is one adapter.Do (never retried, GetBody cleared, classified with
// httptrace), redirects are not followed, route headers (credentials) go
// to base_url's origin only and never with Probe, and no header value,
// environment value, URL or response body ever appears in an error, a
// record or a formatted Adapter.
//
// A route with an mcp section calls an upstream MCP server's tools
// (mcpcall.go): the upstream is started on first use and supervised
// (restarted with backoff when its session ends; Ready and UpstreamReady
// say whether and why it is down), shared by the routes of one file that
// declare the same one, and read with each message bounded (max_result
// plus 64 KiB).
//
// httproute imports adapter and events; nothing in settle imports it but
// wiring (cmd/settle).
// It must never import: ledger, producer, fsm, consumers/..., projector, api, mcp, cmd/..., testharness, fakeapi.
package httproute
