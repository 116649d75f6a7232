package producer_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/settle-dev/settle/internal/telemetry"
)

// executeAllocs (race_test.go, norace_test.go) is what one Execute of a
// new intent (recorded, written, its outcome recorded: client, embedded
// server and fake API together) allocated before tracing was added,
// measured as this test measures (it logs the figure with -v), with and
// without the race detector: a change that makes Execute allocate more or
// less for another reason records its own figure there.

// With tracing off, Execute allocates no more than it did without
// tracing: every hook on its path is one flag check (the hooks' own
// zero-allocation check is telemetry's TestOffPathAllocatesNothing).
func TestExecuteWithTracingOffAllocatesNoMore(t *testing.T) {
	defer telemetry.Use(nil, nil)()
	e := newEnv(t)
	ctx := context.Background()
	n := 0
	run := func() {
		n++
		if _, err := e.p.Execute(ctx, req(fmt.Sprintf("allocs-%d", n), "allocs")); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 {
		run() // warm: connections, buffers
	}
	got := testing.AllocsPerRun(300, run)
	t.Logf("allocations per Execute: %.0f", got)
	if got > executeAllocs+1 {
		t.Fatalf("tracing off: %.0f allocations per Execute, more than the %d measured without tracing (and 1 of slack)", got, executeAllocs)
	}
}
