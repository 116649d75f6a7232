package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter/httproute"
)

// client is the CLI's side of the HTTP API.
type client struct {
	base  string
	token string
	// tokenEnv names the variable the token came from (for hints).
	tokenEnv string
	http     *http.Client
}

func clientFlags(fs *flag.FlagSet) (*string, *string) {
	def := os.Getenv("SETTLE_API")
	if def == "" {
		def = "http://127.0.0.1:8080"
	}
	api := fs.String("api", def, "settle API `URL` (env SETTLE_API)")
	token := fs.String("token-env", "SETTLE_TOKEN", "environment `VARIABLE` holding the bearer token (never a flag: flags show in ps)")
	return api, token
}

func newClient(apiURL, tokenEnv string) (*client, error) {
	u, err := url.Parse(apiURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.Errorf("--api: %q is not an http(s) URL", apiURL)
	}
	return &client{base: strings.TrimRight(apiURL, "/"), token: os.Getenv(tokenEnv), tokenEnv: tokenEnv, http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// problem is an RFC 9457 error body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
}

// hint says what the user can do about an answer of the API.
func (c *client) hint(status int, p problem) string {
	switch {
	case status == http.StatusUnauthorized:
		return "put a token of the server's --tokens file in $" + c.tokenEnv + " (or name another variable with --token-env)"
	case status == http.StatusForbidden:
		return "the token lacks the scope (read, operate) or the route/account this needs: use a token that has them"
	case status == http.StatusNotFound:
		return "check the intent id: settle intents list shows the intents the token may see"
	case strings.HasSuffix(p.Type, "/action-not-allowed"), strings.HasSuffix(p.Type, "/conflict"):
		return "see where the intent is now (settle intents show ID) and decide again"
	case status >= 500:
		return "the server could not answer: see its log, and try again"
	}
	return ""
}

func (c *client) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, errors.WithHint(errors.Wrapf(err, "%s %s", method, path),
			"is settle serve running at "+c.base+"? Name its address with --api or $SETTLE_API")
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		var p problem
		err := errors.Errorf("%s %s: HTTP %d", method, path, resp.StatusCode)
		if json.Unmarshal(out, &p) == nil && p.Title != "" {
			msg := fmt.Sprintf("%d %s", resp.StatusCode, p.Title)
			if p.Detail != "" {
				msg += ": " + p.Detail
			}
			err = errors.Errorf("%s %s: %s", method, path, msg)
		}
		if h := c.hint(resp.StatusCode, p); h != "" {
			err = errors.WithHint(err, h)
		}
		return nil, err
	}
	return out, nil
}

// intents: settle intents list|show
func (m *Main) intents(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "show") {
		fmt.Fprintln(m.Stderr, "usage: settle intents list [--state S] [--route R] [--account A] [--limit N] [--json]\n       settle intents show ID [--json]")
		return errUsage
	}
	fs := flag.NewFlagSet("intents "+args[0], flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	apiURL, tokenEnv := clientFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON for scripts")
	state := fs.String("state", "", "only this state")
	route := fs.String("route", "", "only this route")
	account := fs.String("account", "", "only this account")
	limit := fs.Int("limit", 50, "page size")
	after := fs.String("after", "", "page cursor from a previous list")
	sub := args[0]
	rest := args[1:]
	var id string
	if sub == "show" {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			fmt.Fprintln(m.Stderr, "usage: settle intents show ID [--json]")
			return errUsage
		}
		id, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return errUsage
	}
	c, err := newClient(*apiURL, *tokenEnv)
	if err != nil {
		return err
	}
	if sub == "show" {
		out, err := c.do(ctx, "GET", "/v1/intents/"+url.PathEscape(id), nil)
		if err != nil {
			return err
		}
		if *asJSON {
			_, err = m.Stdout.Write(append(out, '\n'))
			return err
		}
		return printIntent(m.Stdout, out)
	}
	q := url.Values{}
	for k, v := range map[string]string{"state": *state, "route": *route, "account": *account, "after": *after} {
		if v != "" {
			q.Set(k, v)
		}
	}
	q.Set("limit", fmt.Sprint(*limit))
	out, err := c.do(ctx, "GET", "/v1/intents?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err = m.Stdout.Write(append(out, '\n'))
		return err
	}
	var page struct {
		Items []map[string]any `json:"items"`
		Next  string           `json:"next"`
	}
	if err := json.Unmarshal(out, &page); err != nil {
		return errors.Errorf("list: unexpected answer: %w", err)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INTENT\tSTATE\tROUTE\tACCOUNT\tREQUEST\tEXTERNAL\tREASON")
	for _, it := range page.Items {
		fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\t%v\t%v\n", str(it["intent_id"]), str(it["state"]), str(it["route"]), str(it["account"]),
			str(it["request_id"]), str(it["external_id"]), str(it["manual_reason"]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(m.Stdout, "more: --after %s\n", page.Next)
	}
	return nil
}

func str(v any) string {
	if v == nil {
		return "-"
	}
	s := fmt.Sprint(v)
	if s == "" {
		return "-"
	}
	return s
}

func printIntent(w io.Writer, raw []byte) error {
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		return errors.Errorf("show: unexpected answer: %w", err)
	}
	for _, k := range []string{"intent_id", "state", "route", "account", "request_id", "idempotency_key", "external_id", "live_url", "manual_reason", "actions"} {
		if v, ok := d[k]; ok && v != nil && fmt.Sprint(v) != "" {
			fmt.Fprintf(w, "%-16s %v\n", k+":", v)
		}
	}
	if hist, ok := d["history"].([]any); ok {
		fmt.Fprintln(w, "history:")
		for _, h := range hist {
			if e, ok := h.(map[string]any); ok {
				fmt.Fprintf(w, "  v%-3v %-22v %v %v\n", e["version"], e["type"], e["at"], e["actor"])
				if op := operatorLine(e); op != "" {
					fmt.Fprintf(w, "       %s\n", op)
				}
			}
		}
	}
	if rc, ok := d["receipt"].(map[string]any); ok {
		fmt.Fprintln(w, "receipt:")
		if checks, ok := rc["checks"].([]any); ok {
			for _, c := range checks {
				if cm, ok := c.(map[string]any); ok {
					fmt.Fprintf(w, "  check %-10v ok=%v %v\n", cm["name"], cm["ok"], str(cm["detail"]))
				}
			}
		}
	}
	return nil
}

