package completion

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"
)

// Command is one subcommand: its words ("serve", "intents show") and its
// flags' names without dashes.
type Command struct {
	Path  string
	Flags []string
}

// ErrShell is Write's error for a shell it does not know.
var ErrShell = errors.New("completion: unknown shell")

// Write writes prog's completion script for shell (bash, zsh or fish).
func Write(w io.Writer, shell, prog string, cmds []Command) error {
	script := map[string]func(*strings.Builder, string, words){"bash": bash, "zsh": zsh, "fish": fish}[shell]
	if script == nil {
		return errors.Wrapf(ErrShell, "%q (want bash, zsh, fish)", shell)
	}
	var b strings.Builder
	script(&b, prog, tree(cmds))
	_, err := io.WriteString(w, b.String())
	return err
}

// words is the command tree: the first words, the second words of each
// group, and each path's flags as "--name" words.
type words struct {
	top   []string
	subs  map[string][]string
	flags map[string]string // path → "--a --b"
	paths []string
}

func tree(cmds []Command) words {
	t := words{subs: map[string][]string{}, flags: map[string]string{}}
	for _, c := range cmds {
		first, second, group := strings.Cut(c.Path, " ")
		if !slices.Contains(t.top, first) {
			t.top = append(t.top, first)
		}
		if group {
			t.subs[first] = append(t.subs[first], second)
		}
		var fl []string
		for _, f := range c.Flags {
			fl = append(fl, "--"+f)
		}
		t.flags[c.Path] = strings.Join(fl, " ")
		t.paths = append(t.paths, c.Path)
	}
	return t
}

func (t words) groups() []string {
	var out []string
	for _, g := range t.top {
		if len(t.subs[g]) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// cases writes a case statement on $cmd with an arm per group (groupArm
// gets the group and its second words), then between, then an arm per
// path (pathArm gets the path and its flags).
func (t words) cases(b *strings.Builder, groupArm, between, pathArm string) {
	b.WriteString("\tcase \"$cmd\" in\n")
	for _, g := range t.groups() {
		fmt.Fprintf(b, groupArm, g, strings.Join(t.subs[g], " "))
	}
	b.WriteString(between)
	for _, p := range t.paths {
		fmt.Fprintf(b, pathArm, p, t.flags[p])
	}
}

func bash(b *strings.Builder, prog string, t words) {
	fn := "_" + ident(prog)
	fmt.Fprintf(b, "# bash completion for %s: source it, or put it in /etc/bash_completion.d/\n", prog)
	fmt.Fprintf(b, "%s() {\n\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd=\"${COMP_WORDS[1]}\" opts=\"\"\n", fn)
	fmt.Fprintf(b, "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(t.top, " ")+" --help --version")
	t.cases(b, "\t%s)\n\t\tif [ \"$COMP_CWORD\" -eq 2 ]; then\n\t\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\t\treturn\n\t\tfi\n\t\tcmd=\"$cmd ${COMP_WORDS[2]}\"\n\t\t;;\n",
		"\tesac\n\tcase \"$cmd\" in\n", "\t%q) opts=\"%s --help\" ;;\n")
	fmt.Fprintf(b, "\tesac\n\tif [[ \"$cur\" == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n\telse\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n\tfi\n}\n")
	fmt.Fprintf(b, "complete -o filenames -F %s %s\n", fn, prog)
}

func zsh(b *strings.Builder, prog string, t words) {
	fn := "_" + ident(prog)
	fmt.Fprintf(b, "#compdef %s\n# zsh completion for %s: put it in a directory of $fpath as %s, or source it\n", prog, prog, fn)
	fmt.Fprintf(b, "%s() {\n\tlocal cmd=\"$words[2]\"\n", fn)
	fmt.Fprintf(b, "\tif (( CURRENT == 2 )); then\n\t\tcompadd -- %s --help --version\n\t\treturn\n\tfi\n", strings.Join(t.top, " "))
	t.cases(b, "\t%s)\n\t\tif (( CURRENT == 3 )); then\n\t\t\tcompadd -- %s\n\t\t\treturn\n\t\tfi\n\t\tcmd=\"$cmd $words[3]\"\n\t\t;;\n",
		"\tesac\n\tlocal -a opts\n\tcase \"$cmd\" in\n", "\t%q) opts=(%s --help) ;;\n")
	fmt.Fprintf(b, "\tesac\n\tif [[ \"$PREFIX\" == -* ]]; then\n\t\tcompadd -- $opts\n\telse\n\t\t_files\n\tfi\n}\n")
	fmt.Fprintf(b, "if [[ \"$funcstack[1]\" == %s ]]; then\n\t%s \"$@\"\nelse\n\tcompdef %s %s\nfi\n", fn, fn, fn, prog)
}

func fish(b *strings.Builder, prog string, t words) {
	fmt.Fprintf(b, "# fish completion for %s: put it in ~/.config/fish/completions/%s.fish\n", prog, prog)
	fmt.Fprintf(b, "complete -c %s -n __fish_use_subcommand -f -a %q\n", prog, strings.Join(t.top, " "))
	for _, g := range t.groups() {
		fmt.Fprintf(b, "complete -c %s -n '__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s' -f -a %q\n",
			prog, g, strings.Join(t.subs[g], " "), strings.Join(t.subs[g], " "))
	}
	for _, p := range t.paths {
		cond := "__fish_seen_subcommand_from " + p
		if first, second, ok := strings.Cut(p, " "); ok {
			cond = "__fish_seen_subcommand_from " + first + "; and __fish_seen_subcommand_from " + second
		}
		for _, f := range strings.Fields(t.flags[p]) {
			fmt.Fprintf(b, "complete -c %s -n '%s' -l %s\n", prog, cond, strings.TrimPrefix(f, "--"))
		}
	}
}

// ident is prog as a shell function name.
func ident(prog string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, prog)
}
