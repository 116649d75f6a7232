package httproute

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
)

// getWaiting GETs u for a read (a listing's page, a readback, a status
// query) and classifies its status (readStatus). When the API refuses it
// for its rate limit and asks for a wait that, with what this read has
// waited already, stays within rate_limit.max_wait, it waits and asks
// again (a refused read did nothing); otherwise the failure carries the
// wait.
func (a *Adapter) getWaiting(ctx context.Context, r readReq, waited *time.Duration) (*adapter.Response, error) {
	for {
		resp, err := a.send(ctx, r)
		if err != nil {
			return nil, err
		}
		err = a.readStatus(resp)
		var ce *adapter.CallError
		if err == nil || a.rateLimit == nil || !errors.As(err, &ce) || ce.Code != CodeRateLimited ||
			ce.RetryAfter <= 0 || *waited+ce.RetryAfter > a.rateLimit.maxWait {
			return resp, err
		}
		if err := a.sleep(ctx, ce.RetryAfter); err != nil {
			return nil, &adapter.CallError{Class: adapter.NotSent, Code: "cancelled_before_send", Retryable: true, RetryAfter: ce.RetryAfter,
				Message: "the listing was cancelled while waiting out the API's rate limit"}
		}
		*waited += ce.RetryAfter
	}
}

// read sends r and returns the item of the response: adapter.ErrNotFound
// on 404 or when item is absent. base holds the values of the read's
// expectations.
func (a *Adapter) read(ctx context.Context, r readReq, item *jpath, expect []expectation, require []jpath, base *scope, what string) (any, int, error) {
	var waited time.Duration
	resp, err := a.getWaiting(ctx, r, &waited)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return nil, resp.StatusCode, adapter.ErrNotFound
	}
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		return nil, code, a.errorf("%s: %w", what, err)
	}
	doc, err := decodeJSON(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, a.errorf("%s: %w", what, adapter.Unparseable(resp.StatusCode, "a "+what))
	}
	// expect and require hold of the whole response ({"ok": true} next to
	// the item), before the item is taken out of it.
	s := &scope{vars: base.vars, payload: base.payload, hasPay: base.hasPay, doc: doc, hasDoc: true}
	for _, p := range require {
		if v, ok := p.eval(doc); isEmpty(v, ok) {
			return nil, resp.StatusCode, a.errorf("%s: %w", what, adapter.Unparseable(resp.StatusCode, "a "+what))
		}
	}
	for _, e := range expect {
		if !e.holds(s) {
			return nil, resp.StatusCode, a.errorf("%s: %w", what, adapter.Unparseable(resp.StatusCode, "a "+what))
		}
	}
	if item != nil {
		v, ok := item.eval(doc)
		if !ok || v == nil {
			return nil, resp.StatusCode, adapter.ErrNotFound
		}
		doc = v
	}
	return doc, resp.StatusCode, nil
}

// Get reads one object back (readback.url with {{external_id}});
// adapter.ErrNotFound on 404 or an absent readback.item. With
// visibility: {probe: true} the live URL is probed without credentials:
// 200 is "public", anything else "not_public"; a failed probe, and one
// answering 5xx or 429, is an error (a failed read).
// A route without a readback section answers ErrNoReadback.
func (a *Adapter) Get(ctx context.Context, externalID string) (scrubbed adapter.Record, err error) {
	defer func() { scrubbed, err = a.scrub.Record(scrubbed), a.scrub.Error(err) }()
	rs := a.readback
	if rs == nil {
		return adapter.Record{}, ErrNoReadback
	}
	if externalID == "" {
		return adapter.Record{}, a.errorf("get: the external id is required")
	}
	base, err := a.readScope("get", rs.needs, map[string]string{varExternalID: externalID})
	if err != nil {
		return adapter.Record{}, err
	}
	r, ok, err := a.request(rs.url, base, false)
	if err != nil || !ok {
		return adapter.Record{}, a.errorf("get: the readback URL cannot be built")
	}
	doc, code, err := a.read(ctx, r, rs.item, rs.expect, rs.require, base, "get")
	if err != nil {
		return adapter.Record{}, err
	}
	rec, err := a.record(doc, &rs.fields, base, false)
	if err != nil || rec.ExternalID == "" {
		return adapter.Record{}, a.errorf("get: %w", adapter.Unparseable(code, "a get"))
	}
	if rs.fields.visProbe {
		rec.Visibility = "not_public"
		if rec.LiveURL != "" {
			code, err := a.Probe(ctx, rec.LiveURL)
			if err != nil {
				return adapter.Record{}, a.errorf("get: visibility: %w", err)
			}
			if code >= 500 || code == http.StatusTooManyRequests {
				// The page's server is in trouble: that proves nothing
				// about the object (the reconciler's url probe agrees).
				return adapter.Record{}, a.errorf("get: visibility: %w", &adapter.CallError{Class: adapter.Unknown, Code: "probe_unavailable", StatusCode: code,
					Message: "the live URL answered a server error or its rate limit, which proves nothing about the object's visibility"})
			}
			if code == http.StatusOK {
				rec.Visibility = "public"
			}
		}
	}
	return rec, nil
}

