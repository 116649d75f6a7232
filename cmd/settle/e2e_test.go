package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/node"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/testharness"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// settleBinary builds cmd/settle once per test run: the end-to-end tests
// drive the real binary, as a user would (not in the -short tier).
func settleBinary(t *testing.T) string {
	t.Helper()
	testharness.SkipShort(t, "the settle binary built with -race")
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "settle-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "settle")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// server is one running `settle serve` process.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	stderr *testharness.SyncBuffer
	done   chan error
}

// freeAddr returns a loopback address for a serve the test starts. The
// port comes from below the kernel's ephemeral range, once per test
// process: a port asked of the kernel (":0") and closed again could be
// handed to another test process's server before this serve bound it,
// and the test then talked to a serve with tokens (a 401 in make test).
// testharness uses 20000-32000; these tests use 12000-20000.
func freeAddr(t *testing.T) string {
	t.Helper()
	addrMu.Lock()
	defer addrMu.Unlock()
	const low, high = 12000, 20000
	if addrNext == 0 {
		addrNext = low + (os.Getpid()*53)%(high-low)
	}
	for tries := 0; tries < high-low; tries++ {
		a := "127.0.0.1:" + strconv.Itoa(addrNext)
		if addrNext++; addrNext >= high {
			addrNext = low
		}
		if l, err := net.Listen("tcp", a); err == nil {
			_ = l.Close()
			return a
		}
	}
	t.Fatal("no free port between 12000 and 20000")
	return ""
}

var (
	addrMu   sync.Mutex
	addrNext int
)

