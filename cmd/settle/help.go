package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/settle-dev/settle/internal/completion"
)

// flagSet is a subcommand's flag set: errors go to Stderr; -h prints
// "usage: settle NAME SYNOPSIS" and the flags (a command may set its own
// Usage, printed the same way).
func (m *Main) flagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: settle %s %s\n", name, synopsis)
		if hasFlags(fs) {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// wantsHelp: -h, -help or --help among args, before a "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// help answers a request for help in args: the usage and flags on
// Stdout, and errHelp (Run: exit 0). Commands that take an argument
// before their flags ask it first, so that "-h" is never taken for a
// file or an id.
func (m *Main) help(fs *flag.FlagSet, args []string) error {
	if !wantsHelp(args) {
		return nil
	}
	fs.SetOutput(m.Stdout)
	fs.Usage()
	return errHelp
}

// flags is command name's flag set with the flags register adds, args
// parsed (parse).
func (m *Main) flags(name, synopsis string, register func(*flag.FlagSet), args []string) (*flag.FlagSet, error) {
	fs := m.flagSet(name, synopsis)
	register(fs)
	return fs, m.parse(fs, args)
}

// printRaw prints the API's JSON answer as it came.
func (m *Main) printRaw(out []byte) error {
	_, err := m.Stdout.Write(append(out, '\n'))
	return err
}

// parse parses a subcommand's flags: help (above), or errUsage after
// the flag package named the problem on Stderr.
func (m *Main) parse(fs *flag.FlagSet, args []string) error {
	if err := m.help(fs, args); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	return nil
}

// groupUsage answers a group (intents, routes, views) without a known
// subcommand: its usage on Stdout for help, else on Stderr as an error.
func (m *Main) groupUsage(args []string, text string) error {
	if len(args) > 0 && (wantsHelp(args[:1]) || args[0] == "help") {
		fmt.Fprintln(m.Stdout, text)
		return errHelp
	}
	fmt.Fprintln(m.Stderr, text)
	return errUsage
}

// commands are settle's subcommands, by the words that name them.
var commands = []string{"demo", "serve", "mcp", "intents list", "intents show", "approve", "resolve", "abandon",
	"audit", "views rebuild", "routes check", "routes probe", "version", "completion"}

// commandFlags reads each subcommand's flags from its own -h: the
// completion scripts cannot drift from the flags the commands declare.
func (m *Main) commandFlags(ctx context.Context) []completion.Command {
	var out []completion.Command
	for _, c := range commands {
		var buf bytes.Buffer
		sub := &Main{Stdout: &buf, Stderr: &buf}
		_ = sub.Run(ctx, append(strings.Fields(c), "-h"))
		cmd := completion.Command{Path: c}
		for _, line := range strings.Split(buf.String(), "\n") {
			if name, ok := strings.CutPrefix(line, "  -"); ok {
				cmd.Flags = append(cmd.Flags, strings.Fields(name)[0])
			}
		}
		out = append(out, cmd)
	}
	return out
}

// completion: settle completion bash|zsh|fish prints a completion script.
func (m *Main) completion(ctx context.Context, args []string) error {
	fs := m.flagSet("completion", "bash|zsh|fish   (bash: source <(settle completion bash))")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	return completion.Write(m.Stdout, fs.Arg(0), "settle", m.commandFlags(ctx))
}
