package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	_ "modernc.org/sqlite"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// runBinary runs the settle binary to completion (bounded) and returns its
// exit code and output.
func runBinary(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, settleBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("settle %v: %v\n%s", args, err, out)
	return -1, ""
}

func (s *server) pid() int { return s.cmd.Process.Pid }

func (s *server) callAs(token, method, path string, body any, hdr ...string) reply {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, r)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
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

// One process owns a data directory: a second serve and an offline audit
// or views rebuild on a live directory exit non-zero naming the holder's
// pid; the directory is private; after serve stops, audit takes the same
// --data serve was given.
func TestOneProcessOwnsADataDir(t *testing.T) {
	t.Parallel() // processes and waits: overlaps the package's other long tests
	api := fakeapi.NewSocialAPI(t)
	data := filepath.Join(t.TempDir(), "data")
	s := startServe(t, data, api)
	env := []string{"SOCIAL_BASE_URL=" + api.URL(), "SOCIAL_TOKEN=" + api.Token()}
	holder := "pid " + strconv.Itoa(s.pid())

	code, out := runBinary(t, env, "serve", "--dev", "--addr", freeAddr(t), "--data", data, "--routes", "../../examples/routes/social.yaml")
	if code == 0 || !strings.Contains(out, "data directory in use") || !strings.Contains(out, holder) || !strings.Contains(out, "hint:") {
		t.Fatalf("second serve on a live data dir: exit %d\n%s", code, out)
	}
	code, out = runBinary(t, nil, "audit", "--data", data)
	if code == 0 || !strings.Contains(out, holder) {
		t.Fatalf("audit on a live data dir: exit %d\n%s", code, out)
	}
	code, out = runBinary(t, nil, "views", "rebuild", "--data", data)
	if code == 0 || !strings.Contains(out, holder) {
		t.Fatalf("views rebuild on a live data dir: exit %d\n%s", code, out)
	}
	for path, want := range map[string]os.FileMode{data: 0o700, filepath.Join(data, "views.db"): 0o600, filepath.Join(data, "settle.lock"): 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s is %o, want %o", path, st.Mode().Perm(), want)
		}
	}

	r := s.call("POST", "/v1/intents", map[string]any{"route": "social_post", "account": "acct_1", "request_id": "owner:1",
		"payload": map[string]any{"body": "one owner"}})
	if r.code != 201 {
		t.Fatalf("submit: %d %s", r.code, r.raw)
	}
	s.waitState(r.body["intent_id"].(string), "confirmed")
	s.stop()
	code, out = runBinary(t, nil, "audit", "--data", data)
	if code != 0 || !strings.Contains(out, "result: OK") || !strings.Contains(out, "1 intents") {
		t.Fatalf("audit --data after serve stopped: exit %d\n%s", code, out)
	}
	// The store directory of older instructions is still understood.
	code, out = runBinary(t, nil, "audit", "--data", filepath.Join(data, "jetstream"))
	if code != 0 || !strings.Contains(out, "result: OK") {
		t.Fatalf("audit --data DIR/jetstream: exit %d\n%s", code, out)
	}
	code, out = runBinary(t, nil, "audit", "--data", t.TempDir())
	if code == 0 || !strings.Contains(out, "not a settle data directory") {
		t.Fatalf("audit of an empty dir: exit %d\n%s", code, out)
	}
	if api.Effects() != 1 {
		t.Fatalf("effects %d", api.Effects())
	}
}

