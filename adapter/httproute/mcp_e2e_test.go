package httproute_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/testharness"
)

var (
	toolsMu  sync.Mutex
	toolBins = map[string]string{}
)

// buildTool builds fakeapi/cmd/<name> once per test binary into the
// repository's .cache/test-bin.
func buildTool(t *testing.T, name string) string {
	t.Helper()
	toolsMu.Lock()
	defer toolsMu.Unlock()
	if bin, ok := toolBins[name]; ok {
		return bin
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", ".cache", "test-bin"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/settle-dev/settle/fakeapi/cmd/"+name).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v: %s", name, err, out)
	}
	toolBins[name] = bin
	return bin
}

// githubMCPServer is the in-repo GitHub-shaped MCP server's binary.
func githubMCPServer(t *testing.T) string { return buildTool(t, "githubmcp") }

// newMCPE2E is the e2e harness over examples/routes/github_mcp.yaml: the
// route starts the in-repo GitHub-shaped MCP server (a child process over
// stdio) in front of the GitHub fake; faults go to the returned dir.
func newMCPE2E(t *testing.T) (*e2e, *fakeapi.GitHubAPI, string) {
	return newMCPE2EData(t, func(b []byte) []byte { return b })
}

// newMCPE2EData is newMCPE2E over the file as edit changes it.
func newMCPE2EData(t *testing.T, edit func([]byte) []byte) (*e2e, *fakeapi.GitHubAPI, string) {
	t.Helper()
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now))
	faults := t.TempDir()
	data := edit(mutate(t, readExample(t, "github_mcp.yaml"), "timeout: 10s", "timeout: 2s",
		"        GITHUB_API_URL: ${env:GITHUB_API_URL}\n", "        GITHUB_API_URL: ${env:GITHUB_API_URL}\n        GITHUB_MCP_FAULTS: ${env:GITHUB_MCP_FAULTS}\n"))
	env := map[string]string{"GITHUB_MCP_SERVER": githubMCPServer(t), "GITHUB_API_URL": api.URL(), "GITHUB_TOKEN": secretToken, "GITHUB_MCP_FAULTS": faults}
	w := newE2EData(t, data, env, clock)
	t.Cleanup(func() { _ = w.route.Adapter.(*httproute.Adapter).Close() })
	return w, api, faults
}

// TestMCPLostReplySettlesThroughTheReadTool: a write through settle to
// the upstream MCP server runs the tool (the comment is posted) and its
// reply never comes. The attempt is unknown, never retried blind: the
// reconciler lists the issue's comments through the upstream's read tool,
// finds the comment by its marker, and confirms it; the GitHub fake
// behind the server shows exactly one effect.
func TestMCPLostReplySettlesThroughTheReadTool(t *testing.T) {
	w, api, faults := newMCPE2E(t)
	if err := fakeapi.InjectMCPFault(faults, "add_issue_comment", fakeapi.MCPDropReply); err != nil {
		t.Fatal(err)
	}
	res := w.execute("deploy-1", api.UserID(), "7", `{"body":"Build #42 passed"}`)
	i := w.intent(res.IntentID)
	ts := w.types(i)
	if i.State == fsm.Confirmed || countTypes(ts, events.OutcomeUnknown) != 1 {
		t.Fatalf("after the lost reply: state %s, history %v; want one unknown write", i.State, ts)
	}
	i = w.settle(res.IntentID)
	ts = w.types(i)
	if api.Effects() != 1 || api.Writes() != 1 || countTypes(ts, events.WriteStarted) != 1 || countTypes(ts, events.CandidateFound) != 1 {
		t.Fatalf("%d effects, %d writes; history %v", api.Effects(), api.Writes(), ts)
	}
	w.confirmedAs(i, itoa(int(api.Comments()[0].ID)))
}

// TestMCPCrashMidCallRestartsTheUpstream: the upstream process posts the
// comment and dies before answering. The write is unknown; the next read
// starts the server again, finds the comment, and confirms it: one
// effect.
func TestMCPCrashMidCallRestartsTheUpstream(t *testing.T) {
	w, api, faults := newMCPE2E(t)
	if err := fakeapi.InjectMCPFault(faults, "add_issue_comment", fakeapi.MCPCrash); err != nil {
		t.Fatal(err)
	}
	res := w.execute("deploy-2", api.UserID(), "7", `{"body":"Build #43 passed"}`)
	i := w.settle(res.IntentID)
	ts := w.types(i)
	if api.Effects() != 1 || countTypes(ts, events.OutcomeUnknown) != 1 {
		t.Fatalf("%d effects; history %v", api.Effects(), ts)
	}
	w.confirmedAs(i, itoa(int(api.Comments()[0].ID)))
}

