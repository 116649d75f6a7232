package httproute

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
)

// Search lists q.Account's objects in [q.From, q.To] (a zero bound is left
// out; with window_filter updated_at the upper bound is never sent and
// items created outside the window are dropped unless a correlation marker
// names an intent in them), page by page as search declares, for at most
// max_pages pages; items are deduplicated by external id. A listing ends
// only where its end is proven (an empty cursor, no next link, an empty
// page or the declared total), never at a short page; a search without
// pagination reads one page, and one whose answer links a next page is
// incomplete. Needing more than max_pages is a *adapter.CallError (Unknown,
// listing_incomplete) marked adapter.ErrListingIncomplete, returned with
// the records read so far. A page without its items, an item that cannot
// be mapped and a next link leaving base_url's origin are errors, never a
// shorter list. Without a search section it returns nil, nil.
func (a *Adapter) Search(ctx context.Context, q adapter.SearchQuery) (scrubbed []adapter.Record, err error) {
	defer func() { scrubbed, err = a.scrub.Records(scrubbed), a.scrub.Error(err) }()
	if a.search == nil {
		return nil, nil
	}
	recs, _, err := a.searchPages(ctx, q, 0, nil)
	if err != nil && !errors.Is(err, adapter.ErrListingIncomplete) {
		return nil, err
	}
	return recs, err
}

// pageSeen is what one search page was (for Inspect).
type pageSeen struct {
	url    string
	status int
	items  int
}

// searchPages lists like Search. limit > 0 reads at most limit pages and
// reports whether more were left (more); limit 0 reads up to max_pages,
// and more would be an error. seen, if set, is told of every page.
func (a *Adapter) searchPages(ctx context.Context, q adapter.SearchQuery, limit int, seen func(pageSeen)) (recs []adapter.Record, more bool, err error) {
	ss := a.search
	if q.Account == "" {
		return nil, false, a.errorf("search: the account is required")
	}
	if !q.From.IsZero() && !q.To.IsZero() && q.To.Before(q.From) {
		return nil, false, a.errorf("search: the window ends before it starts")
	}
	base, err := a.readScope("search", ss.needs, map[string]string{varAccount: q.Account})
	if err != nil {
		return nil, false, err
	}
	l := &listing{a: a, q: q, base: base, to: q.To, ids: map[string]bool{}}
	if ss.window == windowUpdated {
		l.to = time.Time{} // an object made in the window may have changed after it
	}
	for page := 1; ; page++ {
		if limit > 0 && page > limit {
			return l.out, true, nil
		}
		if page > ss.maxPages {
			// What was read is returned with the error: it can prove a
			// write present, never absent (adapter.ErrListingIncomplete).
			return l.out, false, errors.Mark(a.errorf("search: more than %d pages in one window (search.max_pages; narrow the window or raise it): %w", ss.maxPages, &adapter.CallError{Class: adapter.Unknown, Code: CodeListingIncomplete,
				Message: fmt.Sprintf("the listing needs more than %d pages (search.max_pages) in one window; it is incomplete, so it proves nothing absent", ss.maxPages)}), adapter.ErrListingIncomplete)
		}
		pg, err := l.fetch(ctx, page)
		if err != nil {
			return nil, false, err
		}
		if seen != nil {
			seen(pageSeen{url: pg.url, status: pg.resp.StatusCode, items: len(pg.items)})
		}
		if !pg.listed {
			return nil, false, a.errorf("search page %d: %w", page, &adapter.CallError{Class: adapter.Unknown, Code: "response_unparseable",
				StatusCode: pg.resp.StatusCode, Message: "the search response has no " + ss.items.src + " list"})
		}
		if err := l.keep(page, pg); err != nil {
			return nil, false, err
		}
		end, err := l.advance(page, pg)
		switch {
		case err != nil && !errors.Is(err, adapter.ErrListingIncomplete):
			return nil, false, err
		case end || err != nil:
			return l.out, false, err
		}
	}
}

// listing is one search's progress through its pages.
type listing struct {
	a      *Adapter
	q      adapter.SearchQuery
	base   *scope
	to     time.Time // the window's upper bound as sent
	out    []adapter.Record
	ids    map[string]bool // external ids listed so far
	read   int             // items listed so far, for search.total
	waited time.Duration   // waited inside this listing (rate_limit.max_wait)
	cursor string
	next   string // the next page's URL, from a Link header
}

// searchPage is one page of a listing as read.
type searchPage struct {
	url    string
	resp   *adapter.Response
	doc    any
	items  []any
	listed bool // the page has its items list
}