// Status looks the write up (status.url with {{request_id}},
// {{idempotency_key}} or {{intent_id}}); adapter.ErrNotFound on 404, an
// absent status.item, or an answer whose status.account is not
// q.Account. The state is mapped by status.map; code is kept for
// failed states only. A route without a status section answers
// ErrNoStatusQuery (and its Capabilities().StatusQuery is false).
func (a *Adapter) Status(ctx context.Context, q adapter.StatusQuery) (scrubbed adapter.StatusResult, err error) {
	defer func() { scrubbed, err = a.scrub.Status(scrubbed), a.scrub.Error(err) }()
	ss := a.status
	if ss == nil {
		return adapter.StatusResult{}, ErrNoStatusQuery
	}
	base, err := a.readScope("status", ss.needs, map[string]string{varRequestID: q.RequestID, varIdempotencyKey: q.IdempotencyKey, varAccount: q.Account})
	if err != nil {
		return adapter.StatusResult{}, err
	}
	r, ok, err := a.request(ss.url, base, true)
	if err != nil {
		return adapter.StatusResult{}, a.errorf("status: %s", err.Error())
	}
	if !ok {
		return adapter.StatusResult{}, a.errorf("status: the status URL cannot be built")
	}
	doc, code, err := a.read(ctx, r, ss.item, ss.expect, ss.require, base, "status")
	if err != nil {
		return adapter.StatusResult{}, err
	}
	var corrID string
	if a.corr != nil {
		corrID = a.corr.extract(doc) // and removed, before the payload is mapped
	}
	s := &scope{vars: base.vars, payload: base.payload, hasPay: base.hasPay, doc: doc, hasDoc: true}
	return a.statusResult(q, s, code, corrID)
}

// statusResult maps a status answer (s's document, its HTTP status code)
// by the status section.
func (a *Adapter) statusResult(q adapter.StatusQuery, s *scope, code int, corrID string) (adapter.StatusResult, error) {
	ss := a.status
	raw := renderText(ss.state, s)
	state := raw
	if len(ss.stateMap) > 0 {
		state = ss.stateMap[raw]
	}
	switch state {
	case adapter.StatusCompleted, adapter.StatusProcessing, adapter.StatusFailed:
	default:
		return adapter.StatusResult{}, a.errorf("status: %w", adapter.Unparseable(code, "a status query"))
	}
	acct := renderText(ss.account, s)
	if ss.account != nil && q.Account != "" && acct != q.Account {
		return adapter.StatusResult{}, adapter.ErrNotFound // another account's write with the same id
	}
	out := adapter.StatusResult{
		Account:        acct,
		State:          state,
		ExternalID:     renderText(ss.externalID, s),
		LiveURL:        ss.liveURL.render(s),
		Version:        renderText(ss.version, s),
		AppliedVersion: renderText(ss.appliedVersion, s),
		CorrelationID:  corrID,
	}
	if state == adapter.StatusFailed {
		out.Code = renderText(ss.code, s)
	}
	if err := a.statusDetails(&out, s, code); err != nil {
		return adapter.StatusResult{}, err
	}
	return out, nil
}

// statusDetails maps a status answer's partial effects, received time
// and payload into out.
func (a *Adapter) statusDetails(out *adapter.StatusResult, s *scope, code int) error {
	ss := a.status
	if v, ok := typedValue(ss.partialEffects, s); ok && v != nil {
		l, isList := v.([]any)
		if !isList {
			return a.errorf("status: %w", adapter.Unparseable(code, "a status query"))
		}
		out.PartialEffects = make([]string, 0, len(l))
		for _, x := range l {
			out.PartialEffects = append(out.PartialEffects, text(x))
		}
	}
	if ss.receivedAt != nil {
		t, ok := parseTime(typedValue(ss.receivedAt, s))
		if !ok {
			return a.errorf("status: %w", adapter.Unparseable(code, "a status query"))
		}
		out.ReceivedAt = t
	}
	// The payload is evidence: when a required field is absent it is left
	// out, so the hash check fails rather than guessing.
	if ss.payload != nil {
		if v, _, err := ss.payload.eval(s, false); err == nil {
			if m, isMap := v.(map[string]any); isMap {
				if pl, missing, err := a.schema.shape(m); err == nil && !missing {
					out.Payload = pl
				}
			}
		}
	}
	return nil
}

// Probe GETs a live URL with no header at all (no credentials: a live URL
// is public) and returns its status. Redirects are not followed: a
// redirect (to a login page, say) is reported as its 3xx.
func (a *Adapter) Probe(ctx context.Context, liveURL string) (int, error) {
	u, err := url.Parse(liveURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return 0, a.errorf("probe: the live URL is not an absolute http(s) URL")
	}
	u.User = nil // net/http would turn user info into an Authorization header
	hreq, err := adapter.NewRequest(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := adapter.Do(ctx, a.client, hreq)
	if err != nil {
		return 0, a.errorf("probe: %w", err)
	}
	return resp.StatusCode, nil
}
