package testharness

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/errors"
)

// SettlePackage is settle's main package.
const SettlePackage = "github.com/settle-dev/settle/cmd/settle"

var builds struct {
	sync.Mutex
	dir  string
	bins map[string]*build // by package and flags
}

type build struct {
	once sync.Once
	path string
	err  error
}

// BuildBinary builds the main package pkg (of this module or one of its
// dependencies, at the version go.mod pins) with the given `go build`
// flags, once per test process, into a temporary directory RemoveBinaries
// (called from TestMain) deletes, and returns the binary's path (skipped
// under -short).
func BuildBinary(t testing.TB, pkg string, flags ...string) string {
	t.Helper()
	SkipShort(t, "a built binary")
	builds.Lock()
	if builds.dir == "" {
		d, err := os.MkdirTemp("", "settle-faults-bin-")
		if err != nil {
			builds.Unlock()
			t.Fatalf("build %s: %v", pkg, err)
		}
		builds.dir, builds.bins = d, map[string]*build{}
	}
	key := pkg + " " + strings.Join(flags, " ")
	b := builds.bins[key]
	if b == nil {
		name := fmt.Sprintf("%s-%d", path.Base(strings.TrimSuffix(pkg, "/v2")), len(builds.bins))
		b = &build{path: filepath.Join(builds.dir, name)}
		builds.bins[key] = b
	}
	builds.Unlock()
	b.once.Do(func() {
		args := append(append([]string{"build", "-o", b.path}, flags...), pkg)
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			b.err = errors.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// RemoveBinaries deletes the binaries BuildBinary made.
func RemoveBinaries() {
	builds.Lock()
	defer builds.Unlock()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
		builds.dir = ""
	}
}