// Views that do not match the stream are rebuilt: explicitly with settle
// views rebuild, and by serve itself (with a log line) instead of refusing
// to start.
func TestViewsRebuild(t *testing.T) {
	t.Parallel() // processes and waits: overlaps the package's other long tests
	api := fakeapi.NewSocialAPI(t)
	data := filepath.Join(t.TempDir(), "data")
	s := startServe(t, data, api)
	var ids []string
	for k := 0; k < 2; k++ {
		r := s.call("POST", "/v1/intents", map[string]any{"route": "social_post", "account": "acct_1", "request_id": fmt.Sprintf("views:%d", k),
			"payload": map[string]any{"body": fmt.Sprintf("views %d", k)}})
		if r.code != 201 {
			t.Fatalf("submit: %d %s", r.code, r.raw)
		}
		ids = append(ids, r.body["intent_id"].(string))
		s.waitState(ids[k], "confirmed")
	}
	s.stop()

	code, out := runBinary(t, nil, "views", "rebuild", "--data", data)
	if code != 0 || !strings.Contains(out, "views rebuilt") || !strings.Contains(out, "2 intent(s)") {
		t.Fatalf("views rebuild: exit %d\n%s", code, out)
	}
	if m, _ := filepath.Glob(filepath.Join(data, "views.db.stale-*")); len(m) == 0 {
		t.Fatal("the old views were not kept aside")
	}

	// Views of another schema version: serve rebuilds them and says so.
	db, err := sql.Open("sqlite", filepath.Join(data, "views.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE meta SET value = 'settle.projector/v0' WHERE key = 'schema'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s2 := startServe(t, data, api)
	if !strings.Contains(s2.stderr.String(), "views do not match the stream: rebuilding them from the log") {
		t.Fatalf("no rebuild line:\n%s", s2.stderr.String())
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		list := s2.call("GET", "/v1/intents?state=confirmed", nil)
		if strings.Contains(list.raw, ids[0]) && strings.Contains(list.raw, ids[1]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rebuilt views lack the intents: %s", list.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s2.stop()
}

// Keys are scoped per tenant and account, and a replay is shown only to a
// token that may read the intent — with the real binary and a token file.
func TestReplayScopeWithTheBinary(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	secrets := map[string]string{"ADMIN_T": "admin-secret-0123456789abcdef", "SUBMIT_T": "submit-secret-0123456789abcdef",
		"ACCT1_T": "acct1-secret-0123456789abcdef", "ACME_T": "acme-secret-0123456789abcdef"}
	if err := os.WriteFile(tokens, []byte(`{"tokens":[
		{"name":"admin","secret_env":"ADMIN_T","scopes":["submit","read","operate"]},
		{"name":"submitter","secret_env":"SUBMIT_T","scopes":["submit"]},
		{"name":"acct1","secret_env":"ACCT1_T","scopes":["submit","read"],"accounts":["acct_1"],"routes":["social_post"]},
		{"name":"acme","secret_env":"ACME_T","tenant":"acme","scopes":["submit","read"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	extra := []string{"--tokens", tokens}
	for k, v := range secrets {
		extra = append(extra, "ENV:"+k+"="+v)
	}
	s := startServe(t, filepath.Join(dir, "data"), api, extra...)
	body := map[string]any{"route": "social_post", "account": "acct_1", "payload": map[string]any{"body": "the admin's post"}}
	key := []string{"Idempotency-Key", `"shared:1"`}
	first := s.callAs(secrets["ADMIN_T"], "POST", "/v1/intents", body, key...)
	if first.code != 201 {
		t.Fatalf("admin: %d %s", first.code, first.raw)
	}
	id := first.body["intent_id"].(string)

	refused := s.callAs(secrets["SUBMIT_T"], "POST", "/v1/intents", body, key...)
	if refused.code != 403 || strings.Contains(refused.raw, id) || strings.Contains(refused.raw, "the admin's post") ||
		refused.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("submit-only replay: %d %s", refused.code, refused.raw)
	}
	replay := s.callAs(secrets["ACCT1_T"], "POST", "/v1/intents", body, key...)
	if replay.code != 200 || replay.header.Get("Idempotent-Replayed") != "true" || replay.body["intent_id"] != id {
		t.Fatalf("replay with read access: %d %s", replay.code, replay.raw)
	}
	// The same key in another tenant and for another account: new intents.
	acme := s.callAs(secrets["ACME_T"], "POST", "/v1/intents", body, key...)
	other := s.callAs(secrets["ADMIN_T"], "POST", "/v1/intents", map[string]any{"route": "social_post", "account": "acct_2",
		"payload": map[string]any{"body": "another account"}}, key...)
	if acme.code != 201 || other.code != 201 || acme.body["intent_id"] == id || other.body["intent_id"] == id {
		t.Fatalf("scoped keys: acme %d %s; other account %d %s", acme.code, acme.raw, other.code, other.raw)
	}
	if g := s.callAs(secrets["ACME_T"], "GET", "/v1/intents/"+id, nil); g.code != 404 {
		t.Fatalf("another tenant's intent: %d %s", g.code, g.raw)
	}
	if api.Writes() != 3 {
		t.Fatalf("writes %d, want 3", api.Writes())
	}
	s.stop()
}

// serve --nats-listen exposes the embedded server to downstream readers:
// the downstream example announces a confirmed receipt from it; readers
// may not publish on settle's subjects; off loopback a password is
// required.
func TestNATSListenServesDownstreamReaders(t *testing.T) {
	t.Parallel() // processes and waits: overlaps the package's other long tests
	api := fakeapi.NewSocialAPI(t)
	s := startServe(t, filepath.Join(t.TempDir(), "data"), api, "--nats-listen", "127.0.0.1:0")
	m := regexp.MustCompile(`NATS for downstream readers: (nats://[0-9.:]+)`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("no NATS URL printed:\n%s", s.stderr.String())
	}
	natsURL := m[1]

	// The downstream example, built and run as a user would.
	bin := filepath.Join(t.TempDir(), "downstream")
	if out, err := exec.Command("go", "build", "-race", "-o", bin, "../../examples/downstream").CombinedOutput(); err != nil {
		t.Fatalf("build downstream: %v\n%s", err, out)
	}
	// No --db: the database goes to the user cache directory, not the
	// working directory.
	cache, cwd := t.TempDir(), t.TempDir()
	ds := exec.Command(bin, "--nats-url", natsURL, "--route", "social_post")
	ds.Dir, ds.Env = cwd, append(os.Environ(), "XDG_CACHE_HOME="+cache)
	dsOut := &testharness.SyncBuffer{}
	ds.Stdout, ds.Stderr = dsOut, dsOut
	if err := ds.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ds.Process.Kill(); _ = ds.Wait() })

	r := s.call("POST", "/v1/intents", map[string]any{"route": "social_post", "account": "acct_1", "request_id": "down:1",
		"payload": map[string]any{"body": "for downstream"}})
	if r.code != 201 {
		t.Fatalf("submit: %d %s", r.code, r.raw)
	}
	id := r.body["intent_id"].(string)
	s.waitState(id, "confirmed")
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(dsOut.String(), "announced "+id) {
		if time.Now().After(deadline) {
			t.Fatalf("downstream did not announce %s:\n%s", id, dsOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	if left, _ := os.ReadDir(cwd); len(left) != 0 {
		t.Errorf("the downstream example wrote into its working directory: %v", left)
	}
	if _, err := os.Stat(filepath.Join(cache, "settle-examples", "downstream.db")); err != nil {
		t.Errorf("the downstream example's default database: %v", err)
	}

	// A reader reads, and may not write.
	js := testharness.JetStreamOf(t)(nats.Connect(natsURL, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "SETTLE_INTENTS")
	if err != nil {
		t.Fatalf("stream info as a reader: %v", err)
	}
	if st.CachedInfo().State.Msgs < 3 { // IntentStarted, WriteSucceeded, ReadbackPassed
		t.Fatalf("stream holds %d messages", st.CachedInfo().State.Msgs)
	}
	if _, err := js.Publish(ctx, "settle.intents.social_post."+id, []byte(`{}`)); err == nil {
		t.Fatal("a reader published on an intent's subject")
	}
	if err := js.DeleteStream(ctx, "SETTLE_INTENTS"); err == nil {
		t.Fatal("a reader deleted the stream")
	}
	s.stop()

	// Off loopback, readers must authenticate: refused without a password.
	code, out := runBinary(t, []string{"SOCIAL_BASE_URL=" + api.URL(), "SOCIAL_TOKEN=" + api.Token(), "SETTLE_NATS_PASSWORD="},
		"serve", "--dev", "--addr", freeAddr(t), "--data", t.TempDir(), "--routes", "../../examples/routes/social.yaml", "--nats-listen", "0.0.0.0:0")
	if code == 0 || !strings.Contains(out, "readers must authenticate") {
		t.Fatalf("non-loopback listen without a password: exit %d\n%s", code, out)
	}
	// With a password, a client without it is refused and one with it reads.
	pw := "reader-password-0123456789"
	s2 := startServe(t, filepath.Join(t.TempDir(), "data"), api, "--nats-listen", "127.0.0.1:0", "ENV:SETTLE_NATS_PASSWORD="+pw)
	m = regexp.MustCompile(`NATS for downstream readers: (nats://[0-9.:]+)`).FindStringSubmatch(s2.stderr.String())
	if m == nil {
		t.Fatalf("no NATS URL printed:\n%s", s2.stderr.String())
	}
	if c, err := nats.Connect(m[1]); err == nil {
		c.Close()
		t.Fatal("connected without the password")
	}
	c, err := nats.Connect(m[1], nats.UserInfo("reader", pw))
	if err != nil {
		t.Fatalf("reader with the password: %v", err)
	}
	c.Close()
	s2.stop()
	if strings.Contains(s2.stderr.String(), pw) {
		t.Fatal("the reader password was printed")
	}
}

// A bad token file is reported by the file's own field names before
// anything starts: no data directory is created, no NATS started.
func TestServeChecksTokensBeforeStarting(t *testing.T) {
	dir := t.TempDir()
	env := []string{"SOCIAL_BASE_URL=http://127.0.0.1:9", "SOCIAL_TOKEN=route-token-0123456789", "SHORT_T=short", "GOOD_T=good-secret-0123456789abcdef"}
	for file, want := range map[string]string{
		`{"tokens":[{"name":"a","secret_env":"SHORT_T","scopes":["read"]}]}`:                         "tokens[0].secret_env: the secret in $SHORT_T is shorter than 16 bytes",
		`{"tokens":[{"name":"a","secret_env":"GOOD_T","scopes":["read"],"routes":["social_pots"]}]}`: `tokens[0].routes[0]: route "social_pots" is not configured`,
	} {
		path := filepath.Join(dir, "tokens.json")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(dir, "data")
		code, out := runBinary(t, env, "serve", "--addr", freeAddr(t), "--data", data, "--routes", "../../examples/routes/social.yaml", "--tokens", path)
		if code == 0 || !strings.Contains(out, want) || strings.Contains(out, "Tokens[") {
			t.Fatalf("exit %d, want an error naming %q:\n%s", code, want, out)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the data directory was created before the token file was checked: %v", err)
		}
	}
}
