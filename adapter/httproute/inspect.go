package httproute

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// InspectOptions says what Inspect reads.
type InspectOptions struct {
	// Window is how far back the search looks, ending now (default 1h).
	Window time.Duration
	// Account lists this account's objects (default: the credential's
	// identity).
	Account string
	// Parent, RequestID and Payload scope the reads of a route whose read
	// templates use the intent's values (as adapter.ForIntent would).
	Parent    string
	RequestID string
	Payload   []byte
	// ExternalID is read back (default: the first listed object).
	ExternalID string
	// Items is how many listed objects are shown (default 5).
	Items int
}

// Inspection is what a route's reads resolved to against the live API.
// URLs are shown relative to base_url ({{base}}/...), so no value from
// the environment appears; nothing holds a header.
type Inspection struct {
	Route    string
	Identity *InspectedIdentity
	Search   *InspectedSearch
	Readback *InspectedReadback
	// Tools, on an MCP route: the upstream's tools/list and the tools the
	// route names.
	Tools *InspectedTools
}

// InspectedIdentity is the identity read.
type InspectedIdentity struct {
	ID  string
	Err string
}

// InspectedSearch is one page of the search.
type InspectedSearch struct {
	Account  string
	From, To time.Time
	URL      string // the first page's URL, relative to base_url
	Status   int
	Items    int  // objects on the page
	More     bool // a next page exists
	Records  []adapter.Record
	Err      string
	// PageSize is the page size the route asks for (0: it names none);
	// PageCap, when not 0, is a silent cap the API showed: a page with
	// fewer items than asked that was not the last.
	PageSize int
	PageCap  int
	// Missing are the probe flags the reads need and did not get (a
	// search by the intent's parent needs --parent).
	Missing []string
}

// InspectedReadback is one object read back, and its live URL probed
// without credentials.
type InspectedReadback struct {
	ExternalID string
	Record     *adapter.Record
	ProbeURL   string
	ProbeCode  int
	Err        string
	Missing    []string // as InspectedSearch.Missing
}

