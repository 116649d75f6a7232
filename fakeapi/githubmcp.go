package fakeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// GitHub-shaped MCP server: an upstream MCP server, built on the official
// go-sdk, in front of a GitHub API (the fake's, or any). Its tools are
// those of GitHub's own MCP server (github/github-mcp-server), with their
// arguments and answers:
//
//	add_issue_comment (owner, repo, issue_number, body): the new comment
//	  as {"id": "<id>", "url": "<html_url>"}, a text block
//	issue_read (method: get_comments, owner, repo, issue_number, page,
//	  perPage), read-only: the page of comments, each {id, body, html_url,
//	  user {login, id, ...}, author_association, created_at, updated_at},
//	  a text block; its bodies are sanitized as GitHub's server does (HTML
//	  comments removed, & < > " ' escaped)
//	get_issue_comment (owner, repo, comment_id), read-only: one comment,
//	  shaped as issue_read's; GitHub's server has no such tool (it lists
//	  comments only), and a route's readback needs one
//
// An API refusal is an error result: "failed to create comment: " and
// the API's error ("POST <url>: 404 Not Found []"; "Validation Failed"
// for a 422).
//
// Faults are taken per tool call from Faults, or else from FaultDir (a
// file named after the tool holding one fault word, removed when taken),
// so that a test can fault a server running as a child process:
//
//	drop_reply   the tool runs, and its answer never comes
//	crash        the tool runs, and the process exits before answering
//	slow         the call waits (Slow), then runs and answers
//	not_json     the tool runs and answers a text block that is not JSON
//	huge         the tool runs and answers a text block of HugeResult bytes
//	garbage      the tool runs and its answer is a line that is not
//	             JSON-RPC (a server whose output goes through a Wire)
//	wrong_shape  the tool runs and its answer is a JSON-RPC result that
//	             is not a tool result (through a Wire)
//	refused      the tool does not run: the call is refused with JSON-RPC
//	             error -32022 (unsupported protocol version), as the
//	             2026-07-28 specification's servers refuse a request
//	             before dispatching it

// Fault words of the GitHub-shaped MCP server.
const (
	MCPDropReply  = "drop_reply"
	MCPCrash      = "crash"
	MCPSlow       = "slow"
	MCPNotJSON    = "not_json"
	MCPHuge       = "huge"
	MCPGarbage    = "garbage"
	MCPWrongShape = "wrong_shape"
	MCPRefused    = "refused"
)

// HugeResult is the size of a huge fault's answer.
const HugeResult = 8 << 20

// GitHubMCPConfig configures NewGitHubMCPServer.
type GitHubMCPConfig struct {
	// APIURL is the GitHub API root; Token its bearer token.
	APIURL string
	Token  string
	// FaultDir holds the pending faults (see above); "" for none.
	FaultDir string
	// Faults, when set, gives each call's fault ("" for none) instead of
	// FaultDir; body is the comment's body for add_issue_comment, "" for
	// a read.
	Faults func(tool, body string) string
	// Slow is a slow call's wait; nil waits 2 s or until the call is
	// cancelled.
	Slow func(ctx context.Context) error
	// Exit ends the process (crash); nil means os.Exit(3).
	Exit func()
	// Wire is the server's output when it serves over a stream (Wrap):
	// the garbage and wrong_shape faults act on it. nil: they act as
	// drop_reply.
	Wire *MCPWire
}

// InjectMCPFault queues a fault for the next call of tool of a server
// whose FaultDir is dir.
func InjectMCPFault(dir, tool, fault string) error {
	return os.WriteFile(filepath.Join(dir, tool), []byte(fault), 0o600)
}

func takeMCPFault(dir, tool string) string {
	if dir == "" {
		return ""
	}
	p := filepath.Join(dir, tool)
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	_ = os.Remove(p)
	return strings.TrimSpace(string(b))
}

type ghRepoArgs struct {
	Owner string `json:"owner" jsonschema:"Repository owner"`
	Repo  string `json:"repo" jsonschema:"Repository name"`
}

