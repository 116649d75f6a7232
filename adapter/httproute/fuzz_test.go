package httproute_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/settle-dev/settle/adapter/httproute"
)

// FuzzCheck: whatever a route file holds, Check, Lint, LintOffline and
// RouteNames answer with errors, never a panic; every error names a
// route file problem (a *RouteError).
func FuzzCheck(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("version: 1\nroutes: [{name: x}]\n"))
	env := envOf(exampleEnv("http://127.0.0.1:1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, err := range httproute.Check(data, env) {
			var re *httproute.RouteError
			if !asRouteError(err, &re) {
				t.Fatalf("not a *RouteError: %T %v", err, err)
			}
		}
		httproute.LintOffline(data)
		httproute.RouteNames(data)
		if cfgs, err := httproute.Parse(data, env); err == nil {
			for _, c := range cfgs {
				if _, err := httproute.Build(c); err != nil {
					t.Fatalf("Parse accepted a route Build refuses: %v", err)
				}
			}
		}
	})
}

func asRouteError(err error, re **httproute.RouteError) bool {
	e, ok := err.(*httproute.RouteError)
	*re = e
	return ok
}
