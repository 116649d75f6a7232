package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/internal/apiclient"
	"github.com/settle-dev/settle/internal/intenttext"
)

// clientFlags are the flags of every command over the API: its URL and
// the variable holding the token.
func clientFlags(fs *flag.FlagSet) (*string, *string) {
	api := fs.String("api", cmp.Or(os.Getenv("SETTLE_API"), "http://127.0.0.1:8080"), "settle API `URL` (env SETTLE_API)")
	token := fs.String("token-env", "SETTLE_TOKEN", "environment `VARIABLE` holding the bearer token (never a flag: flags show in ps)")
	return api, token
}

const (
	intentsListUsage = "[--state S] [--route R] [--account A] [--limit N] [--after CURSOR] [--json]"
	intentsShowUsage = "ID [--json]"
)

// intents: settle intents list|show
func (m *Main) intents(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "show") {
		return m.groupUsage(args, "usage: settle intents list "+intentsListUsage+"\n       settle intents show "+intentsShowUsage)
	}
	sub, rest := args[0], args[1:]
	fs := m.flagSet("intents "+sub, map[bool]string{true: intentsShowUsage, false: intentsListUsage}[sub == "show"])
	apiURL, tokenEnv := clientFlags(fs)
	asJSON := fs.Bool("json", false, "print the API's JSON, for scripts")
	var state, route, account, after *string
	var limit *int
	if sub == "list" {
		state = fs.String("state", "", "only this `state`")
		route = fs.String("route", "", "only this `route`")
		account = fs.String("account", "", "only this `account`")
		limit = fs.Int("limit", 50, "page size")
		after = fs.String("after", "", "page `cursor` from a previous list")
	}
	id, c, err := m.clientArgs(fs, sub, rest, apiURL, tokenEnv)
	if err != nil {
		return err
	}
	if sub == "show" {
		out, err := c.Do(ctx, "GET", "/v1/intents/"+url.PathEscape(id), nil)
		if err != nil {
			return err
		}
		if *asJSON {
			return m.printRaw(out)
		}
		return intenttext.Show(m.Stdout, out)
	}
	q := url.Values{}
	for k, v := range map[string]string{"state": *state, "route": *route, "account": *account, "after": *after} {
		if v != "" {
			q.Set(k, v)
		}
	}
	q.Set("limit", fmt.Sprint(*limit))
	out, err := c.Do(ctx, "GET", "/v1/intents?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printRaw(out)
	}
	return intenttext.List(m.Stdout, out, func(id string) string {
		d, err := c.Do(ctx, "GET", "/v1/intents/"+url.PathEscape(id), nil)
		if err != nil {
			return ""
		}
		return intenttext.RejectionCode(d)
	})
}

// clientArgs parses the arguments of a command over the API (its ID
// first, positional) and returns the ID and the client of --api and
// --token-env.
func (m *Main) clientArgs(fs *flag.FlagSet, sub string, args []string, apiURL, tokenEnv *string) (string, *apiclient.Client, error) {
	id, err := m.positional(fs, sub, &args)
	if err != nil {
		return "", nil, err
	}
	if err := m.parse(fs, args); err != nil {
		return "", nil, err
	}
	c, err := apiclient.New(*apiURL, *tokenEnv)
	if err != nil {
		return "", nil, err
	}
	return id, c, nil
}

// positional takes the ID that command sub needs first ("intents show
// ID", "approve ID"), after a request for help was answered. "" for a
// command without one.
func (m *Main) positional(fs *flag.FlagSet, sub string, rest *[]string) (string, error) {
	if err := m.help(fs, *rest); err != nil {
		return "", err
	}
	if sub == "list" {
		return "", nil
	}
	if len(*rest) == 0 || (*rest)[0] == "" || (*rest)[0][0] == '-' {
		fmt.Fprintf(m.Stderr, "settle %s: the intent ID comes first\n", fs.Name())
		fs.Usage()
		return "", errUsage
	}
	id := (*rest)[0]
	*rest = (*rest)[1:]
	return id, nil
}

