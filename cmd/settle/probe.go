package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
)

// routesProbe: settle routes probe FILE --route NAME [--external-id ID].
// It makes a route's reads once against the live API and prints what
// each declared field resolved to. It never writes.
func (m *Main) routesProbe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("routes probe", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	route := fs.String("route", "", "the route `NAME` to probe (default: the file's only route)")
	extID := fs.String("external-id", "", "read back the object with this external `ID` (default: the first one listed)")
	account := fs.String("account", "", "list this `ACCOUNT`'s objects (default: the credential's identity)")
	parent := fs.String("parent", "", "the `PARENT` of a route whose reads are scoped by it")
	requestID := fs.String("request-id", "", "the request `ID` of a route whose reads use the intent's ids")
	payload := fs.String("payload", "", "the intent's payload (`JSON`) for a route whose reads use payload fields")
	window := fs.Duration("window", time.Hour, "search the last `DURATION`")
	items := fs.Int("items", 5, "show at most `N` listed objects")
	timeout := fs.Duration("timeout", time.Minute, "give up after `DURATION`")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: settle routes probe FILE [--route NAME] [--external-id ID] [flags]\n\n"+
			"Makes the route's reads once against the live API, read-only: resolves the credential's\n"+
			"identity, lists one search page for a recent window, reads one object back and probes its\n"+
			"live URL, and prints what each declared field resolved to. It never writes. Secrets come\n"+
			"from the environment, as for serve, and are never printed.\n\n")
		fs.PrintDefaults()
	}
	file := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 || file == "" {
		fs.Usage()
		return errUsage
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return errors.Errorf("routes probe: %w", err)
	}
	cfgs, err := httproute.Parse(data, os.LookupEnv)
	if err != nil {
		for _, e := range httproute.Check(data, os.LookupEnv) {
			fmt.Fprintf(m.Stderr, "%s: %v\n", file, e)
		}
		return errors.Errorf("routes probe: %s is not valid (settle routes check %s)", file, file)
	}
	var cfg *httproute.RouteConfig
	var names []string
	for i := range cfgs {
		names = append(names, cfgs[i].Name)
		if cfgs[i].Name == *route || (*route == "" && len(cfgs) == 1) {
			cfg = &cfgs[i]
		}
	}
	if cfg == nil {
		return errors.Errorf("routes probe: --route: %q is not a route of %s (routes: %s)", *route, file, strings.Join(names, ", "))
	}
	a, err := httproute.New(*cfg)
	if err != nil {
		return errors.Errorf("routes probe: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	opts := httproute.InspectOptions{Window: *window, Account: *account, Parent: *parent, RequestID: *requestID, ExternalID: *extID, Items: *items}
	if *payload != "" {
		opts.Payload = []byte(*payload)
	}
	in, err := a.Inspect(ctx, opts)
	if err != nil {
		return errors.Errorf("routes probe: %w", err)
	}
	printInspection(m.Stdout, a, in)
	if in.Identity != nil && in.Identity.Err != "" || in.Search != nil && in.Search.Err != "" || in.Readback != nil && in.Readback.Err != "" {
		return errors.Errorf("routes probe: a read of route %s failed (see above)", in.Route)
	}
	return nil
}

func printInspection(out io.Writer, a *httproute.Adapter, in *httproute.Inspection) {
	c := a.Capabilities()
	var caps []string
	for name, on := range map[string]bool{"idempotency_key": c.IdempotencyKey, "status_query": c.StatusQuery, "search": c.Search,
		"search_authoritative": c.SearchAuthoritative, "correlation": c.Correlation} {
		if on {
			caps = append(caps, name)
		}
	}
	slices.Sort(caps)
	fmt.Fprintf(out, "route %s (read-only probe; nothing is written)\n", in.Route)
	fmt.Fprintf(out, "  capabilities: %s\n", strings.Join(caps, ", "))
	fmt.Fprintf(out, "  readback checks: %s\n", strings.Join(a.ReadbackChecks(), ", "))
	if in.Identity != nil {
		if in.Identity.Err != "" {
			fmt.Fprintf(out, "identity: FAILED: %s\n", in.Identity.Err)
		} else {
			fmt.Fprintf(out, "identity: %s (intents of this route must use it as their account)\n", in.Identity.ID)
		}
	}
	if s := in.Search; s != nil {
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
		}
	}
	if rb := in.Readback; rb != nil {
		fmt.Fprintf(out, "readback: %s\n", rb.ExternalID)
		if rb.Record != nil {
			printRecord(out, *rb.Record, in.Identity)
		}
		if rb.ProbeURL != "" && rb.ProbeCode != 0 {
			fmt.Fprintf(out, "    live URL without credentials: HTTP %d\n", rb.ProbeCode)
		}
		if rb.Err != "" {
			fmt.Fprintf(out, "  FAILED: %s\n", rb.Err)
		}
	}
}

func printRecord(out io.Writer, r adapter.Record, id *httproute.InspectedIdentity) {
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
