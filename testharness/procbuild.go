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

// NATSServerPackage is the main package of the nats-server binary the
// process-level fault tests run: the module version go.mod pins, the same
// code settle embeds.
const NATSServerPackage = "github.com/nats-io/nats-server/v2"

// SettlePackage is settle's main package.
const SettlePackage = "github.com/settle-dev/settle/cmd/settle"

var (
	buildMu    sync.Mutex
	buildDir   string
	buildCache = map[string]*buildResult{}
)

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// BuildBinary builds the main package pkg (an import path inside this
// module or one of its dependencies, at the version go.mod pins) with the
// given `go build` flags and returns the binary's path. A build is made
// once per process and flags; the binaries live in one temporary
// directory removed by RemoveBinaries (call it from TestMain). Under -short
// the test is skipped (the fast tier builds nothing).
func BuildBinary(t testing.TB, pkg string, flags ...string) string {
	t.Helper()
	SkipShort(t, "a built binary")
	p, err := buildBinary(pkg, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func buildBinary(pkg string, flags ...string) (string, error) {
	key := pkg + " " + strings.Join(flags, " ")
	buildMu.Lock()
	if buildDir == "" {
		d, err := os.MkdirTemp("", "settle-faults-bin-")
		if err != nil {
			buildMu.Unlock()
			return "", errors.Errorf("build %s: %w", pkg, err)
		}
		buildDir = d
	}
	r := buildCache[key]
	if r == nil {
		r = &buildResult{}
		buildCache[key] = r
	}
	dir := buildDir
	n := len(buildCache)
	buildMu.Unlock()
	r.once.Do(func() {
		name := path.Base(strings.TrimSuffix(pkg, "/v2"))
		r.path = filepath.Join(dir, fmt.Sprintf("%s-%d", name, n))
		args := append(append([]string{"build", "-o", r.path}, flags...), pkg)
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			r.err = errors.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	return r.path, r.err
}

// RemoveBinaries deletes the binaries BuildBinary made.
func RemoveBinaries() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
		buildDir = ""
		buildCache = map[string]*buildResult{}
	}
}
