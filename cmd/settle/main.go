package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := m.Run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "settle:", err)
		if hint := errors.FlattenHints(err); hint != "" {
			fmt.Fprintln(os.Stderr, "hint:", hint)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// errHelp: the command printed its help (Run returns nil: exit 0).
var errHelp = errors.New("help")

// Main runs one settle command.
type Main struct {
	Stdin  io.Reader // settle mcp's protocol input (nil: os.Stdin)
	Stdout io.Writer
	Stderr io.Writer
}

const usage = `settle records every external write before it happens and settles lost responses without a second write.

Usage:
  settle demo [--keep DIR]                    a post whose response is dropped, reconciled to a receipt (embedded NATS, fake API)
  settle serve --routes FILE [--dev] [--addr HOST:PORT] [--data DIR] [--nats-url URL | --nats-listen ADDR] [--tokens FILE]
                                              the service: HTTP API, reconcilers, projector, metrics, console
  settle mcp --routes FILE (--data DIR | --nats-url URL) [--scopes submit,read]
                                              an MCP server on stdio for agent hosts (see docs/mcp.md); settle serve also serves /mcp
  settle intents list|show [ID]               inspect intents through the API (--api URL, token in $SETTLE_TOKEN)
  settle approve ID --reason WHY              approve a pending first write or retry
  settle resolve ID --resolution R --reason WHY   close a manual action (confirmed | not_executed | abandoned)
  settle abandon ID --reason WHY              record that an intent will not be written
  settle audit (--data DIR | --nats-url URL)  replay the log and check its invariants (non-zero exit on a violation);
                                              --data is serve's, after it stopped
  settle views rebuild --data DIR             rebuild the SQLite views from the log (serve stopped)
  settle routes check [--offline] FILE...     validate route files; every error names route and field (--offline: placeholder secrets)
  settle routes probe FILE [--route NAME] [--external-id ID]   read-only: what a route's reads resolve to on the live API
  settle version | --version | -v              the version and the commit it was built from
  settle completion bash|zsh|fish             a shell completion script (subcommands and flags)

Run 'settle <command> -h' for a command's flags.
`

// Run dispatches args to a command. A request for help (-h, --help) is
// answered on Stdout and is no error.
func (m *Main) Run(ctx context.Context, args []string) error {
	if err := m.run(ctx, args); !errors.Is(err, errHelp) {
		return err
	}
	return nil
}

func (m *Main) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "demo":
		return m.demo(ctx, args[1:])
	case "audit":
		return m.audit(ctx, args[1:])
	case "serve":
		return m.serve(ctx, args[1:])
	case "mcp":
		return m.mcpStdio(ctx, args[1:])
	case "intents":
		return m.intents(ctx, args[1:])
	case "approve", "resolve", "abandon":
		return m.operate(ctx, args[0], args[1:])
	case "routes":
		return m.routes(ctx, args[1:])
	case "views":
		return m.views(ctx, args[1:])
	case "completion":
		return m.completion(ctx, args[1:])
	case "version", "--version", "-v", "-version":
		if args[0] == "version" {
			if err := m.parse(m.flagSet("version", ""), args[1:]); err != nil {
				return err
			}
		}
		fmt.Fprintln(m.Stdout, buildinfo.Read())
		return nil
	case "-h", "--help", "-help", "help":
		fmt.Fprint(m.Stdout, usage)
		return nil
	}
	fmt.Fprintf(m.Stderr, "settle: unknown command %q\n\n%s", args[0], usage)
	return errUsage
}
