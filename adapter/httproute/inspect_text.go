package httproute

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// WriteText writes what a probe of a's reads found, for a terminal
// (settle routes probe): the route's capabilities and checks, the
// credential's identity, one search page and one readback, each record
// field by field.
func (in *Inspection) WriteText(out io.Writer, a *Adapter) {
	writeRouteHeader(out, in.Route, a)
	if t := in.Tools; t != nil {
		t.writeText(out)
	}
	if in.Identity != nil {
		if in.Identity.Err != "" {
			fmt.Fprintf(out, "identity: FAILED: %s\n", in.Identity.Err)
		} else {
			fmt.Fprintf(out, "identity: %s (intents of this route must use it as their account)\n", in.Identity.ID)
		}
	}
	if s := in.Search; s != nil {
		in.writeSearch(out, a, s)
	}
	if rb := in.Readback; rb != nil {
		fmt.Fprintf(out, "readback: %s\n", rb.ExternalID)
		if rb.Record != nil {
			printRecord(out, *rb.Record, in.Identity)
			if a.readback != nil {
				writeEmptyMapped(out, &a.readback.fields, *rb.Record, "the object read back")
			}
		}
		if rb.ProbeURL != "" && rb.ProbeCode != 0 {
			fmt.Fprintf(out, "    live URL without credentials: HTTP %d\n", rb.ProbeCode)
		}
		if rb.Err != "" {
			fmt.Fprintf(out, "  FAILED: %s\n", rb.Err)
		}
	}
}

// writeRouteHeader is the probe's first lines: the route, its
// capabilities, its readback checks and a marker hint.
func writeRouteHeader(out io.Writer, route string, a *Adapter) {
	c := a.Capabilities()
	var caps []string
	for name, on := range map[string]bool{"idempotency_key": c.IdempotencyKey, "status_query": c.StatusQuery, "search": c.Search,
		"search_authoritative": c.SearchAuthoritative, "correlation": c.Correlation} {
		if on {
			caps = append(caps, name)
		}
	}
	slices.Sort(caps)
	fmt.Fprintf(out, "route %s (read-only probe; nothing is written)\n", route)
	fmt.Fprintf(out, "  capabilities: %s\n", strings.Join(caps, ", "))
	fmt.Fprintf(out, "  readback checks: %s\n", strings.Join(a.ReadbackChecks(), ", "))
	if h := a.markerHint(); h != "" {
		fmt.Fprintf(out, "  %s\n", h)
	}
}

// writeSearch is the probe's search section: the page read, a silent page
// cap, and each item with the fields the route maps that it left empty.
func (in *Inspection) writeSearch(out io.Writer, a *Adapter, s *InspectedSearch) {
	fmt.Fprintf(out, "search: account %s, %s .. %s\n", s.Account, s.From.UTC().Format(time.RFC3339), s.To.UTC().Format(time.RFC3339))
	if s.URL != "" {
		more := "last page"
		if s.More {
			more = "more pages follow (not read)"
		}
		fmt.Fprintf(out, "  GET %s -> HTTP %d, %d item(s) on page 1, %s\n", s.URL, s.Status, s.Items, more)
	}
	if s.PageCap > 0 {
		fmt.Fprintf(out, "  page cap: the API served %d item(s) on a page that was not the last, though the route asks for %d: "+
			"it caps pages silently (settle reads on to a proven end; a page_size of %d asks for no more than it serves)\n", s.PageCap, s.PageSize, s.PageCap)
	}
	if s.Err != "" {
		fmt.Fprintf(out, "  FAILED: %s\n", s.Err)
	}
	for i, r := range s.Records {
		fmt.Fprintf(out, "  item %d:\n", i+1)
		printRecord(out, r, in.Identity)
		if a.search != nil {
			writeEmptyMapped(out, &a.search.fields, r, fmt.Sprintf("item %d", i+1))
		}
	}
}

// writeText is the probe's tools section (an MCP route).
func (t *InspectedTools) writeText(out io.Writer) {
	if t.Err != "" {
		fmt.Fprintf(out, "tools: FAILED: %s\n", t.Err)
	} else {
		fmt.Fprintf(out, "tools: the upstream lists %d\n", t.Listed)
	}
	for _, x := range t.Named {
		switch {
		case t.Err != "":
		case !x.Found:
			fmt.Fprintf(out, "  %s (%s): NOT LISTED by the upstream\n", x.Name, x.Role)
		default:
			fmt.Fprintf(out, "  %s (%s, read_only_hint %t): input schema %s\n", x.Name, x.Role, x.ReadOnly, x.InputSchema)
		}
	}
}

func printRecord(out io.Writer, r adapter.Record, id *InspectedIdentity) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v == "" {
			v = "(none)"
		}
		fmt.Fprintf(w, "    %s\t%s\n", k, v)
	}
	row("external_id", r.ExternalID)
	row("live_url", r.LiveURL)
	author := r.AuthorID
	if id != nil && id.ID != "" && author != "" {
		if author == id.ID {
			author += "  (the credential's identity)"
		} else {
			author += "  (not the credential's identity)"
		}
	}
	row("author_id", author)
	row("parent_id", r.ParentID)
	if r.CreatedAt.IsZero() {
		row("created_at", "")
	} else {
		row("created_at", r.CreatedAt.UTC().Format(time.RFC3339Nano))
	}
	row("visibility", r.Visibility)
	row("correlation", r.CorrelationID)
	switch {
	case r.Partial:
		row("payload", "(not in the listing: read back)")
	case len(r.Payload) > 0:
		p := string(r.Payload)
		if len(p) > 120 {
			p = p[:117] + "..."
		}
		sum, _ := events.PayloadSHA256(r.Payload)
		row("payload", p)
		row("payload sha256", sum)
	default:
		row("payload", "")
	}
	_ = w.Flush()
}