type addCommentArgs struct {
	ghRepoArgs
	IssueNumber int    `json:"issue_number" jsonschema:"Issue number to comment on"`
	Body        string `json:"body" jsonschema:"Comment content"`
}

type getCommentArgs struct {
	ghRepoArgs
	CommentID int64 `json:"comment_id" jsonschema:"The comment's id"`
}

type issueReadArgs struct {
	ghRepoArgs
	Method      string `json:"method" jsonschema:"The read operation to perform on a single issue: get_comments (the only one this server serves)"`
	IssueNumber int    `json:"issue_number" jsonschema:"The number of the issue"`
	Page        int    `json:"page,omitempty" jsonschema:"Page number for pagination (min 1)"`
	PerPage     int    `json:"perPage,omitempty" jsonschema:"Results per page for pagination (min 1, max 100)"`
}

// ghMCP is one GitHub-shaped server's state.
type ghMCP struct {
	cfg GitHubMCPConfig
	hc  *http.Client
}

// NewGitHubMCPServer is the GitHub-shaped MCP server over cfg's API.
func NewGitHubMCPServer(cfg GitHubMCPConfig) *sdk.Server {
	if cfg.Exit == nil {
		cfg.Exit = func() { os.Exit(3) }
	}
	g := &ghMCP{cfg: cfg, hc: &http.Client{Timeout: 10 * time.Second}}
	s := sdk.NewServer(&sdk.Implementation{Name: "github-fake-mcp", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "add_issue_comment", Description: "Add a comment to a specific issue in a GitHub repository.",
		Annotations: &sdk.ToolAnnotations{Title: "Add comment to issue or pull request"}}, g.addComment)
	sdk.AddTool(s, &sdk.Tool{Name: "issue_read", Description: "Get information about a specific issue in a GitHub repository.",
		Annotations: &sdk.ToolAnnotations{Title: "Get issue details", ReadOnlyHint: true}}, g.issueRead)
	sdk.AddTool(s, &sdk.Tool{Name: "get_issue_comment", Description: "Get one issue comment.",
		Annotations: &sdk.ToolAnnotations{Title: "Get an issue comment", ReadOnlyHint: true}}, g.getComment)
	return s
}

func (g *ghMCP) addComment(ctx context.Context, _ *sdk.CallToolRequest, a addCommentArgs) (*sdk.CallToolResult, any, error) {
	return g.call(ctx, "add_issue_comment", a.ghRepoArgs, a.Body, "", func(p string) (*sdk.CallToolResult, error) {
		b, status, err := g.api(ctx, http.MethodPost, p+"/issues/"+strconv.Itoa(a.IssueNumber)+"/comments", map[string]string{"body": a.Body})
		if err != nil || status >= 300 {
			return apiError("failed to create comment", http.MethodPost, g.cfg.APIURL+p, status, b, err), nil
		}
		var c struct {
			ID      int64  `json:"id"`
			HTMLURL string `json:"html_url"`
		}
		_ = json.Unmarshal(b, &c)
		return jsonResult(map[string]string{"id": strconv.FormatInt(c.ID, 10), "url": c.HTMLURL}), nil
	})
}

func (g *ghMCP) issueRead(ctx context.Context, _ *sdk.CallToolRequest, a issueReadArgs) (*sdk.CallToolResult, any, error) {
	var refusal string
	if a.Method != "get_comments" {
		refusal = "unknown method: " + a.Method + " (this server serves get_comments)"
	}
	page, per := max(a.Page, 1), a.PerPage
	if per <= 0 {
		per = 30
	}
	return g.call(ctx, "issue_read", a.ghRepoArgs, "", refusal, func(p string) (*sdk.CallToolResult, error) {
		return g.readComments(ctx, "failed to get issue comments", p+"/issues/"+strconv.Itoa(a.IssueNumber)+"/comments?page="+strconv.Itoa(page)+"&per_page="+strconv.Itoa(per), false)
	})
}