// operate: settle approve|resolve|abandon ID ...
func (m *Main) operate(ctx context.Context, verb string, args []string) error {
	synopsis := "ID --reason WHY [--operator NAME]"
	if verb == "resolve" {
		synopsis = "ID --resolution confirmed|not_executed|abandoned --reason WHY [--external-id X --live-url U]"
	}
	fs := m.flagSet(verb, synopsis)
	apiURL, tokenEnv := clientFlags(fs)
	operator := fs.String("operator", "", "operator `name` (dev mode; with a token the token's name is recorded)")
	reason := fs.String("reason", "", "why (recorded on the log)")
	var resolution, extID, liveURL *string
	if verb == "resolve" {
		resolution = fs.String("resolution", "", "confirmed | not_executed | abandoned")
		extID = fs.String("external-id", "", "the external object (resolution confirmed)")
		liveURL = fs.String("live-url", "", "its live `URL` (resolution confirmed)")
	}
	asJSON := fs.Bool("json", false, "print the API's JSON")
	id, c, err := m.clientArgs(fs, verb, args, apiURL, tokenEnv)
	if err != nil {
		return err
	}
	body := map[string]string{"operator": *operator, "reason": *reason}
	if verb == "resolve" {
		body["resolution"] = *resolution
		for k, v := range map[string]string{"external_id": *extID, "live_url": *liveURL} {
			if v != "" {
				body[k] = v
			}
		}
	}
	out, err := c.Do(ctx, "POST", "/v1/intents/"+url.PathEscape(id)+"/"+verb, body)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printRaw(out)
	}
	var d map[string]any
	_ = json.Unmarshal(out, &d)
	fmt.Fprintf(m.Stdout, "%s: %s → %v\n", verb, id, intenttext.Str(d["state"]))
	return nil
}

// routes: settle routes check [--offline] FILE... | settle routes probe FILE ...
func (m *Main) routes(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "probe" {
		return m.routesProbe(ctx, args[1:])
	}
	if len(args) == 0 || args[0] != "check" {
		return m.groupUsage(args, "usage: settle routes check [--offline] FILE... | settle routes probe FILE [--route NAME] [--external-id ID]")
	}
	fs := m.flagSet("routes check", "[--offline] FILE...")
	offline := fs.Bool("offline", false, "check with placeholder secrets: no environment variable is needed (for CI)")
	if err := m.parse(fs, args[1:]); err != nil {
		return err
	}
	files := fs.Args()
	if len(files) == 0 {
		fmt.Fprintln(m.Stderr, "settle routes check: name at least one route FILE")
		fs.Usage()
		return errUsage
	}
	failed := 0
	for _, file := range files {
		if err := m.routesCheck(file, *offline); err != nil {
			fmt.Fprintln(m.Stderr, err)
			failed++
		}
	}
	if failed > 0 {
		return errors.Errorf("routes check: %d of %d file(s) have problems", failed, len(files))
	}
	return nil
}

// routesCheck checks one route file: every problem and warning, naming
// route and field. offline: ${env:NAME} stands for a placeholder (no
// secret is needed).
func (m *Main) routesCheck(file string, offline bool) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return errors.Errorf("routes check: %w", err)
	}
	var errs, warnings []error
	if offline {
		errs, warnings = httproute.LintOffline(data)
	} else {
		errs, warnings = httproute.Lint(data, os.LookupEnv)
	}
	for _, w := range warnings {
		fmt.Fprintf(m.Stdout, "%s: warning: %v\n", file, w)
	}
	for _, e := range errs {
		fmt.Fprintf(m.Stderr, "%s: %v\n", file, e)
	}
	if len(errs) > 0 {
		return errors.Errorf("routes check: %d problem(s) in %s", len(errs), file)
	}
	how := ""
	if offline {
		how = " (offline: environment values not checked)"
	}
	fmt.Fprintf(m.Stdout, "%s: %d route(s) OK%s\n", file, len(httproute.RouteNames(data)), how)
	for _, r := range httproute.Risks(data) {
		for _, risk := range r.Risks {
			fmt.Fprintf(m.Stdout, "%s: route %s: risk: %s\n", file, r.Route, risk)
		}
	}
	return nil
}
