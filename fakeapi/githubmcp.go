package fakeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// GitHub-shaped MCP server: an upstream MCP server, built on the official
// go-sdk, in front of a GitHub API (the fake's, or any). Its tools are
// shaped like GitHub's own MCP server's: add_issue_comment (owner, repo,
// issue_number, body), get_issue_comments (owner, repo, issue_number,
// page, perPage) and get_issue_comment (owner, repo, comment_id); each
// answers the API's JSON as a text content block, as GitHub's does.
//
// Faults are taken per tool call from FaultDir (a file named after the
// tool holding one fault word, removed when taken), so that a test can
// fault a server running as a child process:
//
//	drop_reply  the tool runs, and its answer never comes
//	crash       the tool runs, and the process exits before answering
//	slow        the tool waits 2s, then runs and answers

// Fault words of the GitHub-shaped MCP server.
const (
	MCPDropReply = "drop_reply"
	MCPCrash     = "crash"
	MCPSlow      = "slow"
)

// GitHubMCPConfig configures NewGitHubMCPServer.
type GitHubMCPConfig struct {
	// APIURL is the GitHub API root; Token its bearer token.
	APIURL string
	Token  string
	// FaultDir holds the pending faults (see above); "" for none.
	FaultDir string
	// Exit ends the process (crash); nil means os.Exit(3).
	Exit func()
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
	Owner string `json:"owner" jsonschema:"the repository's owner"`
	Repo  string `json:"repo" jsonschema:"the repository's name"`
}

type addCommentArgs struct {
	ghRepoArgs
	IssueNumber int    `json:"issue_number" jsonschema:"the issue's number"`
	Body        string `json:"body" jsonschema:"the comment's text"`
}

type listCommentsArgs struct {
	ghRepoArgs
	IssueNumber int `json:"issue_number" jsonschema:"the issue's number"`
	Page        int `json:"page,omitempty" jsonschema:"the page (from 1)"`
	PerPage     int `json:"perPage,omitempty" jsonschema:"items per page (at most 100)"`
}

type getCommentArgs struct {
	ghRepoArgs
	CommentID int64 `json:"comment_id" jsonschema:"the comment's id"`
}

// NewGitHubMCPServer is the GitHub-shaped MCP server over cfg's API.
func NewGitHubMCPServer(cfg GitHubMCPConfig) *sdk.Server {
	if cfg.Exit == nil {
		cfg.Exit = func() { os.Exit(3) }
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "github-fake-mcp", Version: "1"}, nil)
	hc := &http.Client{Timeout: 10 * time.Second}
	api := func(ctx context.Context, method, path string, body any) (*sdk.CallToolResult, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(cfg.APIURL, "/")+path, rd)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
		req.Header.Set("Accept", "application/vnd.github+json")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return errResult("the GitHub API did not answer"), nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		if resp.StatusCode >= 300 {
			return errResult(strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode) + ": " + string(b)), nil
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}, nil
	}
	fault := func(ctx context.Context, tool string, run func() (*sdk.CallToolResult, error)) (*sdk.CallToolResult, error) {
		f := takeMCPFault(cfg.FaultDir, tool)
		if f == MCPSlow {
			select {
			case <-time.After(2 * time.Second):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		res, err := run()
		switch f {
		case MCPDropReply:
			// The answer never comes while the caller waits; the wait is
			// bounded so that a server whose client gave up without
			// cancelling the request (streamable HTTP) can still close.
			return nil, abandon(ctx)
		case MCPCrash:
			cfg.Exit()
			return nil, abandon(ctx)
		}
		return res, err
	}
	repoPath := func(a ghRepoArgs) (string, error) {
		if a.Owner == "" || a.Repo == "" || strings.ContainsAny(a.Owner+a.Repo, "/?#") {
			return "", errors.New("owner and repo are required")
		}
		return "/repos/" + a.Owner + "/" + a.Repo, nil
	}
	sdk.AddTool(s, &sdk.Tool{Name: "add_issue_comment", Description: "Add a comment to an issue or pull request."},
		func(ctx context.Context, _ *sdk.CallToolRequest, a addCommentArgs) (*sdk.CallToolResult, any, error) {
			p, err := repoPath(a.ghRepoArgs)
			if err != nil {
				return errResult(err.Error()), nil, nil
			}
			res, err := fault(ctx, "add_issue_comment", func() (*sdk.CallToolResult, error) {
				return api(ctx, http.MethodPost, p+"/issues/"+strconv.Itoa(a.IssueNumber)+"/comments", map[string]string{"body": a.Body})
			})
			return res, nil, err
		})
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true}
	sdk.AddTool(s, &sdk.Tool{Name: "get_issue_comments", Description: "List the comments of an issue, a page at a time.", Annotations: readOnly},
		func(ctx context.Context, _ *sdk.CallToolRequest, a listCommentsArgs) (*sdk.CallToolResult, any, error) {
			p, err := repoPath(a.ghRepoArgs)
			if err != nil {
				return errResult(err.Error()), nil, nil
			}
			page, per := max(a.Page, 1), a.PerPage
			if per <= 0 {
				per = 30
			}
			res, err := fault(ctx, "get_issue_comments", func() (*sdk.CallToolResult, error) {
				return api(ctx, http.MethodGet, p+"/issues/"+strconv.Itoa(a.IssueNumber)+"/comments?page="+strconv.Itoa(page)+"&per_page="+strconv.Itoa(per), nil)
			})
			return res, nil, err
		})
	sdk.AddTool(s, &sdk.Tool{Name: "get_issue_comment", Description: "Get one issue comment.", Annotations: readOnly},
		func(ctx context.Context, _ *sdk.CallToolRequest, a getCommentArgs) (*sdk.CallToolResult, any, error) {
			p, err := repoPath(a.ghRepoArgs)
			if err != nil {
				return errResult(err.Error()), nil, nil
			}
			res, err := fault(ctx, "get_issue_comment", func() (*sdk.CallToolResult, error) {
				return api(ctx, http.MethodGet, p+"/issues/comments/"+strconv.FormatInt(a.CommentID, 10), nil)
			})
			return res, nil, err
		})
	return s
}

func errResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
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
