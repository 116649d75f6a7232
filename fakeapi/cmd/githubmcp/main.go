package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/fakeapi"
)

// StartRefused is the file of the faults directory whose presence makes
// a start fail (the process exits 1 at once).
const StartRefused = "refuse_start"

func main() {
	if dir := os.Getenv("GITHUB_MCP_FAULTS"); dir != "" {
		// A test refuses starts, and counts them.
		if _, err := os.Stat(filepath.Join(dir, StartRefused)); err == nil {
			fmt.Fprintln(os.Stderr, "githubmcp: start refused")
			os.Exit(1)
		}
		if f, err := os.OpenFile(filepath.Join(dir, "pids"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			fmt.Fprintln(f, os.Getpid())
			_ = f.Close()
		}
	}
	cfg := fakeapi.GitHubMCPConfig{APIURL: os.Getenv("GITHUB_API_URL"), Token: os.Getenv("GITHUB_PERSONAL_ACCESS_TOKEN"), FaultDir: os.Getenv("GITHUB_MCP_FAULTS")}
	switch {
	case len(os.Args) == 2 && os.Args[1] == "stdio":
		wire := &fakeapi.MCPWire{}
		cfg.Wire = wire
		srv := fakeapi.NewGitHubMCPServer(cfg)
		if err := srv.Run(context.Background(), &sdk.IOTransport{Reader: os.Stdin, Writer: wire.Wrap(os.Stdout)}); err != nil {
			os.Exit(1)
		}
	case len(os.Args) == 3 && os.Args[1] == "http":
		srv := fakeapi.NewGitHubMCPServer(cfg)
		h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
		if err := http.ListenAndServe(os.Args[2], h); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: githubmcp stdio | githubmcp http ADDR")
		os.Exit(2)
	}
}