func (g *ghMCP) getComment(ctx context.Context, _ *sdk.CallToolRequest, a getCommentArgs) (*sdk.CallToolResult, any, error) {
	return g.call(ctx, "get_issue_comment", a.ghRepoArgs, "", "", func(p string) (*sdk.CallToolResult, error) {
		return g.readComments(ctx, "failed to get issue comment", p+"/issues/comments/"+strconv.FormatInt(a.CommentID, 10), true)
	})
}

// call runs a tool on the repository a names under the call's fault;
// refusal (or a repository not named) is an error result instead.
func (g *ghMCP) call(ctx context.Context, tool string, a ghRepoArgs, body, refusal string, run func(repoPath string) (*sdk.CallToolResult, error)) (*sdk.CallToolResult, any, error) {
	if a.Owner == "" || a.Repo == "" || strings.ContainsAny(a.Owner+a.Repo, "/?#") {
		refusal = "missing required parameter: owner and repo"
	}
	if refusal != "" {
		return errResult(refusal), nil, nil
	}
	res, err := g.fault(ctx, tool, body, func() (*sdk.CallToolResult, error) { return run("/repos/" + a.Owner + "/" + a.Repo) })
	return res, nil, err
}

// readComments GETs path: a page of comments, or one (one) shown as a
// page of one.
func (g *ghMCP) readComments(ctx context.Context, msg, path string, one bool) (*sdk.CallToolResult, error) {
	b, status, err := g.api(ctx, http.MethodGet, path, nil)
	if err != nil || status >= 300 {
		return apiError(msg, http.MethodGet, g.cfg.APIURL+path, status, b, err), nil
	}
	if one {
		b = append(append([]byte("["), b...), ']')
	}
	return minimalComments(b, one)
}

// minimalComments is GitHub's MCP server's answer for a page of the API's
// comments (one: the only comment of b, alone).
func minimalComments(b []byte, one bool) (*sdk.CallToolResult, error) {
	var in []struct {
		ID   int64  `json:"id"`
		Body string `json:"body"`
		URL  string `json:"html_url"`
		User struct {
			Login string `json:"login"`
			ID    int64  `json:"id"`
		} `json:"user"`
		Assoc     string `json:"author_association"`
		CreatedAt string `json:"created_at"`
		UpdatedAt string `json:"updated_at"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return errResult("failed to get issue comments: " + err.Error()), nil
	}
	out := make([]map[string]any, 0, len(in))
	for _, c := range in {
		out = append(out, map[string]any{"id": c.ID, "body": sanitizeBody(c.Body), "html_url": c.URL,
			"user":               map[string]any{"login": c.User.Login, "id": c.User.ID, "profile_url": "https://github.com/" + c.User.Login},
			"author_association": c.Assoc, "created_at": rfc3339(c.CreatedAt), "updated_at": rfc3339(c.UpdatedAt)})
	}
	if one && len(out) == 1 {
		return jsonResult(out[0]), nil
	}
	return jsonResult(out), nil
}

var htmlComment = regexp.MustCompile(`(?s)<!--.*?-->`)

// sanitizeBody is GitHub's MCP server's sanitizing of a body, as far as
// plain text goes: HTML comments removed, & < > " ' escaped.
func sanitizeBody(s string) string {
	if !strings.ContainsAny(s, `&<>"'`) {
		return s
	}
	return html.EscapeString(htmlComment.ReplaceAllString(s, ""))
}

// rfc3339 is a time at the second, as GitHub's MCP server formats it.
func rfc3339(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format(time.RFC3339)
}

// api calls the GitHub API; err only when it did not answer.
func (g *ghMCP) api(ctx context.Context, method, path string, body any) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(g.cfg.APIURL, "/")+path, rd)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+g.cfg.Token)
	req.Header.Set("Accept", "application/vnd.github+json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return b, resp.StatusCode, err
}

// apiError is GitHub's MCP server's error result for an API refusal.
func apiError(msg, method, url string, status int, body []byte, err error) *sdk.CallToolResult {
	switch {
	case err != nil:
		return errResult(msg + ": " + err.Error())
	case status == http.StatusUnprocessableEntity:
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(body, &e) == nil && e.Message != "" {
			return errResult(msg + ": " + e.Message)
		}
		return errResult(msg + ": GitHub API validation failed")
	}
	return errResult(msg + ": " + method + " " + url + ": " + strconv.Itoa(status) + " " + http.StatusText(status) + " []")
}