func startServe(t *testing.T, dataDir string, api *fakeapi.SocialAPI, extra ...string) *server {
	t.Helper()
	addr := freeAddr(t)
	mode := []string{"--dev"}
	var env []string
	for k := 0; k < len(extra); k++ {
		if extra[k] == "--tokens" {
			mode = nil
		}
		if strings.HasPrefix(extra[k], "ENV:") {
			env = append(env, strings.TrimPrefix(extra[k], "ENV:"))
			extra = append(extra[:k:k], extra[k+1:]...)
			k--
		}
	}
	args := append(append([]string{"serve", "--addr", addr, "--data", dataDir,
		"--routes", "../../examples/routes/social.yaml", "--workers", "2"}, mode...), extra...)
	cmd := exec.Command(settleBinary(t), args...)
	cmd.Env = append(append(os.Environ(), "SOCIAL_BASE_URL="+api.URL(), "SOCIAL_TOKEN="+api.Token()), env...)
	s := &server{t: t, cmd: cmd, url: "http://" + addr, stderr: &testharness.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = s.stderr
	cmd.Stdout = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		select {
		case err := <-s.done:
			t.Fatalf("settle serve exited: %v\n%s", err, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("settle serve not ready in 60s\n%s", s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Fatalf("settle serve exited with %v after SIGTERM\n%s", err, s.stderr.String())
		}
	case <-time.After(90 * time.Second):
		s.t.Fatalf("settle serve did not stop after SIGTERM\n%s", s.stderr.String())
	}
}

type reply struct {
	code   int
	header http.Header
	body   map[string]any
	raw    string
}

func (s *server) call(method, path string, body any) reply {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, r)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return reply{code: resp.StatusCode, header: resp.Header, body: m, raw: string(raw)}
}

func (s *server) waitState(id string, states ...string) reply {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := s.call("GET", "/v1/intents/"+id, nil)
		for _, st := range states {
			if r.code == 200 && r.body["state"] == st {
				return r
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("intent %s stayed %v (%d)\n%s", id, r.body["state"], r.code, s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestServeEndToEndDroppedResponseSettlesWithOneEffect(t *testing.T) {
	t.Parallel() // processes and waits: overlaps the package's other long tests
	api := fakeapi.NewSocialAPI(t)
	s := startServe(t, t.TempDir(), api)
	submit := map[string]any{"route": "social_post", "account": "acct_1", "request_id": "agent-7:post",
		"payload": map[string]any{"body": "hello from the e2e test"}}
	api.Next(fakeapi.CommitThenDrop())
	first := s.call("POST", "/v1/intents", submit)
	if first.code != 201 && first.code != 200 {
		t.Fatalf("submit: %d %s", first.code, first.raw)
	}
	id, _ := first.body["intent_id"].(string)
	if id == "" {
		t.Fatalf("submit answer has no intent_id: %s", first.raw)
	}
	got := s.waitState(id, "confirmed")
	if api.Effects() != 1 || api.Writes() != 1 {
		t.Fatalf("effects %d writes %d", api.Effects(), api.Writes())
	}
	if !strings.Contains(got.raw, "ReadbackPassed") {
		t.Fatalf("history lacks the readback: %s", got.raw)
	}
	// Metrics: one write (its outcome unknown) and one settlement of an
	// unknown outcome, from the reconcilers' wiring; the external calls of
	// the write and of the reads, measured for the node's routes; every
	// handler's requests, /mcp and /readyz included.
	s.call("POST", "/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := s.call("GET", "/metrics", nil)
		if strings.Contains(m.raw, `settle_unknown_settle_duration_seconds_count{result="confirmed",route="social_post"} 1`) &&
			strings.Contains(m.raw, `settle_write_duration_seconds_count{outcome="unknown",route="social_post"} 1`) &&
			strings.Contains(m.raw, `settle_external_calls_total{kind="write",outcome="unknown",route="social_post"} 1`) &&
			strings.Contains(m.raw, `settle_external_calls_total{kind="search",outcome="2xx",route="social_post"}`) &&
			strings.Contains(m.raw, `settle_external_calls_total{kind="readback",outcome="2xx",route="social_post"}`) &&
			strings.Contains(m.raw, `settle_external_call_duration_seconds_count{kind="write",route="social_post"} 1`) &&
			strings.Contains(m.raw, `settle_http_requests_total{code="200",handler="/readyz"}`) &&
			strings.Contains(m.raw, `,handler="/mcp"}`) &&
			strings.Contains(m.raw, `settle_intents{route="social_post",state="confirmed"} 1`) &&
			!strings.Contains(m.raw, "settle_reconcile_latency_seconds") {
			checkReadmeMetrics(t, m.raw)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack the write and settle latencies:\n%s", m.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The same submit again: the stored result, replayed; no write.
	again := s.call("POST", "/v1/intents", submit)
	if again.code >= 300 || again.header.Get("Idempotent-Replayed") != "true" || again.body["state"] != "confirmed" {
		t.Fatalf("repeat: %d replayed=%q %s", again.code, again.header.Get("Idempotent-Replayed"), again.raw)
	}
	// A different payload under the same request id: 422, no write.
	submit["payload"] = map[string]any{"body": "something else"}
	diff := s.call("POST", "/v1/intents", submit)
	if diff.code != 422 || !strings.HasPrefix(diff.header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("different payload: %d %s", diff.code, diff.raw)
	}
	if api.Effects() != 1 || api.Writes() != 1 {
		t.Fatalf("after repeats: effects %d writes %d", api.Effects(), api.Writes())
	}
	s.stop()
	if strings.Contains(s.stderr.String(), api.Token()) {
		t.Fatal("the route's secret token appeared in settle's output")
	}
}

func TestServeSIGTERMDuringBurstLosesNothing(t *testing.T) {
	t.Parallel() // processes and waits: overlaps the package's other long tests
	api := fakeapi.NewSocialAPI(t)
	data := t.TempDir()
	s := startServe(t, data, api)
	const n = 40
	// Some writes are slow, so SIGTERM finds them in flight.
	for k := 0; k < n; k += 4 {
		api.Next(fakeapi.Delay(300*time.Millisecond), fakeapi.CommitThenDrop())
	}
	var wg sync.WaitGroup
	for k := 0; k < n; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			body, _ := json.Marshal(map[string]any{"route": "social_post", "account": "acct_1",
				"request_id": fmt.Sprintf("burst:%d", k), "payload": map[string]any{"body": fmt.Sprintf("burst post %d", k)}})
			resp, err := http.Post(s.url+"/v1/intents", "application/json", bytes.NewReader(body))
			if err == nil {
				resp.Body.Close()
			}
		}(k)
		if k == n/2 {
			// SIGTERM once writes are under way (sent at once, it could
			// beat every request to the listener: nothing in flight).
			go func() {
				for deadline := time.Now().Add(30 * time.Second); api.Writes() < n/8 && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
				_ = s.cmd.Process.Signal(syscall.SIGTERM)
			}()
		}
	}
	wg.Wait()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, s.stderr.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	// Restart: the reconcilers settle whatever the burst left unknown.
	s2 := startServe(t, data, api)
	list := s2.call("GET", "/v1/intents?limit=200", nil)
	items, _ := list.body["items"].([]any)
	for _, it := range items {
		id := it.(map[string]any)["intent_id"].(string)
		s2.waitState(id, "confirmed", "manual_action", "verifying", "rejected")
	}
	s2.stop()
	// A clean stop leaves the views caught up with the log (the high-water
	// mark): a loss found later is named by intent and version.
	hw, err := node.ReadHighWater(filepath.Join(data, node.HighWaterFile))
	if err != nil {
		t.Fatal(err)
	}
	known, err := projector.OpenKnown(t.Context(), filepath.Join(data, node.ViewsFile))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := known.Checkpoint(t.Context())
	known.Close()
	if err != nil || cp != hw.LastSeq {
		t.Fatalf("after a clean stop the views' checkpoint is %d (%v), the high-water mark %d", cp, err, hw.LastSeq)
	}
	// The audit replays the log: it passes, and no intent wrote twice.
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb}
	if err := m.Run(t.Context(), []string{"audit", "--data", data}); err != nil {
		t.Fatalf("audit after the burst: %v\n%s\n%s", err, out.String(), errb.String())
	}
	for _, p := range api.WriteLog() {
		if c := api.EffectsForKey(p.IdempotencyKey); c > 1 {
			t.Fatalf("key %s has %d effects", p.IdempotencyKey, c)
		}
	}
	if len(items) == 0 {
		t.Fatalf("no intent on the log: SIGTERM found nothing in flight")
	}
	t.Logf("burst: %d submits, %d intents on the log, %d writes, %d effects", n, len(items), api.Writes(), api.Effects())
}

func TestRoutesCheckNamesRouteAndField(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "routes.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nroutes:\n  - name: broken\n    base_url: http://127.0.0.1:1\n    write: {method: POST, url: \"{{nope}}\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb}
	err := m.Run(t.Context(), []string{"routes", "check", bad})
	if err == nil || !strings.Contains(errb.String(), "route broken: write.url") {
		t.Fatalf("routes check: %v\n%s", err, errb.String())
	}
	t.Setenv("SOCIAL_BASE_URL", "http://127.0.0.1:9")
	t.Setenv("SOCIAL_TOKEN", "x")
	out.Reset()
	if err := m.Run(t.Context(), []string{"routes", "check", "../../examples/routes/social.yaml"}); err != nil || !strings.Contains(out.String(), "OK") {
		t.Fatalf("example routes: %v %s", err, out.String())
	}
}

// Two settle processes on one NATS server: their reconcilers share the
// stream, every step of an intent is taken by one of them (CAS), and every
// lost response settles with exactly one effect.
func TestTwoProcessesShareTheLog(t *testing.T) {
	t.Parallel() // processes and waits: overlaps the package's other long tests
	node := testharness.StartNode(t)
	api := fakeapi.NewSocialAPI(t)
	a := startServe(t, t.TempDir(), api, "--nats-url", node.URL())
	b := startServe(t, t.TempDir(), api, "--nats-url", node.URL())
	const n = 20
	var ids []string
	for k := 0; k < n; k++ {
		api.Next(fakeapi.CommitThenDrop())
		srv := a
		if k%2 == 1 {
			srv = b
		}
		r := srv.call("POST", "/v1/intents", map[string]any{"route": "social_post", "account": "acct_1",
			"request_id": fmt.Sprintf("two:%d", k), "payload": map[string]any{"body": fmt.Sprintf("two processes %d", k)}})
		if r.code != 201 {
			t.Fatalf("submit %d: %d %s", k, r.code, r.raw)
		}
		ids = append(ids, r.body["intent_id"].(string))
	}
	actors := map[string]bool{}
	for _, id := range ids {
		r := a.waitState(id, "confirmed")
		for _, h := range r.body["history"].([]any) {
			e := h.(map[string]any)
			if e["type"] == "ReconcileStarted" || e["type"] == "ReadbackPassed" {
				actors[e["actor"].(string)] = true
			}
		}
	}
	if api.Effects() != n || api.Writes() != n {
		t.Fatalf("effects %d writes %d, want %d", api.Effects(), api.Writes(), n)
	}
	a.stop()
	b.stop()
	t.Logf("reconciling workers seen: %v", actors)
}

// The CLI over the API: list and show a manual_action intent, then resolve
// it; the state changes on the log with the operator recorded.
func TestCLIListShowResolve(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	s := startServe(t, t.TempDir(), api)
	api.Next(fakeapi.Duplicate().Dropped())
	r := s.call("POST", "/v1/intents", map[string]any{"route": "social_post", "account": "acct_1",
		"request_id": "cli:1", "payload": map[string]any{"body": "posted twice by the API"}})
	id, _ := r.body["intent_id"].(string)
	s.waitState(id, "manual_action")
	run := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errb}
		err := m.Run(t.Context(), append(args, "--api", s.url))
		return out.String() + errb.String(), err
	}
	// Wait for the views to catch up with the log.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := run("intents", "list", "--state", "manual_action")
		if err == nil && strings.Contains(out, id) && strings.Contains(out, "duplicate_exact_matches") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err := run("intents", "show", id)
	if err != nil || !strings.Contains(out, "manual_action") || !strings.Contains(out, "ManualActionRequired") ||
		!strings.Contains(out, "reason:          duplicate_exact_matches") {
		t.Fatalf("show: %v\n%s", err, out)
	}
	out, err = run("intents", "show", id, "--json")
	var js map[string]any
	if err != nil || json.Unmarshal([]byte(strings.TrimSpace(out)), &js) != nil || js["intent_id"] != id {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	// An action the state forbids is refused with the API's reason.
	if out, err := run("approve", id, "--reason", "why not", "--operator", "alice"); err == nil {
		t.Fatalf("approve on manual_action succeeded: %s", out)
	}
	out, err = run("resolve", id, "--resolution", "abandoned", "--reason", "duplicates cleaned up by hand", "--operator", "alice")
	if err != nil || !strings.Contains(out, "abandoned") {
		t.Fatalf("resolve: %v\n%s", err, out)
	}
	got := s.call("GET", "/v1/intents/"+id, nil)
	if got.body["state"] != "abandoned" || !strings.Contains(got.raw, `"by":"alice"`) {
		t.Fatalf("after resolve: %s", got.raw)
	}
	// intents show names who decided and why.
	out, err = run("intents", "show", id)
	if err != nil || !strings.Contains(out, `operator="alice" reason="duplicates cleaned up by hand"`) ||
		!strings.Contains(out, `reason="duplicate_exact_matches"`) {
		t.Fatalf("show after resolve: %v\n%s", err, out)
	}
	if api.Writes() != 1 {
		t.Fatalf("writes %d", api.Writes())
	}
	// A rejected intent: the list's REASON is its rejection code, and show
	// names the attempt's outcome and code and the last error, as --json has.
	api.Next(fakeapi.Status(http.StatusUnprocessableEntity))
	rj := s.call("POST", "/v1/intents", map[string]any{"route": "social_post", "account": "acct_1",
		"request_id": "cli:2", "payload": map[string]any{"body": "refused by the API"}})
	rid, _ := rj.body["intent_id"].(string)
	s.waitState(rid, "rejected")
	detail := s.call("GET", "/v1/intents/"+rid, nil)
	atts, _ := detail.body["attempt_history"].([]any)
	if len(atts) != 1 {
		t.Fatalf("attempts: %s", detail.raw)
	}
	code, _ := atts[0].(map[string]any)["code"].(string)
	if code == "" {
		t.Fatalf("the rejection has no code: %s", detail.raw)
	}
	for {
		out, err = run("intents", "list", "--state", "rejected")
		if err == nil && strings.Contains(out, rid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list rejected: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, rid) {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) == 0 || f[len(f)-1] != code {
		t.Fatalf("list: the rejected row's REASON is not %q:\n%s", code, out)
	}
	out, err = run("intents", "show", rid)
	if err != nil || !strings.Contains(out, "codes:           1 WriteRejected "+code) || !strings.Contains(out, "last error:      "+code) {
		t.Fatalf("show rejected: %v\n%s", err, out)
	}
	s.stop()
}

// Without --dev, serve needs --tokens; requests without or with a wrong
// token are refused, a token of the right scope is served, and neither the
// token nor the route's secret reaches the process output.
func TestServeWithTokens(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	secret := "agent-token-0123456789abcdef0123456789"
	if err := os.WriteFile(tokens, []byte(`{"tokens":[{"name":"agent","secret_env":"AGENT_TOKEN","scopes":["submit","read"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, filepath.Join(dir, "data"), api, "--tokens", tokens, "ENV:AGENT_TOKEN="+secret)
	get := func(token string) int {
		req, _ := http.NewRequest("GET", s.url+"/v1/intents", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get(""); c != 401 {
		t.Fatalf("no token: %d", c)
	}
	if c := get("wrong-token-0123456789abcdef0123456789"); c != 401 {
		t.Fatalf("wrong token: %d", c)
	}
	if c := get(secret); c != 200 {
		t.Fatalf("good token: %d", c)
	}
	s.stop()
	out := s.stderr.String()
	if strings.Contains(out, secret) || strings.Contains(out, api.Token()) {
		t.Fatal("a secret appeared in settle's output")
	}
}