// fetch reads page n of the listing.
func (l *listing) fetch(ctx context.Context, n int) (searchPage, error) {
	a, ss := l.a, l.a.search
	s := &scope{vars: maps.Clone(l.base.vars), payload: l.base.payload, hasPay: l.base.hasPay,
		times: map[string]time.Time{varFrom: l.q.From, varTo: l.to}}
	s.vars[varCursor] = l.cursor
	s.vars[varPageSize] = strconv.Itoa(ss.pageSize)
	s.vars[varPage] = strconv.Itoa(ss.firstPage + n - 1)
	// The next offset is what was received, not page_size: an API
	// that caps pages silently would otherwise skip items.
	s.vars[varOffset] = strconv.Itoa(l.read)
	r := readReq{method: http.MethodGet, url: l.next}
	if l.next == "" {
		var ok bool
		var err error
		if r, ok, err = a.request(ss.url, s, false); err != nil || !ok {
			return searchPage{}, a.errorf("search page %d: the search URL cannot be built", n)
		}
	}
	pg := searchPage{url: r.url + r.tool}
	resp, err := a.getWaiting(ctx, r, &l.waited)
	if err != nil {
		return searchPage{}, a.errorf("search page %d: %w", n, err)
	}
	pg.resp = resp
	if pg.doc, err = decodeJSON(resp.Body); err != nil {
		return searchPage{}, a.errorf("search page %d: %w", n, adapter.Unparseable(resp.StatusCode, "a search"))
	}
	v, ok := ss.items.eval(pg.doc)
	pg.items, pg.listed = v.([]any)
	pg.listed = pg.listed && ok
	return pg, nil
}

// keep maps the page's items and keeps those new to the listing and, with
// window_filter updated_at, created in the window.
func (l *listing) keep(n int, pg searchPage) error {
	a, ss, q := l.a, l.a.search, l.q
	for _, it := range pg.items {
		rec, err := a.record(it, &ss.fields, l.base, true)
		if err != nil || rec.ExternalID == "" {
			return a.errorf("search page %d: %w", n, adapter.Unparseable(pg.resp.StatusCode, "a search"))
		}
		if l.ids[rec.ExternalID] {
			continue
		}
		l.ids[rec.ExternalID] = true
		// An item a marker names is kept whatever its creation time
		// says (the API's clock may be off): the reconciler tells
		// this intent's from another's by the marker.
		if ss.window == windowUpdated && rec.CorrelationID == "" && !rec.CreatedAt.IsZero() &&
			((!q.From.IsZero() && rec.CreatedAt.Before(q.From)) || (!q.To.IsZero() && rec.CreatedAt.After(q.To))) {
			continue
		}
		l.out = append(l.out, rec)
	}
	return nil
}

// advance moves the listing past page n as its pagination says; end: the
// page was the last. An error marked adapter.ErrListingIncomplete leaves
// what was read valid.
func (l *listing) advance(n int, pg searchPage) (end bool, err error) {
	a, ss := l.a, l.a.search
	switch ss.mode {
	case pageCursor:
		v, ok := ss.nextCursor.eval(pg.doc)
		next := ""
		if ok {
			next = text(v)
		}
		if next == "" {
			return true, nil
		}
		if next == l.cursor {
			return false, a.errorf("search page %d: the cursor did not advance", n)
		}
		l.cursor = next
	case pageLink:
		next := nextLink(pg.resp.Header)
		if next == "" {
			return true, nil
		}
		if ref, err := url.Parse(pg.url); err == nil {
			if u, err := ref.Parse(next); err == nil {
				next = u.String()
			}
		}
		if !a.sameOrigin(next) {
			return false, a.errorf("search page %d: %w", n, adapter.InvalidRequest("invalid_request", "the Link header's next page leaves base_url's origin"))
		}
		if next == pg.url {
			return false, a.errorf("search page %d: the next link did not advance", n)
		}
		l.next = next
	case pageNumber, pageOffset:
		// A short page proves nothing (the API may cap the page size
		// silently): only an empty page or the declared total ends
		// the listing.
		l.read += len(pg.items)
		if len(pg.items) == 0 {
			return true, nil
		}
		if ss.total != nil {
			if v, ok := ss.total.eval(pg.doc); ok {
				if total, err := strconv.ParseInt(text(v), 10, 64); err == nil && total >= 0 && int64(l.read) >= total {
					return true, nil
				}
			}
		}
	default:
		// One page, unless the API says there is another (a Link
		// rel="next", as GitHub pages every listing): the page is
		// then not the whole listing, and proves nothing absent.
		if nextLink(pg.resp.Header) != "" {
			return true, errors.Mark(a.errorf("search page %d: %w", n, &adapter.CallError{Class: adapter.Unknown, Code: CodeListingIncomplete,
				Message: "the API links a next page, and the route declares no pagination: the listing is incomplete, so it proves nothing absent"}), adapter.ErrListingIncomplete)
		}
		return true, nil
	}
	return false, nil
}

// nextLink is the target of the Link header's rel="next" ("" when none),
// as RFC 8288 writes it: <URI>; rel="next", <URI>; rel="last".
func nextLink(h http.Header) string {
	for _, line := range h.Values("Link") {
		for _, link := range splitLinks(line) {
			target, params, ok := strings.Cut(link, ";")
			target = strings.TrimSpace(target)
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			for _, p := range strings.Split(params, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
				if !strings.EqualFold(strings.TrimSpace(k), "rel") {
					continue
				}
				for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(v), `"`)) {
					if strings.EqualFold(rel, "next") {
						return target[1 : len(target)-1]
					}
				}
			}
		}
	}
	return ""
}

// splitLinks splits a Link header at the commas between links (not those
// inside <...> or quotes).
func splitLinks(line string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '"':
			quoted = !quoted
		case c == '<' && !quoted:
			depth++
		case c == '>' && !quoted && depth > 0:
			depth--
		case c == ',' && !quoted && depth == 0:
			out = append(out, line[start:i])
			start = i + 1
		}
	}
	return append(out, line[start:])
}
