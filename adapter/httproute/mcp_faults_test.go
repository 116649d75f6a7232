package httproute_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
)

// lastOf is the data of the intent's last event of type typ.
func lastOf[T events.Data](t *testing.T, w *e2e, i *fsm.Intent, typ events.Type) T {
	t.Helper()
	h, err := w.store.Load(context.Background(), w.route.Name, i.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	found := false
	for _, e := range h.Events {
		if e.Type == typ {
			out, found = e.Data.(T), true
		}
	}
	if !found {
		t.Fatalf("no %s in %v", typ, w.types(i))
	}
	return out
}

// TestMCPBadAnswersToAWriteAreUnknown: the upstream runs the tool (the
// comment is posted) and answers something settle cannot read: a line
// that is not JSON-RPC, a result that is not a tool result, a text that
// is not JSON, a result over max_result (and over the bound of one
// message). Each is an unknown outcome named for what came, never a
// crash, a success or a failure; the reconciler then finds the comment
// through the read tool: one effect.
func TestMCPBadAnswersToAWriteAreUnknown(t *testing.T) {
	for _, c := range []struct{ fault, code string }{
		{fakeapi.MCPGarbage, httproute.CodeBadAnswer},
		{fakeapi.MCPWrongShape, httproute.CodeBadAnswer},
		{fakeapi.MCPNotJSON, "response_unparseable"},
		{fakeapi.MCPHuge, httproute.CodeResultTooLarge},
	} {
		t.Run(c.fault, func(t *testing.T) {
			edit := func(b []byte) []byte { return b }
			if c.fault == fakeapi.MCPHuge {
				// Writing and reading 8 MiB under -race on a busy machine can
				// take longer than 2 s: a timeout then ends the call first.
				edit = func(b []byte) []byte { return mutate(t, b, "timeout: 2s", "timeout: 30s") }
			}
			w, api, faults := newMCPE2EData(t, edit)
			if err := fakeapi.InjectMCPFault(faults, "add_issue_comment", c.fault); err != nil {
				t.Fatal(err)
			}
			res := w.execute("bad-"+c.fault, api.UserID(), "7", `{"body":"Build #45 passed"}`)
			i := w.intent(res.IntentID)
			if got := lastOf[*events.OutcomeUnknownData](t, w, i, events.OutcomeUnknown); got.Code != c.code || i.State == fsm.Confirmed {
				t.Fatalf("state %s, unknown code %q (%s), want %q", i.State, got.Code, got.Message, c.code)
			}
			i = w.settle(res.IntentID)
			if api.Effects() != 1 || api.Writes() != 1 {
				t.Fatalf("%d effects, %d writes; history %v", api.Effects(), api.Writes(), w.types(i))
			}
			w.confirmedAs(i, itoa(int(api.Comments()[0].ID)))
		})
	}
}

// TestMCPBadAnswersToAReadAreNamedReadFailures: the read tool answers
// garbage, a result that is not a tool result, a text that is not JSON,
// too much, or nothing: each read fails with its own code, as unknown
// (nothing is concluded from it), and the next read works.
func TestMCPBadAnswersToAReadAreNamedReadFailures(t *testing.T) {
	w, api, faults := newMCPE2E(t)
	c := api.Inject(fakeapi.GitHubComment{Issue: 7, Body: "by hand"})
	a := w.route.Adapter.(*httproute.Adapter).ForIntent(adapter.ReadScope{Account: api.UserID(), ParentExternalID: "7"})
	id := strconv.FormatInt(c.ID, 10)
	for _, f := range []struct{ fault, code string }{
		{fakeapi.MCPGarbage, httproute.CodeBadAnswer},
		{fakeapi.MCPWrongShape, httproute.CodeBadAnswer},
		{fakeapi.MCPNotJSON, "response_unparseable"},
		{fakeapi.MCPHuge, httproute.CodeResultTooLarge},
		{fakeapi.MCPDropReply, httproute.CodeNoAnswer},
	} {
		if err := fakeapi.InjectMCPFault(faults, "get_issue_comment", f.fault); err != nil {
			t.Fatal(err)
		}
		_, err := a.Get(context.Background(), id)
		var ce *adapter.CallError
		if !errors.As(err, &ce) || ce.Code != f.code || ce.Class != adapter.Unknown {
			t.Fatalf("%s: the read answered %v, want an unknown %s", f.fault, err, f.code)
		}
		rec, err := a.Get(context.Background(), id)
		if err != nil || rec.ExternalID != id {
			t.Fatalf("after %s: %+v, %v", f.fault, rec, err)
		}
	}
	if api.Effects() != 0 {
		t.Fatalf("%d effects", api.Effects())
	}
}

// TestMCPRefusalBeforeTheToolRanIsARejection: a JSON-RPC error the
// upstream answers before running the tool (no such tool: invalid
// params) is a definite rejection: nothing was written, and nothing is
// sent again. Arguments that do not fit the tool's schema are refused by
// the go-sdk with an error result before the tool runs, which a rule of
// the route declares a rejection.
func TestMCPRefusalBeforeTheToolRanIsARejection(t *testing.T) {
	for _, c := range []struct{ name, old, new, code string }{
		{"no such tool", "      tool: add_issue_comment\n", "      tool: add_issue_comments\n", "mcp_refused"},
		{"arguments that do not fit", `        issue_number: "{{parent | number}}"` + "\n        body:", `        issue_number: "#{{parent}}"` + "\n        body:", "invalid_arguments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, api := newMCPE2EWith(t, c.old, c.new)
			res := w.execute("refused", api.UserID(), "7", `{"body":"Build #46 passed"}`)
			i := w.settle(res.IntentID)
			got := lastOf[*events.WriteRejectedData](t, w, i, events.WriteRejected)
			if i.State != fsm.Rejected || got.Code != c.code || api.Effects() != 0 || countTypes(w.types(i), events.WriteStarted) != 1 {
				t.Fatalf("state %s, code %q, %d effects; history %v", i.State, got.Code, api.Effects(), w.types(i))
			}
		})
	}
}

