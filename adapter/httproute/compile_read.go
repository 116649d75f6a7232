package httproute

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/adapter"
)

func (c *compiler) recordSpec(r *RecordFields, field string, ctx tctx, urlUsesParent bool, declared map[string]bool) recordSpec {
	var rs recordSpec
	if r.ExternalID == "" {
		c.report(field+".external_id", "is required: a JSON path ($.id) or a template")
	} else if t := c.tmpl(r.ExternalID, field+".external_id", ctx); t != nil {
		if t.constant() {
			c.report(field+".external_id", "is a constant; it must read the item ($.id)")
		}
		rs.externalID = t
	}
	rs.liveURL = c.liveURL(r.LiveURL, field+".live_url", ctx)
	rs.authorID = c.valueExpr(r.AuthorID, field+".author_id", ctx)
	if rs.authorID != nil && !readsItem(rs.authorID) {
		c.report(field+".author_id", "must read the item (a $ path such as $.user.id): a constant or {{account}} would make every item look like ours")
	}
	rs.parentID = c.valueExpr(r.ParentID, field+".parent_id", ctx)
	rs.parentFrom = itemPaths(rs.parentID)
	if t := rs.parentID; t != nil && !readsItem(t) && !(urlUsesParent && t.whole() != nil && t.whole().name == varParent && len(t.whole().filters) == 0) {
		c.report(field+".parent_id", "must read the item (a $ path such as $.parent_id), or be exactly {{parent}} when the URL lists one parent's items ({{parent}} in the URL)")
	}
	for _, f := range []struct {
		t    *template
		name string
	}{{rs.externalID, "external_id"}, {rs.liveURL.template(), "live_url"}, {rs.authorID, "author_id"}} {
		if f.t.uses(varParent) {
			c.report(field+"."+f.name, "{{parent}} is only for parent_id (of a parent-scoped read)")
		}
	}
	rs.visibility = c.valueExpr(r.Visibility, field+".visibility", ctx)
	switch {
	case r.VisibilityProbe && (r.Visibility != "" || len(r.VisibilityMap) > 0):
		c.report(field+".visibility.probe", "is instead of from and map: the live URL's answer decides")
	case len(r.VisibilityMap) > 0 && r.Visibility == "":
		c.report(field+".visibility.from", "is required with map: the item field whose value is mapped")
	case rs.visibility != nil && rs.visibility.constant() && len(r.VisibilityMap) == 0:
		c.warn(field+".visibility", "is the constant "+strconvQuote(rs.visibility.src)+": settle cannot see a post that is hidden, moderated or private; map an item field (visibility: {from: $.state, map: {...}}) or probe the live URL (visibility: {probe: true})")
	}
	rs.visMap = r.VisibilityMap
	rs.visProbe = r.VisibilityProbe
	rs.createdAt = c.valueExpr(r.CreatedAt, field+".created_at", ctx)
	if r.Payload != nil {
		rs.payload = c.payloadTree(r.Payload, field+".payload", tctx{vars: []string{varBase}, doc: ctx.doc}, declared)
	}
	return rs
}

func strconvQuote(s string) string { return strconv.Quote(clip(s)) }

