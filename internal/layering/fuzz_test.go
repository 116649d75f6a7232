package layering

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakeFuzzRunsEveryFuzzTarget: make fuzz names every fuzz target of
// the module in its package, and nothing that is not one.
func TestMakeFuzzRunsEveryFuzzTarget(t *testing.T) {
	root := filepath.Join("..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`-fuzz '\^(Fuzz\w+)\$\$' -fuzztime \w+ \./(\S*)`).FindAllSubmatch(mk, -1) {
		listed[strings.TrimSuffix(string(m[2]), "/")+"."+string(m[1])] = true
	}
	found := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range decl.FindAllSubmatch(src, -1) {
			found[filepath.ToSlash(rel)+"."+string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range found {
		if !listed[f] {
			t.Errorf("make fuzz does not run %s", f)
		}
	}
	for f := range listed {
		if !found[f] {
			t.Errorf("make fuzz names %s, which is not a fuzz target", f)
		}
	}
	if len(found) == 0 {
		t.Fatal("no fuzz target found")
	}
}