// newMCPE2EWith is newMCPE2E over github_mcp.yaml with old replaced by
// new.
func newMCPE2EWith(t *testing.T, old, new string) (*e2e, *fakeapi.GitHubAPI) {
	t.Helper()
	w, api, _ := newMCPE2EData(t, func(b []byte) []byte { return mutate(t, b, old, new) })
	return w, api
}

// pids are the upstream processes started so far (the in-repo server
// appends its pid to faults/pids).
func pids(t *testing.T, faults string) []int {
	b, _ := os.ReadFile(filepath.Join(faults, "pids"))
	var out []int
	for _, l := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// eventually waits until cond holds (10 s at most).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not after 10 s", what)
		}
	}
}

// TestMCPUpstreamThatExitsIsRestarted: the upstream process is killed.
// While it cannot be started again, Ready is false and UpstreamReady
// says that the upstream is down and why; once it can, it is restarted (with backoff) without a call
// asking for it, Ready is nil again, and writes go through.
func TestMCPUpstreamThatExitsIsRestarted(t *testing.T) {
	w, api, faults := newMCPE2E(t)
	a := w.route.Adapter.(*httproute.Adapter)
	ctx := context.Background()
	if err := a.UpstreamReady(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
	first := pids(t, faults)
	if len(first) != 1 {
		t.Fatalf("%d processes started, want 1", len(first))
	}
	refuse := filepath.Join(faults, "refuse_start")
	if err := os.WriteFile(refuse, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(first[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var down error
	eventually(t, "Ready reports the upstream down", func() bool { return !a.Ready() })
	down = a.UpstreamReady(ctx)
	if down == nil {
		t.Fatal("UpstreamReady is nil while Ready is false")
	}
	for _, want := range []string{"github_mcp_comment", "is down", "exited", "next start in"} {
		if !strings.Contains(down.Error(), want) {
			t.Fatalf("ready: %q, want it to say %q", down, want)
		}
	}
	if err := os.Remove(refuse); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the upstream restarted", func() bool { return len(pids(t, faults)) == 2 && a.Ready() })
	if err := a.UpstreamReady(ctx); err != nil {
		t.Fatalf("ready after the restart: %v", err)
	}
	res := w.execute("after-restart", api.UserID(), "7", `{"body":"Build #47 passed"}`)
	if i := w.settle(res.IntentID); i.State != fsm.Confirmed || api.Effects() != 1 || len(pids(t, faults)) != 2 {
		t.Fatalf("state %s, %d effects, %d starts", i.State, api.Effects(), len(pids(t, faults)))
	}
}

// TestMCPRoutesOfAFileShareTheirUpstream: two routes of one file that
// declare the same upstream run one process; closing one route leaves
// it to the other, closing both stops it.
func TestMCPRoutesOfAFileShareTheirUpstream(t *testing.T) {
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken))
	faults := t.TempDir()
	one := string(mutate(t, readExample(t, "github_mcp.yaml"),
		"        GITHUB_API_URL: ${env:GITHUB_API_URL}\n", "        GITHUB_API_URL: ${env:GITHUB_API_URL}\n        GITHUB_MCP_FAULTS: ${env:GITHUB_MCP_FAULTS}\n"))
	k := strings.Index(one, "  - name: github_mcp_comment")
	second := strings.Replace(one[k:], "name: github_mcp_comment", "name: github_mcp_comment_2", 1)
	path := filepath.Join(t.TempDir(), "routes.yaml")
	if err := os.WriteFile(path, []byte(one+second), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GITHUB_MCP_SERVER": githubMCPServer(t), "GITHUB_API_URL": api.URL(), "GITHUB_TOKEN": secretToken, "GITHUB_MCP_FAULTS": faults}
	routes, err := httproute.Load(path, envOf(env))
	if err != nil || len(routes) != 2 {
		t.Fatalf("%d routes: %v", len(routes), err)
	}
	ctx := context.Background()
	a, b := routes[0].Adapter.(*httproute.Adapter), routes[1].Adapter.(*httproute.Adapter)
	for _, r := range []*httproute.Adapter{a, b} {
		if err := r.UpstreamReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ps := pids(t, faults)
	if len(ps) != 1 {
		t.Fatalf("%d processes for two routes of one file, want 1", len(ps))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.UpstreamReady(ctx); err != nil || syscall.Kill(ps[0], 0) != nil {
		t.Fatalf("after one route closed: ready %v, the process is gone", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the process stopped", func() bool { return syscall.Kill(ps[0], 0) != nil })
}