func (c *compiler) compileSearch(a *Adapter, s *SearchConfig) {
	ss := &searchSpec{omitsBody: s.OmitsBody, maxPages: s.MaxPages, urlUsed: map[string]bool{}, fieldsUsed: map[string]bool{}}
	urlCtx := readCtx(c.declared, ss.urlUsed, "", varFrom, varTo, varCursor, varPage, varPageSize, varOffset)
	ss.url = c.target("search", s.URL, s.Tool, s.Arguments, urlCtx)
	if c.mcp && s.NextLink {
		c.report("search.next_link", "applies to HTTP routes (a Link header): a tool's listing pages by next_cursor with {{cursor}}, or {{page}}/{{offset}}")
	}
	if s.Items == "" {
		c.report("search.items", "is required: the JSON path of the page's array ($.items, or $ for a top-level array)")
	} else if p := c.path(s.Items, "search.items"); p != nil {
		ss.items = *p
	}
	ss.nextCursor = c.path(s.NextCursor, "search.next_cursor")
	if ss.url != nil {
		c.searchPagination(ss, s)
	}
	c.searchBounds(ss, s)
	itemCtx := fieldCtx(ss.fieldsUsed, "a listed item")
	ss.fields = c.recordSpec(&s.Fields, "search.fields", itemCtx, ss.url != nil && ss.url.uses(varParent), c.declared)
	if s.Fields.Payload == nil && !s.OmitsBody {
		c.report("search.fields.payload", "is required: candidates are matched by their payload (or set omits_body: true)")
	}
	used := maps.Clone(ss.urlUsed)
	maps.Copy(used, ss.fieldsUsed)
	ss.needs = needsScope(used, varAccount)
	a.search = ss
}

// searchPagination checks that search.url declares one pagination with a
// proven end, and sets the search's mode.
func (c *compiler) searchPagination(ss *searchSpec, s *SearchConfig) {
	uses := func(v string) bool { return ss.url.uses(v) }
	var modes []string
	if s.NextCursor != "" || uses(varCursor) {
		modes = append(modes, "next_cursor")
	}
	if s.NextLink {
		modes = append(modes, "next_link")
	}
	if uses(varPage) || uses(varOffset) {
		modes = append(modes, "{{page}}/{{offset}}")
	}
	switch {
	case len(modes) > 1:
		c.report("search.url", "declares more than one pagination ("+strings.Join(modes, ", ")+"); use one")
	case uses(varCursor) && s.NextCursor == "":
		c.report("search.next_cursor", "is required: search.url uses {{cursor}}")
	case !uses(varCursor) && s.NextCursor != "":
		c.report("search.url", "must use {{cursor}}: search.next_cursor is set")
	case uses(varPage) && uses(varOffset):
		c.report("search.url", "uses both {{page}} and {{offset}}; use one")
	case (uses(varPage) || uses(varOffset)) && s.PageSize <= 0:
		c.report("search.page_size", "is required: search.url counts pages ({{page}} or {{offset}}); give the page size it asks for ({{page_size}})")
	case s.PageSize != 0 && !uses(varPage) && !uses(varOffset) && !uses(varPageSize):
		c.report("search.page_size", "applies only when search.url uses {{page}}, {{offset}} or {{page_size}}")
	case uses(varPageSize) && s.PageSize <= 0:
		c.report("search.page_size", "is required: search.url uses {{page_size}}")
	case uses(varPageSize) && len(modes) == 0:
		c.report("search.url", "asks for pages of {{page_size}} items but declares no way to read the next page, so its first page would be taken "+
			"for the whole listing and a write on a later page for absent; declare the API's pagination (next_cursor with {{cursor}}, next_link: true, "+
			"or {{page}}/{{offset}} with end or total)")
	case s.FirstPage != nil && !uses(varPage):
		c.report("search.first_page", "applies only when search.url uses {{page}}")
	case (uses(varPage) || uses(varOffset)) && s.Total == "" && s.End == "":
		c.report("search.end", "is required: search.url counts pages ({{page}} or {{offset}}), and a page shorter than page_size does not prove the end of a listing "+
			"(APIs cap the page size silently: GitHub at 100, others at an admin setting); declare end: empty_page (read until a page has no items) "+
			"or total: $.<path> (the listing's total count in each page)")
	case (s.Total != "" || s.End != "") && !uses(varPage) && !uses(varOffset):
		f := "search.total"
		if s.End != "" {
			f = "search.end"
		}
		c.report(f, "applies only when search.url counts pages ({{page}} or {{offset}}): a cursor ends a listing by its absence, a Link header by having no rel=\"next\"")
	}
	switch {
	case s.NextCursor != "":
		ss.mode = pageCursor
	case s.NextLink:
		ss.mode = pageLink
	case uses(varPage):
		ss.mode = pageNumber
	case uses(varOffset):
		ss.mode = pageOffset
	}
}