// TestMCPToolErrorByRuleIsARejection: the API refuses the comment (the
// issue does not exist): the server answers an error result whose text a
// rule of the route classifies as rejected; nothing was posted.
func TestMCPToolErrorByRuleIsARejection(t *testing.T) {
	w, api, _ := newMCPE2E(t)
	res := w.execute("deploy-3", api.UserID(), "1000", `{"body":"no such issue"}`)
	i := w.intent(res.IntentID)
	if i.State != fsm.Rejected || api.Effects() != 0 {
		t.Fatalf("state %s, %d effects; history %v", i.State, api.Effects(), w.types(i))
	}
}

// TestMCPStreamableHTTPLostReply: the same lost reply with the upstream
// served over streamable HTTP (mcp.url, its token in mcp.headers from the
// environment): unknown, then confirmed through the read tool, one
// effect; every tool call names the protocol version the session
// negotiated (MCP-Protocol-Version).
func TestMCPStreamableHTTPLostReply(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now))
	faults := t.TempDir()
	const upstreamToken = "upstream-token-7f3e9a1c5b2d"
	srv := fakeapi.NewGitHubMCPServer(fakeapi.GitHubMCPConfig{APIURL: api.URL(), Token: secretToken, FaultDir: faults})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	var mu sync.Mutex
	versions := map[string]int{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+upstreamToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte(`"method":"tools/call"`)) {
			mu.Lock()
			versions[r.Header.Get("Mcp-Protocol-Version")]++
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	data := mutate(t, readExample(t, "github_mcp.yaml"), "timeout: 10s", "timeout: 2s",
		"      command: ${env:GITHUB_MCP_SERVER}\n      args: [stdio]\n      env:\n        GITHUB_PERSONAL_ACCESS_TOKEN: ${env:GITHUB_TOKEN}\n        GITHUB_API_URL: ${env:GITHUB_API_URL}\n",
		"      url: ${env:GITHUB_MCP_URL}\n      headers:\n        Authorization: Bearer ${env:GITHUB_MCP_TOKEN}\n")
	w := newE2EData(t, data, map[string]string{"GITHUB_MCP_URL": hs.URL, "GITHUB_MCP_TOKEN": upstreamToken}, clock)
	t.Cleanup(func() { _ = w.route.Adapter.(*httproute.Adapter).Close() })
	if err := fakeapi.InjectMCPFault(faults, "add_issue_comment", fakeapi.MCPDropReply); err != nil {
		t.Fatal(err)
	}
	res := w.execute("deploy-4", api.UserID(), "7", `{"body":"Build #44 passed"}`)
	i := w.settle(res.IntentID)
	ts := w.types(i)
	if api.Effects() != 1 || countTypes(ts, events.OutcomeUnknown) != 1 || countTypes(ts, events.WriteStarted) != 1 {
		t.Fatalf("%d effects; history %v", api.Effects(), ts)
	}
	w.confirmedAs(i, itoa(int(api.Comments()[0].ID)))
	mu.Lock()
	defer mu.Unlock()
	if len(versions) != 1 || versions[""] != 0 {
		t.Fatalf("MCP-Protocol-Version of the tool calls: %v", versions)
	}
}

// TestMCPStreamableHTTPKeepsAConnectionPerConcurrentCall: two waves of 16
// concurrent writes to a streamable-HTTP upstream (each tool call held
// until all 16 are in flight) dial (almost) no connection in the second
// wave: the upstream's transport keeps one per concurrent call, where
// http.DefaultTransport would keep 2 and dial 14 again.
func TestMCPStreamableHTTPKeepsAConnectionPerConcurrentCall(t *testing.T) {
	const n = 16
	var dials, calls atomic.Int64
	var wave atomic.Pointer[chan struct{}]
	done := make(chan struct{})
	defer close(done)
	w, api := streamableE2E(t, func(w http.ResponseWriter, body []byte) bool {
		ch := *wave.Load()
		if calls.Add(1)%n == 0 {
			close(ch)
		}
		select {
		case <-ch:
		case <-done:
		}
		return false
	}, func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			dials.Add(1)
		}
	})
	var after []int64
	for k := range 2 {
		ch := make(chan struct{})
		wave.Store(&ch)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for j := range n {
			wg.Go(func() {
				req := producerRequest(w, fmt.Sprintf("wave-%d-%d", k, j), api.UserID(), "7", fmt.Sprintf(`{"body":"comment %d.%d"}`, k, j))
				res, err := w.prod.Execute(context.Background(), req)
				if err == nil && res.State != fsm.Verifying {
					err = fmt.Errorf("%s: state %s", req.RequestID, res.State)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		after = append(after, dials.Load())
	}
	if api.Effects() != 2*n {
		t.Fatalf("%d effects, want %d", api.Effects(), 2*n)
	}
	// The go-sdk client answers a call once it has read the JSON-RPC
	// response and closes the body just after, so a connection or two may
	// not be back in the pool when the next wave starts; without a pool
	// per concurrent call the second wave dials n-2 again.
	if after[0] > n+1 || after[1]-after[0] > 2 {
		t.Fatalf("connections dialed after each wave of %d concurrent calls: %v, want the first wave's (at most %d) kept for the second (at most 2 more)", n, after, n+1)
	}
}

// streamableE2E is the github_mcp.yaml route over streamable HTTP to the
// in-repo server in front of the GitHub fake. Each tools/call request is
// given to onCall first (its body read), which answers it itself by
// returning true; connState sees the server's connections.
func streamableE2E(t *testing.T, onCall func(w http.ResponseWriter, body []byte) bool, connState func(net.Conn, http.ConnState)) (*e2e, *fakeapi.GitHubAPI) {
	t.Helper()
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now))
	srv := fakeapi.NewGitHubMCPServer(fakeapi.GitHubMCPConfig{APIURL: api.URL(), Token: secretToken})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte(`"method":"tools/call"`)) && onCall(w, b) {
			return
		}
		h.ServeHTTP(w, r)
	}))
	hs.Config.ConnState = connState
	hs.Start()
	t.Cleanup(hs.Close)
	data := mutate(t, readExample(t, "github_mcp.yaml"),
		"      command: ${env:GITHUB_MCP_SERVER}\n      args: [stdio]\n      env:\n        GITHUB_PERSONAL_ACCESS_TOKEN: ${env:GITHUB_TOKEN}\n        GITHUB_API_URL: ${env:GITHUB_API_URL}\n",
		"      url: ${env:GITHUB_MCP_URL}\n")
	w := newE2EData(t, data, map[string]string{"GITHUB_MCP_URL": hs.URL}, clock)
	t.Cleanup(func() { _ = w.route.Adapter.(*httproute.Adapter).Close() })
	return w, api
}

