package layering

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pkg is what the check needs of one package of the module.
type pkg struct {
	ImportPath string
	Dir        string
	Name       string
	Imports    []string
	Deps       []string
}

// rule is one package's "It must never import:" list.
type rule struct {
	pkg   string
	never []string
}

const marker = "It must never import:"

// readRule finds the never-list in a doc.go's comment: the text after the
// marker, which starts a line, up to the line that ends with a period.
func readRule(src []byte) ([]string, error) {
	var text strings.Builder
	in := false
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "//") {
			if in {
				break
			}
			continue
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "//"))
		if !in {
			if !strings.HasPrefix(line, marker) {
				continue
			}
			in, line = true, line[len(marker):]
		}
		text.WriteString(" " + line)
		if strings.HasSuffix(line, ".") && (!strings.HasSuffix(line, "...") || strings.HasSuffix(line, "....")) {
			break
		}
	}
	if !in {
		return nil, fmt.Errorf("no %q sentence", marker)
	}
	list := strings.TrimSuffix(strings.TrimSpace(text.String()), ".")
	var out []string
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		if e == "" || strings.ContainsAny(e, " \t") {
			return nil, fmt.Errorf("%q: the list must be comma-separated package paths ending with a period", list)
		}
		out = append(out, e)
	}
	return out, nil
}

// forbidden reports whether dependency dep is what never-entry e names.
// A module-relative entry names module+"/"+e (and, ending in "/...",
// everything under it); any other entry is an import path (ending in
// "/..." for a subtree).
func forbidden(module string, known map[string]bool, e, dep string) bool {
	subtree := strings.HasSuffix(e, "/...")
	base := strings.TrimSuffix(e, "/...")
	full := base
	if known[module+"/"+base] || hasPrefixPkg(known, module+"/"+base) {
		full = module + "/" + base
	}
	return dep == full || (subtree && strings.HasPrefix(dep, full+"/"))
}

func hasPrefixPkg(known map[string]bool, prefix string) bool {
	for p := range known {
		if strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	return false
}

// violation is a forbidden dependency of a package, with the chain of
// imports that reaches it.
type violation struct {
	pkg, entry string
	chain      []string
}

func (v violation) String() string {
	return fmt.Sprintf("%s must never import %s, and imports it: %s", v.pkg, v.entry, strings.Join(v.chain, " -> "))
}

// check applies every rule to the packages' dependencies.
func check(module string, pkgs map[string]*pkg, rules []rule) []violation {
	known := map[string]bool{}
	for p := range pkgs {
		known[p] = true
	}
	var out []violation
	for _, r := range rules {
		p := pkgs[r.pkg]
		for _, e := range r.never {
			for _, dep := range p.Deps {
				if forbidden(module, known, e, dep) {
					out = append(out, violation{pkg: r.pkg, entry: e, chain: chain(pkgs, r.pkg, dep)})
				}
			}
		}
	}
	return out
}

// chain is the shortest import chain from one package to a dependency.
func chain(pkgs map[string]*pkg, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var c []string
			for x := to; x != ""; x = prev[x] {
				c = append([]string{x}, c...)
			}
			return c
		}
		p := pkgs[cur]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return []string{from, "…", to}
}

// load lists every package of the module (with its dependencies, direct
// and not, of its non-test build) and of the standard library it uses.
func load(t *testing.T) (module string, pkgs map[string]*pkg, root string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	f := strings.Fields(string(out))
	module, root = f[0], f[1]
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Dir,Name,Imports,Deps", "./...")
	cmd.Dir = root
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs = map[string]*pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		p := &pkg{}
		if err := dec.Decode(p); err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	return module, pkgs, root
}