// fault runs a tool's call under the fault taken for it.
func (g *ghMCP) fault(ctx context.Context, tool, body string, run func() (*sdk.CallToolResult, error)) (*sdk.CallToolResult, error) {
	var f string
	if g.cfg.Faults != nil {
		f = g.cfg.Faults(tool, body)
	} else {
		f = takeMCPFault(g.cfg.FaultDir, tool)
	}
	if f == MCPSlow {
		if err := g.slow(ctx); err != nil {
			return nil, err
		}
	}
	if f == MCPRefused {
		return nil, &jsonrpc.Error{Code: sdk.CodeUnsupportedProtocolVersion, Message: "this server does not serve the request's protocol version"}
	}
	res, err := run()
	switch f {
	case MCPDropReply:
		// The answer never comes while the caller waits; the wait is
		// bounded so that a server whose client gave up without
		// cancelling the request (streamable HTTP) can still close.
		return nil, abandon(ctx)
	case MCPCrash:
		g.cfg.Exit()
		return nil, abandon(ctx)
	case MCPNotJSON:
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Comment added."}}}, nil
	case MCPHuge:
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: `["` + strings.Repeat("x", HugeResult) + `"]`}}}, nil
	case MCPGarbage, MCPWrongShape:
		if g.cfg.Wire == nil {
			return nil, abandon(ctx)
		}
		g.cfg.Wire.arm(f)
	}
	return res, err
}

func (g *ghMCP) slow(ctx context.Context) error {
	if g.cfg.Slow != nil {
		return g.cfg.Slow(ctx)
	}
	select {
	case <-time.After(2 * time.Second):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func errResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}

func jsonResult(v any) *sdk.CallToolResult {
	b, _ := json.Marshal(v)
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}
}

// abandonAfter bounds how long a dropped reply holds its handler: longer
// than any route timeout the tests declare, so the caller has given up
// before the handler returns an error nobody reads.
const abandonAfter = 15 * time.Second

// abandon waits until the request is cancelled or abandonAfter passes.
func abandon(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(abandonAfter):
		return errors.New("reply dropped")
	}
}

// MCPWire is the output of a server that serves over a stream: the next
// tool result written after a garbage or wrong_shape fault was armed is
// replaced (one JSON-RPC message a line).
type MCPWire struct {
	mu    sync.Mutex
	armed string
}

func (w *MCPWire) arm(fault string) {
	w.mu.Lock()
	w.armed = fault
	w.mu.Unlock()
}

// Wrap is out seen through the wire.
func (w *MCPWire) Wrap(out io.Writer) io.WriteCloser { return &wireWriter{w: w, out: out} }

type wireWriter struct {
	w   *MCPWire
	out io.Writer
	// line is this writer's unfinished line: each session's own, so that
	// a line a closed session could not write never reaches another.
	line []byte
}

// Close closes the output when it is an io.Closer.
func (ww *wireWriter) Close() error {
	if c, ok := ww.out.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (ww *wireWriter) Write(p []byte) (int, error) {
	w := ww.w
	w.mu.Lock()
	defer w.mu.Unlock()
	ww.line = append(ww.line, p...)
	for {
		k := bytes.IndexByte(ww.line, '\n')
		if k < 0 {
			return len(p), nil
		}
		line := ww.line[:k+1]
		if w.armed != "" && bytes.Contains(line, []byte(`"result"`)) {
			line = w.replace(line)
		}
		ww.line = ww.line[k+1:]
		if _, err := ww.out.Write(line); err != nil {
			return 0, err
		}
	}
}

// replace is the armed fault's version of a result line.
func (w *MCPWire) replace(line []byte) []byte {
	f := w.armed
	w.armed = ""
	if f == MCPGarbage {
		return []byte("HTTP/1.1 502 Bad Gateway: upstream said <html>oops</html>\n")
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(line, &m)
	return []byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":7,"isError":"no"}}` + "\n")
}