// TestMCPProtocolRefusalIsARejection: an upstream that refuses a tool
// call at its transport, before dispatching it (the 2026-07-28
// specification's header mismatch, missing client capabilities and
// unsupported protocol version: HTTP 400 with a JSON-RPC error), wrote
// nothing: the write is rejected (mcp_refused), not unknown, and is not
// sent again.
func TestMCPProtocolRefusalIsARejection(t *testing.T) {
	for _, code := range []int64{sdk.CodeHeaderMismatch, sdk.CodeMissingRequiredClientCapabilities, sdk.CodeUnsupportedProtocolVersion} {
		t.Run(strconv.FormatInt(code, 10), func(t *testing.T) {
			var refused atomic.Int64
			w, api := streamableE2E(t, func(rw http.ResponseWriter, body []byte) bool {
				var req struct {
					ID json.RawMessage `json:"id"`
				}
				_ = json.Unmarshal(body, &req)
				refused.Add(1)
				rw.Header().Set("Content-Type", "application/json")
				rw.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(rw, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"refused by the transport"}}`, req.ID, code)
				return true
			}, nil)
			res := w.execute("refused", api.UserID(), "7", `{"body":"Build #47 passed"}`)
			i := w.settle(res.IntentID)
			got := lastOf[*events.WriteRejectedData](t, w, i, events.WriteRejected)
			if i.State != fsm.Rejected || got.Code != "mcp_refused" || api.Effects() != 0 || countTypes(w.types(i), events.WriteStarted) != 1 || refused.Load() != 1 {
				t.Fatalf("state %s, code %q, %d effects, %d calls refused; history %v", i.State, got.Code, api.Effects(), refused.Load(), w.types(i))
			}
		})
	}
}

// TestMCPProbe: a probe of an MCP route lists the upstream's tools, shows
// the input schema of each tool the route names, and reads one page of
// the search with the read tool; nothing is written.
func TestMCPProbe(t *testing.T) {
	w, api, _ := newMCPE2E(t)
	api.Inject(fakeapi.GitHubComment{Issue: 7, Body: "by hand"})
	a := w.route.Adapter.(*httproute.Adapter)
	in, err := a.Inspect(context.Background(), httproute.InspectOptions{Account: api.UserID(), Parent: "7"})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	in.WriteText(&b, a)
	tools := in.Tools
	if tools == nil || tools.Err != "" || tools.Listed != 3 || len(tools.Named) != 3 || !tools.Named[0].Found || tools.Named[0].ReadOnly ||
		!tools.Named[1].ReadOnly || !strings.Contains(tools.Named[0].InputSchema, "issue_number") {
		t.Fatalf("tools %+v\n%s", tools, b.String())
	}
	if in.Search == nil || in.Search.Err != "" || len(in.Search.Records) != 1 || api.Effects() != 0 {
		t.Fatalf("search %+v, %d effects\n%s", in.Search, api.Effects(), b.String())
	}
	if strings.Contains(b.String(), secretToken) {
		t.Fatalf("the probe shows the token:\n%s", b.String())
	}
}