// missing are the probe flags a read that needs the intent values needs
// still lacks under opts.
func missing(needs []string, opts InspectOptions, account string) []string {
	var out []string
	for _, v := range needs {
		// request_id, intent_id and idempotency_key derive from --request-id.
		f, given := "--request-id ID", opts.RequestID != ""
		switch v {
		case varParent:
			f, given = "--parent PARENT", opts.Parent != ""
		case varAccount:
			f, given = "--account ACCOUNT", account != ""
		case varPayload:
			f, given = "--payload JSON", len(opts.Payload) > 0
		}
		if !given && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

func missingErr(what string, flags []string) string {
	return "the " + what + " uses the intent's values (" + strings.Join(flags, ", ") + "): pass " + strings.Join(flags, " and ") + " to read as an intent would"
}

// Inspect makes the route's reads once against the live API, read-only:
// the identity, one page of the search over the last opts.Window, one
// object read back and its live URL probed. It never writes. A failed
// read is reported in its part, not returned: err is for options that
// cannot be used.
func (a *Adapter) Inspect(ctx context.Context, opts InspectOptions) (*Inspection, error) {
	if opts.Window <= 0 {
		opts.Window = time.Hour
	}
	if opts.Items <= 0 {
		opts.Items = 5
	}
	out := &Inspection{Route: a.name}
	if a.up != nil {
		out.Tools = a.inspectTools(ctx)
	}
	account := opts.Account
	if a.identity != nil {
		id, err := a.Identity(ctx)
		out.Identity = &InspectedIdentity{ID: id}
		if err != nil {
			out.Identity.Err = a.safe(err)
		}
		if account == "" {
			account = id
		}
	}
	r, err := a.inspectScope(opts, account)
	if err != nil {
		return nil, err
	}
	if a.search != nil {
		out.Search = a.inspectSearch(ctx, r, opts, account)
	}
	extID := opts.ExternalID
	if extID == "" && out.Search != nil && len(out.Search.Records) > 0 {
		extID = out.Search.Records[0].ExternalID
	}
	if a.readback != nil && extID != "" {
		out.Readback = a.inspectReadback(ctx, r, opts, account, extID)
	}
	return out, nil
}

// inspectScope is the adapter of the reads of the intent the options
// name (a), or a itself when they name none.
func (a *Adapter) inspectScope(opts InspectOptions, account string) (*Adapter, error) {
	if opts.Parent == "" && opts.RequestID == "" && len(opts.Payload) == 0 && account == "" {
		return a, nil
	}
	reqID := opts.RequestID
	if reqID == "" {
		reqID = "settle-probe"
	}
	intentID := events.ScopedIntentID("default", a.name, account, reqID)
	var pl []byte
	if len(opts.Payload) > 0 {
		n, err := a.NormalizePayload(opts.Payload)
		if err != nil {
			return nil, err
		}
		pl = n
	}
	return a.ForIntent(adapter.ReadScope{IntentID: intentID, RequestID: reqID, IdempotencyKey: events.IdempotencyKey(intentID),
		Account: account, ParentExternalID: opts.Parent, Payload: pl}).(*Adapter), nil
}

// inspectSearch reads the first page of the search (two with page or
// offset pagination) over the last opts.Window, with r.
func (a *Adapter) inspectSearch(ctx context.Context, r *Adapter, opts InspectOptions, account string) *InspectedSearch {
	now := a.now()
	s := &InspectedSearch{Account: account, From: now.Add(-opts.Window), To: now, PageSize: a.search.pageSize}
	s.Missing = missing(a.search.needs, opts, account)
	switch {
	case account == "":
		s.Err = "no account: the route has no identity section; pass --account ACCOUNT"
		return s
	case len(s.Missing) > 0:
		s.Err = missingErr("search", s.Missing)
		return s
	}
	// Page and offset pagination read a second page: a short first
	// page proves nothing, and a second one that is not empty shows
	// a silent cap.
	limit := 1
	if a.search.mode == pageNumber || a.search.mode == pageOffset {
		limit = 2
	}
	var pages []pageSeen
	recs, more, err := r.searchPages(ctx, adapter.SearchQuery{Account: account, From: s.From, To: s.To}, limit, func(p pageSeen) {
		pages = append(pages, p)
		if s.URL == "" {
			s.URL, s.Status, s.Items = a.relative(p.url), p.status, p.items
		}
	})
	s.More = more || len(pages) > 1 && pages[1].items > 0
	if len(pages) > 0 && s.PageSize > 0 && pages[0].items < s.PageSize && s.More {
		s.PageCap = pages[0].items
	}
	if err != nil {
		s.Err = a.safe(err)
	}
	if len(recs) > opts.Items {
		recs = recs[:opts.Items]
	}
	for _, rec := range recs {
		s.Records = append(s.Records, a.masked(rec))
	}
	return s
}

// inspectReadback reads extID back with r and probes its live URL.
func (a *Adapter) inspectReadback(ctx context.Context, r *Adapter, opts InspectOptions, account, extID string) *InspectedReadback {
	rb := &InspectedReadback{ExternalID: extID, Missing: missing(a.readback.needs, opts, account)}
	if len(rb.Missing) > 0 {
		rb.Err = missingErr("readback", rb.Missing)
		return rb
	}
	rec, err := r.Get(ctx, extID)
	if err != nil {
		rb.Err = a.safe(err)
		return rb
	}
	rec = a.masked(rec)
	rb.Record = &rec
	if rec.LiveURL != "" {
		rb.ProbeURL = rec.LiveURL
		code, err := r.Probe(ctx, rec.LiveURL)
		rb.ProbeCode = code
		if err != nil {
			rb.Err = "probe: " + a.safe(err)
		}
	}
	return rb
}

// masked replaces every route header value a record's text fields hold
// (an API that echoes its credentials) with [redacted]: the probe prints
// them.
func (a *Adapter) masked(r adapter.Record) adapter.Record {
	for _, v := range a.credentials() {
		for _, f := range []*string{&r.ExternalID, &r.LiveURL, &r.AuthorID, &r.ParentID, &r.Visibility, &r.CorrelationID} {
			*f = strings.ReplaceAll(*f, v, "[redacted]")
		}
		if strings.Contains(string(r.Payload), v) {
			r.Payload = []byte(strings.ReplaceAll(string(r.Payload), v, "[redacted]"))
		}
	}
	return r
}

// relative shows a URL of the API relative to base_url.
func (a *Adapter) relative(u string) string {
	if a.up != nil {
		return "tool " + u
	}
	if rest, ok := strings.CutPrefix(u, a.base); ok {
		return "{{base}}" + rest
	}
	if rest, ok := strings.CutPrefix(u, a.origin); ok {
		return "{{origin}}" + rest
	}
	return "(another origin)"
}

// safe renders a read error without anything but its route, class, code
// and status: the adapter's errors never hold a header, a URL or a body,
// and base_url is masked in case it carried a secret in its path.
func (a *Adapter) safe(err error) string {
	s := err.Error()
	if a.base != "" {
		s = strings.ReplaceAll(s, a.base, "{{base}}")
	}
	for _, v := range a.credentials() {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	if s == adapter.ErrNotFound.Error() {
		return "not found (" + http.StatusText(http.StatusNotFound) + ")"
	}
	return s
}

// credentials are the route's header values and their words of 8 bytes
// or more ("Bearer <token>" gives the token too), longest first.
func (a *Adapter) credentials() []string {
	var out []string
	for _, h := range a.headers {
		v := string(h.value)
		if v == "" {
			continue
		}
		out = append(out, v)
		for _, w := range strings.Fields(v) {
			if len(w) >= 8 && w != v {
				out = append(out, w)
			}
		}
	}
	slices.SortFunc(out, func(x, y string) int { return len(y) - len(x) })
	return out
}