// searchBounds checks the search's end, total, page size, first page,
// page limit and window filter.
func (c *compiler) searchBounds(ss *searchSpec, s *SearchConfig) {
	switch s.End {
	case "", endEmptyPage: // an empty page ends every page or offset listing
	default:
		c.report("search.end", fmt.Sprintf("%q is not empty_page", clip(s.End)))
	}
	ss.total = c.path(s.Total, "search.total")
	switch {
	case s.PageSize < 0 || s.PageSize > 10000:
		c.report("search.page_size", "must be between 1 and 10000")
	default:
		ss.pageSize = s.PageSize
	}
	ss.firstPage = 1
	if s.FirstPage != nil {
		if *s.FirstPage < 0 {
			c.report("search.first_page", "must not be negative")
		}
		ss.firstPage = *s.FirstPage
	}
	switch {
	case s.MaxPages == 0:
		ss.maxPages = DefaultMaxPages
	case s.MaxPages < 0 || s.MaxPages > maxMaxPages:
		c.report("search.max_pages", fmt.Sprintf("must be between 1 and %d", maxMaxPages))
	}
	switch s.WindowFilter {
	case "", windowCreated:
		ss.window = windowCreated
	case windowUpdated, windowNone:
		ss.window = s.WindowFilter
		if s.Fields.CreatedAt == "" {
			c.report("search.fields.created_at", "is required with window_filter: "+s.WindowFilter+": settle keeps the items created in the window by it")
		}
	default:
		c.report("search.window_filter", fmt.Sprintf("%q is not created_at, updated_at or none", clip(s.WindowFilter)))
	}
}

func (c *compiler) compileReadback(a *Adapter, r *ReadbackConfig, search *SearchConfig) {
	rs := &readSpec{used: map[string]bool{}}
	urlCtx := readCtx(c.declared, rs.used, "", varExternalID)
	rs.url = c.target("readback", r.URL, r.Tool, r.Arguments, urlCtx)
	if rs.url != nil && !rs.url.uses(varExternalID) {
		c.report("readback.url", "must use {{external_id}}")
	}
	rs.item = c.path(r.Item, "readback.item")
	ctx := fieldCtx(rs.used, "the readback response", varExternalID)
	scoped := rs.url != nil && rs.url.uses(varParent)
	switch {
	case r.Fields != nil:
		rs.fields = c.recordSpec(r.Fields, "readback.fields", ctx, scoped, nil)
		if r.Fields.Payload == nil {
			c.report("readback.fields.payload", "is required: a readback is checked against the intent's payload")
		}
	case search != nil:
		// Reused: a problem already found in search.fields is not repeated.
		c.prefix = "(as readback.fields, which default to search.fields) "
		c.quiet = true
		rs.fields = c.recordSpec(&search.Fields, "search.fields", ctx, scoped || (a.search != nil && a.search.url != nil && a.search.url.uses(varParent)), nil)
		c.quiet = false
		c.prefix = ""
	default:
		c.report("readback.fields", "is required (without a search section there are no fields to reuse)")
	}
	rs.expect = c.expectations(r.Expect, "readback.expect", readCtx(c.declared, rs.used, "the readback response", varExternalID))
	rs.require = c.paths(r.Require, "readback.require")
	seen := map[string]bool{}
	for i, k := range r.Checks {
		f := "readback.checks[" + strconv.Itoa(i) + "]"
		switch {
		case !slices.Contains(allChecks, k):
			c.report(f, fmt.Sprintf("%q is not a check (%s)", clip(k), strings.Join(allChecks, ", ")))
		case seen[k]:
			c.report(f, "is listed twice")
		}
		seen[k] = true
	}
	if r.Checks != nil {
		for _, must := range []string{adapter.CheckAuthor, adapter.CheckPayload} {
			if !seen[must] {
				c.report("readback.checks", "must include "+must+": a readback that does not check it proves nothing about the write")
				break
			}
		}
		rs.checks = r.Checks
	}
	rs.needs = needsScope(rs.used)
	a.readback = rs
}

