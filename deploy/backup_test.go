package deploy_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

const stream = "SETTLE_INTENTS"

// backup writes a snapshot of the stream into dir as `nats stream backup
// SETTLE_INTENTS DIR` does — through the JetStream snapshot API
// ($JS.API.STREAM.SNAPSHOT), with its consumers and a health check first,
// each chunk acknowledged: backup.json (the stream's configuration and
// state) and stream.tar.s2 (the snapshot as the server sends it) — and
// returns the state it recorded.
func backup(t *testing.T, url, dir string) (msgs, lastSeq uint64) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	req, _ := json.Marshal(map[string]any{"deliver_subject": inbox, "jsck": true, "chunk_size": 64 << 10})
	m, err := nc.Request("$JS.API.STREAM.SNAPSHOT."+stream, req, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Config json.RawMessage `json:"config"`
		State  struct {
			Msgs    uint64 `json:"messages"`
			Bytes   uint64 `json:"bytes"`
			LastSeq uint64 `json:"last_seq"`
		} `json:"state"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil || resp.Error != nil {
		t.Fatalf("snapshot: %s %v", m.Data, err)
	}
	var raw struct {
		State json.RawMessage `json:"state"`
	}
	_ = json.Unmarshal(m.Data, &raw)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "stream.tar.s2"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for {
		chunk, err := sub.NextMsg(time.Minute)
		if err != nil {
			t.Fatalf("snapshot chunk: %v", err)
		}
		if len(chunk.Data) == 0 {
			// The end: status 204, or none when the snapshot fit in one
			// chunk; another status is the server's error.
			if s := chunk.Header.Get("Status"); s != "204" && s != "" {
				t.Fatalf("snapshot ended with status %q %q", s, chunk.Header.Get("Description"))
			}
			break
		}
		if _, err := f.Write(chunk.Data); err != nil {
			t.Fatal(err)
		}
		if chunk.Reply != "" {
			_ = chunk.Respond(nil) // flow control: the server sends more
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	meta, _ := json.MarshalIndent(map[string]json.RawMessage{"config": resp.Config, "state": raw.State}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "backup.json"), meta, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("backup of %s: %d events, %d bytes in the store, %d bytes compressed", stream, resp.State.Msgs, resp.State.Bytes, fileSize(t, f.Name()))
	return resp.State.Msgs, resp.State.LastSeq
}

// restore puts a backup made by backup (or `nats stream backup`) into the
// server at url as `nats stream restore DIR` does: the restore request
// with the recorded configuration and state ($JS.API.STREAM.RESTORE),
// then the snapshot in chunks, each acknowledged, then an empty message;
// the server answers with the stream's info.
func restore(t *testing.T, url, dir string) (msgs, lastSeq uint64) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	meta, err := os.ReadFile(filepath.Join(dir, "backup.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := nc.Request("$JS.API.STREAM.RESTORE."+stream, meta, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		DeliverSubject string `json:"deliver_subject"`
		Error          *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil || resp.Error != nil || resp.DeliverSubject == "" {
		t.Fatalf("restore: %s %v", m.Data, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "stream.tar.s2"))
	if err != nil {
		t.Fatal(err)
	}
	for len(data) > 0 {
		n := min(len(data), 64<<10)
		r, err := nc.Request(resp.DeliverSubject, data[:n], 30*time.Second)
		if err != nil {
			t.Fatalf("restore chunk: %v", err)
		}
		if len(r.Data) > 0 {
			t.Fatalf("restore chunk refused: %s", r.Data)
		}
		data = data[n:]
	}
	r, err := nc.Request(resp.DeliverSubject, nil, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var done struct {
		State struct {
			Msgs    uint64 `json:"messages"`
			LastSeq uint64 `json:"last_seq"`
		} `json:"state"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Data, &done); err != nil || done.Error != nil {
		t.Fatalf("restore: %s %v", r.Data, err)
	}
	return done.State.Msgs, done.State.LastSeq
}

