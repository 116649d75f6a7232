package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/fakeapi"
)

func main() {
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
