package httproute_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/settle-dev/settle/adapter/httproute"
)

// TestLintOffline: every example route file checks without
// its secrets (no environment at all), as CI runs it; what is wrong in a
// file is still found; the names are read.
func TestLintOffline(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil || len(files) < 6 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		data := readExample(t, filepath.Base(f))
		if errs, warnings := httproute.LintOffline(data); errs != nil {
			t.Fatalf("%s: %v (warnings %v)", f, errs, warnings)
		}
		if errs := httproute.Check(data, envOf(nil)); errs == nil {
			t.Fatalf("%s: checks without its environment online: the offline test proves nothing", f)
		}
		if names := httproute.RouteNames(data); len(names) != 1 || names[0] == "" {
			t.Fatalf("%s: names %v", f, names)
		}
	}
	bad := mutate(t, readExample(t, "github_comments.yaml"), `"{{base}}/issues/{{parent}}/comments"`, `"{{base}}/issues/{{nope}}/comments"`)
	errs, _ := httproute.LintOffline(bad)
	if len(errs) != 1 {
		t.Fatalf("a broken file offline: %v", errs)
	}
	var re *httproute.RouteError
	if !errors.As(errs[0], &re) || re.Field != "write.url" {
		t.Fatalf("got %v", errs[0])
	}
}
