package httproute

import (
	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// compileCapabilities sets the adapter's capabilities and checks what the
// route declares of them against its sections.
func (c *compiler) compileCapabilities(a *Adapter, cfg RouteConfig) {
	caps := cfg.Capabilities
	a.caps = adapter.Capabilities{
		IdempotencyKey:  caps.IdempotencyKey,
		KeyRetention:    caps.KeyRetention,
		StatusQuery:     cfg.Status != nil,
		ReflectionDelay: caps.ReflectionDelay,
		Search:          cfg.Search != nil,
	}
	if cfg.Search != nil {
		a.caps.SearchOmitsBody = cfg.Search.OmitsBody
		// SearchAuthoritative is set by checkDedup, from the mapping.
	}
	a.caps.Correlation = cfg.Correlation != nil
	switch {
	case caps.IdempotencyKey && caps.KeyRetention <= 0:
		c.report("capabilities.key_retention", "is required when idempotency_key is true (the API's documented key retention, e.g. 24h)")
	case !caps.IdempotencyKey && caps.KeyRetention > 0:
		c.report("capabilities.key_retention", "only applies when idempotency_key is true")
	}
	if caps.IdempotencyKey && c.mcp && a.write != nil && a.write.url != nil && !a.write.url.uses(varIdempotencyKey) && !c.skip("capabilities.idempotency_key") {
		c.report("write.arguments", "must send {{idempotency_key}} in an argument when capabilities.idempotency_key is true (the key must reach the upstream)")
	}
	if caps.IdempotencyKey && !c.mcp && cfg.Write != nil && cfg.Write.IdempotencyHeader == "" && !c.skip("capabilities.idempotency_key") {
		c.report("write.idempotency_header", "is required when capabilities.idempotency_key is true (the key must reach the API)")
	}
	c.checkDeclared(caps.StatusQuery, cfg.Status != nil, "status", "capabilities.status_query")
	c.checkDeclared(caps.Search, cfg.Search != nil, "search", "capabilities.search")
	if caps.ReflectionDelay > 0 && cfg.Status == nil && !c.skip("status") {
		c.report("capabilities.reflection_delay", "only applies to a route with a status section")
	}
}

// checkDeclared reports a capability declared (field) against whether the
// route has the section.
func (c *compiler) checkDeclared(declared *bool, has bool, section, field string) {
	if declared == nil || *declared == has || c.skip(section) {
		return
	}
	if *declared {
		c.report(field, "is true, but the route has no "+section+" section")
	} else {
		c.report(field, "is false, but the route has a "+section+" section")
	}
}

// compilePolicy sets the route's policy (the default where none is
// declared) and reports whether it is valid.
func (c *compiler) compilePolicy(a *Adapter, cfg RouteConfig) (events.Policy, bool) {
	caps := cfg.Capabilities
	policy := cfg.Policy
	if policy == (events.Policy{}) {
		policy = defaultPolicy()
	}
	if policy.KeyRetention == 0 && caps.IdempotencyKey {
		policy.KeyRetention = events.Duration(caps.KeyRetention)
	}
	policyOK := !c.skipUnder("policy")
	if policyOK {
		if err := policy.Validate("policy."); err != nil {
			policyOK = false
			var fe *events.FieldError
			if errors.As(err, &fe) {
				c.report(fe.Field, fe.Reason)
			}
		} else if !c.skipUnder("capabilities") {
			if policy.KeyRetention > 0 && !caps.IdempotencyKey {
				c.report("policy.key_retention", "applies to a route with capabilities.idempotency_key only")
			} else if caps.IdempotencyKey && policy.KeyRetention.D() > caps.KeyRetention {
				c.report("policy.key_retention", "must not exceed capabilities.key_retention: a retry past the API's retention could execute twice")
			}
		}
	}
	a.routePolicy = policy
	return policy, policyOK
}

// writesTakeParent: the write sends {{parent}} (URL, headers or body).
func (w *writeSpec) writesTakeParent() bool {
	if w == nil {
		return false
	}
	if w.url != nil && w.url.uses(varParent) {
		return true
	}
	for _, h := range w.headers {
		if h.t.uses(varParent) {
			return true
		}
	}
	return w.body.uses(varParent)
}

// checkDedup enforces the rules that let the reconciler trust a search or
// a retry, and sets Capabilities.SearchAuthoritative:
//   - a search must map author_id from the listed item (candidates are
//     matched by author);
//   - the search is authoritative when author_id, and parent_id where the
//     writes take a parent, read the listed item: only then does a window
//     that closes without a match prove that no write landed in it;
//   - a route whose policy.retry is not never needs a dedup proof: an
//     idempotency key with a retention, or an authoritative search. On a
//     route with a status section the reconciler asks the status query, and
//     its "not found" alone proves nothing, so only a key will do.
func (c *compiler) checkDedup(a *Adapter, cfg RouteConfig, policy events.Policy, policyOK bool) {
	if cfg.Search != nil && a.search != nil && !c.skip("search.fields") {
		f := a.search.fields
		if cfg.Search.Fields.AuthorID == "" {
			c.report("search.fields.author_id", "is required: candidates are matched by author; map the listed item's author id (e.g. $.author_id or $.user.id)")
		}
		// recordSpec refused a parent_id that neither reads the item nor
		// is the {{parent}} of a parent-scoped listing.
		parentOK := !a.write.writesTakeParent() || (f.parentID != nil && !c.reported["search.fields.parent_id"])
		a.caps.SearchAuthoritative = readsItem(f.authorID) && parentOK
	}
	if cfg.Search != nil && a.search != nil && cfg.Search.Fields.CreatedAt == "" && !c.skip("search.fields") && !c.reported["search.fields.created_at"] {
		switch {
		case cfg.Correlation == nil:
			// Whatever the retry policy: a look-alike confirmed is an
			// effect settle did not make named as the intent's (and,
			// when the route may retry, the write never made).
			alt := "or declare a correlation marker"
			if policyOK && policy.Retry != events.PolicyNever {
				alt = "or declare a correlation marker and set policy.retry: never"
			}
			c.report("search.fields.created_at", "is required: without the creation time (or a correlation marker) settle cannot tell a look-alike "+
				"made by hand before the intent, inside the search window, from its own write, and would confirm it; "+
				"map the listed item's creation time (created_at: $.created_at), "+alt)
		case policyOK && policy.Retry != events.PolicyNever:
			c.report("search.fields.created_at", "is required because policy.retry is "+policy.Retry+": without the creation time settle cannot tell a look-alike "+
				"made (by hand, before the intent) from its own write and would confirm it, so the write would never happen; "+
				"map the listed item's creation time (created_at: $.created_at), or set policy.retry: never")
		case cfg.Search.WindowFilter == "":
			c.warn("search.fields.created_at", "is not mapped: settle cannot tell a look-alike created before the write from ours, nor keep the search to the window; map the item's creation time ($.created_at)")
		}
	}
	if !policyOK || policy.Retry == events.PolicyNever || c.skipUnder("capabilities") {
		return
	}
	if cfg.Capabilities.IdempotencyKey && cfg.Capabilities.KeyRetention > 0 {
		// The API deduplicates a retry by the key inside its retention:
		// where the key is the only proof, a retry must fit in it
		// (adapter.ValidateRoute, which serve applies too).
		if !(a.caps.Search && a.caps.SearchAuthoritative) {
			if field, reason := adapter.RetentionShortfall(policy, a.caps); field != "" {
				c.report(field, reason+"; declare the API's real key retention, or shorten policy.attempt_deadline or policy.retention_margin, or set policy.retry: never")
			}
		}
		return
	}
	const never = "; or set policy.retry: never (a lost write is then handed to a human)"
	switch {
	case cfg.Status != nil:
		c.report("policy.retry", "is "+policy.Retry+", but a status query's \"not found\" alone never proves that a write did not land: "+
			"add capabilities.idempotency_key with key_retention (and write.idempotency_header)"+never)
	case cfg.Search != nil:
		if a.search == nil || c.skipUnder("search") || c.reported["search.fields.author_id"] || c.reported["search.fields.parent_id"] {
			return // the search is broken; that problem is already reported
		}
		if !a.caps.SearchAuthoritative {
			c.report("search.fields.parent_id", "is required because policy.retry is "+policy.Retry+" and the route's writes take a parent ({{parent}}): "+
				"without it a search that finds nothing cannot prove that no write landed; map the listed item's parent ($.parent_id), "+
				"or add capabilities.idempotency_key with key_retention"+never)
		}
	default:
		c.report("policy.retry", "is "+policy.Retry+", but the route has no dedup proof: add a search section (author_id and parent_id mapped from the listed item) "+
			"or capabilities.idempotency_key with key_retention (and write.idempotency_header)"+never)
	}
}
