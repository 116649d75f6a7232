package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter/httproute"
)

// routesProbe: settle routes probe FILE --route NAME [--external-id ID].
// It makes a route's reads once against the live API and prints what
// each declared field resolved to. It never writes.
func (m *Main) routesProbe(ctx context.Context, args []string) error {
	fs := m.flagSet("routes probe", "FILE [--route NAME] [--external-id ID] [flags]")
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
	if err := m.help(fs, args); err != nil {
		return err
	}
	file := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := m.parse(fs, args); err != nil {
		return err
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
	defer func() { _ = a.Close() }() // an MCP route's upstream process
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
	in.WriteText(m.Stdout, a)
	if in.Tools != nil && in.Tools.Err != "" || in.Identity != nil && in.Identity.Err != "" || in.Search != nil && in.Search.Err != "" || in.Readback != nil && in.Readback.Err != "" {
		return errors.Errorf("routes probe: a read of route %s failed (see above)", in.Route)
	}
	return nil
}