// Every package of the module states in its doc.go what it must never
// import, and imports none of it, directly or through another package.
func TestImportDirection(t *testing.T) {
	module, pkgs, _ := load(t)
	var rules []rule
	known := map[string]bool{}
	for path := range pkgs {
		known[path] = true
	}
	for path, p := range pkgs {
		if path != module && !strings.HasPrefix(path, module+"/") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(p.Dir, "doc.go"))
		if err != nil {
			t.Errorf("%s: no doc.go saying what it must never import", path)
			continue
		}
		never, err := readRule(src)
		if err != nil {
			t.Errorf("%s/doc.go: %v", path, err)
			continue
		}
		for _, e := range never {
			base := strings.TrimSuffix(e, "/...")
			if !known[module+"/"+base] && !hasPrefixPkg(known, module+"/"+base) && !strings.Contains(base, ".") && base != "testing" {
				t.Errorf("%s/doc.go: %q names no package of the module", path, e)
			}
		}
		rules = append(rules, rule{pkg: path, never: never})
	}
	slices.SortFunc(rules, func(a, b rule) int { return strings.Compare(a.pkg, b.pkg) })
	if len(rules) < 20 {
		t.Fatalf("only %d packages with rules: the module was not listed", len(rules))
	}
	for _, v := range check(module, pkgs, rules) {
		t.Error(v)
	}
}

// The check fails on a forbidden arrow, direct or through another
// package, and names the chain; a subtree entry covers every package
// under it, and a package that merely shares a prefix is not covered.
func TestCheckFindsAForbiddenArrow(t *testing.T) {
	const m = "example.com/m"
	pkgs := map[string]*pkg{
		m + "/adapter":         {ImportPath: m + "/adapter", Imports: []string{m + "/ledger"}, Deps: []string{m + "/events", m + "/ledger"}},
		m + "/ledger":          {ImportPath: m + "/ledger", Imports: []string{m + "/events"}, Deps: []string{m + "/events"}},
		m + "/events":          {ImportPath: m + "/events"},
		m + "/api":             {ImportPath: m + "/api", Imports: []string{m + "/adapter"}, Deps: []string{m + "/adapter", m + "/events", m + "/ledger"}},
		m + "/consumers/audit": {ImportPath: m + "/consumers/audit", Imports: []string{m + "/ledgerx"}, Deps: []string{m + "/ledgerx"}},
		m + "/ledgerx":         {ImportPath: m + "/ledgerx"},
		m + "/cmd/x":           {ImportPath: m + "/cmd/x", Imports: []string{"testing"}, Deps: []string{"testing"}},
	}
	got := check(m, pkgs, []rule{
		{pkg: m + "/api", never: []string{"ledger"}},
		{pkg: m + "/adapter", never: []string{"api", "consumers/..."}},
		{pkg: m + "/consumers/audit", never: []string{"ledger"}},
		{pkg: m + "/cmd/x", never: []string{"testing"}},
	})
	var lines []string
	for _, v := range got {
		lines = append(lines, v.String())
	}
	want := []string{
		m + "/api must never import ledger, and imports it: " + m + "/api -> " + m + "/adapter -> " + m + "/ledger",
		m + "/cmd/x must never import testing, and imports it: " + m + "/cmd/x -> testing",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// The never-list is read from the doc comment whether it fits on one line
// or wraps, and a malformed list is refused.
func TestReadRule(t *testing.T) {
	got, err := readRule([]byte("// Package x does y.\n//\n// It must never import: a, b/...,\n// testing, github.com/nats-io/....\n// More prose.\npackage x\n"))
	if err != nil || !slices.Equal(got, []string{"a", "b/...", "testing", "github.com/nats-io/..."}) {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := readRule([]byte("// Package x imports what it likes.\npackage x\n")); err == nil {
		t.Fatal("a doc without the sentence was accepted")
	}
	if _, err := readRule([]byte("// It must never import: the producer or the api.\npackage x\n")); err == nil {
		t.Fatal("prose was accepted as a list")
	}
}

// Errors are made with cockroachdb/errors everywhere (safe format strings
// for log lines, hints for the user): no package of the module imports
// the standard library's errors package outside its tests.
func TestNoStandardErrorsPackage(t *testing.T) {
	module, pkgs, _ := load(t)
	for path, p := range pkgs {
		if strings.HasPrefix(path, module+"/") && slices.Contains(p.Imports, "errors") {
			t.Errorf("%s imports the standard library's errors: use github.com/cockroachdb/errors", path)
		}
	}
}