var allChecks = []string{adapter.CheckURL, adapter.CheckAuthor, adapter.CheckPayload, adapter.CheckParent, adapter.CheckVisibility}

func (c *compiler) compileStatus(a *Adapter, s *StatusConfig) {
	ss := &statusSpec{used: map[string]bool{}}
	ss.url = c.target("status", s.URL, s.Tool, s.Arguments, readCtx(c.declared, ss.used, ""))
	if ss.url != nil && !ss.url.uses(varRequestID) && !ss.url.uses(varIdempotencyKey) && !ss.url.uses(varIntentID) {
		c.report("status.url", "must use {{request_id}}, {{idempotency_key}} or {{intent_id}} to name the write")
	}
	ctx := readCtx(c.declared, ss.used, "the status response")
	ss.item = c.path(s.Item, "status.item")
	if s.State == "" {
		c.report("status.state", "is required: a JSON path ($.state)")
	} else {
		ss.state = c.tmpl(s.State, "status.state", ctx)
	}
	keys := slices.Sorted(maps.Keys(s.Map))
	for _, k := range keys {
		switch s.Map[k] {
		case adapter.StatusCompleted, adapter.StatusProcessing, adapter.StatusFailed:
		default:
			c.report(fieldPath("status.map", k), fmt.Sprintf("%q is not completed, processing or failed", clip(s.Map[k])))
		}
	}
	ss.stateMap = s.Map
	ss.externalID = c.valueExpr(s.ExternalID, "status.external_id", ctx)
	ss.liveURL = c.liveURL(s.LiveURL, "status.live_url", ctx)
	ss.version = c.valueExpr(s.Version, "status.version", ctx)
	ss.appliedVersion = c.valueExpr(s.AppliedVersion, "status.applied_version", ctx)
	ss.code = c.valueExpr(s.Code, "status.code", ctx)
	ss.partialEffects = c.valueExpr(s.PartialEffects, "status.partial_effects", ctx)
	ss.receivedAt = c.valueExpr(s.ReceivedAt, "status.received_at", ctx)
	if s.Payload != nil {
		ss.payload = c.payloadTree(s.Payload, "status.payload", tctx{vars: []string{varBase}, doc: "the status response"}, c.declared)
	}
	ss.expect = c.expectations(s.Expect, "status.expect", ctx)
	ss.require = c.paths(s.Require, "status.require")
	if s.Account != "" {
		if t := c.tmpl(s.Account, "status.account", withDoc(tctx{vars: []string{varBase}}, "the status response")); t != nil {
			if !readsItem(t) {
				c.report("status.account", "must read the status response (a $ path such as $.account)")
			} else {
				ss.account = t
			}
		}
	}
	// A request id is the caller's: two accounts may use one. A lookup by
	// it alone could find another account's write and confirm it.
	scopedByKey := ss.url != nil && (ss.url.uses(varIdempotencyKey) || ss.url.uses(varIntentID)) // both name the account's intent
	usesAccount := ss.url != nil && ss.url.uses(varAccount)
	for _, e := range ss.expect {
		usesAccount = usesAccount || e.want.uses(varAccount)
	}
	if ss.url != nil && !scopedByKey && !usesAccount && s.Account == "" && !s.CredentialScoped && !c.skipUnder("status") {
		c.report("status.url", "looks the write up by {{request_id}} alone, which two accounts may share: a lookup could confirm another account's write; "+
			"scope it by the account ({{account}} in status.url or status.expect, or status.account: $.<path> read from the answer), "+
			"or declare credential_scoped: true if the API keeps request ids per credential")
	}
	ss.needs = needsScope(ss.used, varRequestID, varIdempotencyKey, varAccount)
	a.status = ss
}