// operatorLine describes an operator event (Approved, Abandoned,
// OperatorConfirmed, OperatorReleased) and a hand-off
// (ManualActionRequired): who decided and why. "" for other events.
func operatorLine(e map[string]any) string {
	data, _ := e["data"].(map[string]any)
	if data == nil {
		return ""
	}
	var parts []string
	add := func(label, key string) {
		if v, ok := data[key]; ok && v != nil && fmt.Sprint(v) != "" {
			parts = append(parts, fmt.Sprintf("%s=%q", label, fmt.Sprint(v)))
		}
	}
	switch e["type"] {
	case "Approved", "OperatorConfirmed", "OperatorReleased":
		add("operator", "operator")
		add("reason", "reason")
	case "Abandoned":
		add("operator", "by")
		add("reason", "reason")
		if data["effect_possible"] == true {
			parts = append(parts, "effect_possible=true")
		}
	case "ManualActionRequired":
		add("reason", "reason")
		add("message", "message")
		add("owner", "owner")
	default:
		return ""
	}
	return strings.Join(parts, " ")
}

// operate: settle approve|resolve|abandon ID ...
func (m *Main) operate(ctx context.Context, verb string, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(m.Stderr, "usage: settle %s ID --reason WHY [--operator NAME]%s\n", verb,
			map[bool]string{true: " --resolution confirmed|not_executed|abandoned [--external-id X --live-url U]", false: ""}[verb == "resolve"])
		return errUsage
	}
	id := args[0]
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	apiURL, tokenEnv := clientFlags(fs)
	operator := fs.String("operator", "", "operator name (dev mode; with a token the token's name is recorded)")
	reason := fs.String("reason", "", "why (recorded on the log)")
	resolution := fs.String("resolution", "", "confirmed | not_executed | abandoned (resolve)")
	extID := fs.String("external-id", "", "the external object (resolve confirmed)")
	liveURL := fs.String("live-url", "", "its live URL (resolve confirmed)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	c, err := newClient(*apiURL, *tokenEnv)
	if err != nil {
		return err
	}
	body := map[string]string{"operator": *operator, "reason": *reason}
	if verb == "resolve" {
		body["resolution"] = *resolution
		if *extID != "" {
			body["external_id"] = *extID
		}
		if *liveURL != "" {
			body["live_url"] = *liveURL
		}
	}
	out, err := c.do(ctx, "POST", "/v1/intents/"+url.PathEscape(id)+"/"+verb, body)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err = m.Stdout.Write(append(out, '\n'))
		return err
	}
	var d map[string]any
	_ = json.Unmarshal(out, &d)
	fmt.Fprintf(m.Stdout, "%s: %s → %v\n", verb, id, str(d["state"]))
	return nil
}

// routes: settle routes check [--offline] FILE... | settle routes probe FILE ...
func (m *Main) routes(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "probe" {
		return m.routesProbe(ctx, args[1:])
	}
	offline := len(args) > 1 && args[0] == "check" && args[1] == "--offline"
	files := args
	if len(files) > 0 {
		files = files[1:]
	}
	if offline {
		files = files[1:]
	}
	if len(args) == 0 || args[0] != "check" || len(files) == 0 {
		fmt.Fprintln(m.Stderr, "usage: settle routes check [--offline] FILE... | settle routes probe FILE [--route NAME] [--external-id ID]")
		return errUsage
	}
	failed := 0
	for _, file := range files {
		if err := m.routesCheck(file, offline); err != nil {
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
	return nil
}