// submitSettled submits n intents (every third with its response lost,
// settled by search and readback) and waits until each is confirmed.
func submitSettled(t *testing.T, s *testharness.SettleProc, api *fakeapi.SocialAPI, from, n int) {
	t.Helper()
	var ids []string
	for k := from; k < from+n; k++ {
		if k%3 == 2 {
			api.Next(fakeapi.CommitThenDrop())
		}
		r := s.Submit("social_post", "acct_1", fmt.Sprintf("backup:%d", k), fmt.Sprintf("post %d before the backup", k))
		if r.Code != http.StatusCreated {
			t.Fatalf("submit %d: %d %s %v", k, r.Code, r.Detail, r.Err)
		}
		ids = append(ids, r.IntentID)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for _, id := range ids {
		for {
			code, body := s.Get("/v1/intents/" + id)
			var in struct {
				State string `json:"state"`
			}
			_ = json.Unmarshal(body, &in)
			if code == http.StatusOK && in.State == "confirmed" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("intent %s is %q\n%s", id, in.State, s.Tail(4000))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// audit runs `settle audit` on the stream at url with what serve's data
// directory knew of it (its views and high-water mark).
func audit(t *testing.T, bin, url, data string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, "audit", "--nats-url", url, "--views", filepath.Join(data, "views.db"),
		"--high-water", filepath.Join(data, "highwater.json"), "--quiet")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// A backup of settle's stream, restored into a fresh server, is the log:
// `settle audit` passes on it and, against what the stopped serve's data
// directory knew (its views and high-water mark), names nothing lost; a
// serve started on it is ready and answers every intent. A backup older
// than what settle knew is named as the loss it is: the audit fails with
// the lost sequences and the intents they held.
func TestBackupRestoreThenAuditPasses(t *testing.T) {
	testharness.SkipShort(t, "nats-server processes and the settle binary")
	src := testharness.StartNATSCluster(t, testharness.NATSClusterOptions{Nodes: 1}) // deploy/nats/n1.conf, single
	bin := testharness.BuildBinary(t, testharness.SettlePackage)
	api := fakeapi.NewSocialAPI(t)
	data := filepath.Join(t.TempDir(), "data")
	env := []string{"SOCIAL_BASE_URL=" + api.URL(), "SOCIAL_TOKEN=" + api.Token()}
	spec := testharness.SettleSpec{Bin: bin, Data: data, Routes: "../examples/routes/social.yaml",
		NATSURL: src.ClientURLs(), Replicas: 1, Env: env}
	s := testharness.StartSettle(t, spec)
	submitSettled(t, s, api, 0, 9)
	// An early backup, taken while serving (a snapshot is consistent at a
	// point of the log); then more intents.
	early := filepath.Join(t.TempDir(), "early")
	earlyMsgs, earlyLast := backup(t, src.DirectURLs(), early)
	submitSettled(t, s, api, 9, 6)
	if code := s.Term(2 * time.Minute); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM\n%s", code, s.Tail(4000))
	}
	full := filepath.Join(t.TempDir(), "full")
	msgs, last := backup(t, src.DirectURLs(), full)
	if msgs != last || earlyMsgs != earlyLast || earlyLast >= last {
		t.Fatalf("backups: early %d msgs to seq %d, full %d msgs to seq %d", earlyMsgs, earlyLast, msgs, last)
	}

	// The full backup into a fresh server: the same log.
	dst := testharness.StartNATSCluster(t, testharness.NATSClusterOptions{Nodes: 1})
	if rm, rl := restore(t, dst.DirectURLs(), full); rm != msgs || rl != last {
		t.Fatalf("restored %d msgs to seq %d, backed up %d to %d", rm, rl, msgs, last)
	}
	code, out := audit(t, bin, dst.DirectURLs(), data)
	if code != 0 || strings.Contains(out, "lost") || strings.Contains(out, "stream_behind") {
		t.Fatalf("audit of the restored stream: exit %d\n%s", code, out)
	}
	spec.NATSURL = dst.ClientURLs()
	s2 := testharness.StartSettle(t, spec) // its log guard accepts the restored stream
	for k := 0; k < 15; k++ {
		r := s2.Submit("social_post", "acct_1", fmt.Sprintf("backup:%d", k), fmt.Sprintf("post %d before the backup", k))
		if r.Code != http.StatusOK || r.State != "confirmed" {
			t.Fatalf("replay of intent %d on the restored log: %d %s %s", k, r.Code, r.State, r.Detail)
		}
	}
	if code := s2.Term(2 * time.Minute); code != 0 {
		t.Fatalf("serve on the restored log exited %d\n%s", code, s2.Tail(4000))
	}
	if writes := api.Writes(); writes != 15 {
		t.Fatalf("the API saw %d writes for 15 intents: a replay on the restored log wrote again", writes)
	}

	// The early backup: six intents short of what settle knew.
	old := testharness.StartNATSCluster(t, testharness.NATSClusterOptions{Nodes: 1})
	restore(t, old.DirectURLs(), early)
	code, out = audit(t, bin, old.DirectURLs(), data)
	if code == 0 || !strings.Contains(out, "events_lost") || !strings.Contains(out, fmt.Sprintf("%d", last)) {
		t.Fatalf("audit of a backup older than the high-water mark: exit %d\n%s", code, out)
	}
	t.Logf("the early backup's loss as the audit names it:\n%s", out)
}

func fileSize(t *testing.T, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