func (c *compiler) compileIdentity(a *Adapter, id *IdentityConfig) {
	is := &identitySpec{refresh: id.Refresh}
	is.url = c.target("identity", id.URL, id.Tool, id.Arguments, tctx{vars: []string{varBase}})
	if c.mcp && (id.Method == http.MethodGet || id.Method == http.MethodPost) {
		c.report("identity.method", "applies to HTTP routes: an MCP route's identity is a tool call")
	}
	switch id.Method {
	case "", http.MethodGet:
		if id.Body != nil {
			c.report("identity.body", "applies to method POST only")
		}
	case http.MethodPost:
		is.method = http.MethodPost
		if id.Body == nil {
			c.report("identity.body", "is required with method POST: the JSON the read sends (a GraphQL query: {query: \"{ viewer { databaseId } }\"})")
		} else if n := compileTree(id.Body, "identity.body", tctx{}, c.report); n != nil {
			if v, _, err := n.eval(&scope{}, false); err == nil {
				if b, err := json.Marshal(v); err == nil {
					is.body = b
				}
			}
		}
	default:
		c.report("identity.method", fmt.Sprintf("%q is not GET or POST", clip(id.Method)))
	}
	ctx := tctx{vars: []string{varBase}, doc: "the identity response"}
	if id.ID == "" {
		c.report("identity.id", "is required: the JSON path of the credential's identity ($.id)")
	} else if t := c.tmpl(id.ID, "identity.id", ctx); t != nil {
		if !readsItem(t) {
			c.report("identity.id", "must read the identity response (a $ path such as $.id)")
		}
		is.id = t
	}
	is.expect = c.expectations(id.Expect, "identity.expect", ctx)
	is.require = c.paths(id.Require, "identity.require")
	switch {
	case id.Refresh == 0:
		is.refresh = DefaultIdentityRefresh
	case id.Refresh < time.Second || id.Refresh > 24*time.Hour:
		c.report("identity.refresh", "must be between 1s and 24h")
	}
	a.identity = is
	a.ident = &identityCache{}
}

// intentIDPattern matches an intent id (events.IntentID).
const intentIDPattern = `in_[a-z2-7]{32}`

func (c *compiler) compileCorrelation(a *Adapter, cc *CorrelationConfig) {
	cs := &corrSpec{}
	switch {
	case cc.Marker == "":
		c.report("correlation.marker", "is required: a template naming the intent, e.g. \"\\n\\n<!-- settle:{{intent_id}} -->\"")
	case len(cc.Marker) > 256 || !printableText(cc.Marker):
		c.report("correlation.marker", "must be up to 256 printable characters (new lines allowed)")
	default:
		t := c.tmpl(cc.Marker, "correlation.marker", tctx{vars: []string{varIntentID}})
		if t == nil {
			break
		}
		n := 0
		var re strings.Builder
		for _, p := range t.parts {
			switch {
			case p.e == nil:
				re.WriteString(regexp.QuoteMeta(p.lit))
			case len(p.e.filters) > 0:
				c.report("correlation.marker", "takes {{intent_id}} without filters")
				return
			default:
				n++
				re.WriteString("(" + intentIDPattern + ")")
			}
		}
		if n != 1 {
			c.report("correlation.marker", "must use {{intent_id}} exactly once: the marker names the intent")
			return
		}
		cs.marker = t
		cs.re = regexp.MustCompile(re.String())
		cs.whole = len(t.parts) == 1
	}
	if cc.Read == "" {
		c.report("correlation.read", "is required: the JSON path of the item field that carries the marker ($.body, $.metadata.settle_intent)")
	} else if p := c.path(cc.Read, "correlation.read"); p != nil {
		cs.read = *p
	}
	a.corr = cs
}

// printableText allows new lines and tabs but no other control character.
func printableText(v string) bool { return controlFree(v, "\t\n") }

// readsItem: the expression reads the listed item (a $ path), so its
// value is the API's, not settle's own.
func readsItem(t *template) bool { return t != nil && t.uses(varDoc) }
