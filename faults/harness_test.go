package faults

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// helperEnv turns the test binary into a helper process (runHelper): the
// fake external API runs in a process of its own, so that it can be
// stopped (SIGSTOP) like a real API that hangs, without building another
// binary.
const helperEnv = "SETTLE_TESTHARNESS_HELPER"

// runHelper, called first in TestMain, runs the helper and exits in a
// helper process; in a normal test run it returns at once.
func runHelper() {
	switch h := os.Getenv(helperEnv); h {
	case "":
	case "social":
		os.Exit(runSocialHelper())
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: no such helper\n", helperEnv, h)
		os.Exit(2)
	}
}

// fakeState is what the fake social API process reports of its writes.
type fakeState struct {
	// Writes counts POSTs received, Effects posts created by them.
	Writes  int `json:"writes"`
	Effects int `json:"effects"`
	// ByIntent counts the posts created per intent (from the attempt
	// header "<intent>.a<n>"); "" holds posts whose write carried none.
	ByIntent map[string]int `json:"by_intent"`
}

// runSocialHelper serves the fake social API and, on an admin address,
// its state (GET /state) and the faults to queue (POST /faults); both
// addresses are printed for startFakeSocialProc.
func runSocialHelper() int {
	api := fakeapi.NewSocialAPIServer(fakeapi.SocialConfig{Token: os.Getenv("SOCIAL_TOKEN")})
	defer api.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "social helper:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		st := fakeState{Writes: api.Writes(), Effects: api.Effects(), ByIntent: map[string]int{}}
		for _, p := range api.Posts() {
			if p.Injected {
				continue
			}
			intent := p.AttemptID
			if k := strings.LastIndex(intent, ".a"); k > 0 {
				intent = intent[:k]
			}
			st.ByIntent[intent]++
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Faults []string `json:"faults"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var fs []fakeapi.Fault
		for _, name := range req.Faults {
			f, err := parseFault(name)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fs = append(fs, f)
		}
		api.Next(fs...)
		w.WriteHeader(http.StatusNoContent)
	})
	admin := &http.Server{Handler: mux}
	go func() { _ = admin.Serve(ln) }()
	fmt.Printf("SOCIAL_BASE_URL=%s\nADMIN_URL=http://%s\n", api.URL(), ln.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = admin.Shutdown(ctx)
	return 0
}

// parseFault reads "none", "commit_then_drop", "reset_before_commit",
// "delay:2s", "status:503".
func parseFault(s string) (fakeapi.Fault, error) {
	name, arg, _ := strings.Cut(s, ":")
	switch name {
	case "none":
		return fakeapi.Fault{}, nil
	case "commit_then_drop":
		return fakeapi.CommitThenDrop(), nil
	case "reset_before_commit":
		return fakeapi.ResetBeforeCommit(), nil
	case "delay":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return fakeapi.Fault{}, errors.Errorf("fault %q: %w", s, err)
		}
		return fakeapi.Delay(d), nil
	case "status":
		code, err := strconv.Atoi(arg)
		if err != nil {
			return fakeapi.Fault{}, errors.Errorf("fault %q: %w", s, err)
		}
		return fakeapi.Status(code), nil
	}
	return fakeapi.Fault{}, errors.Errorf("fault %q: unknown", s)
}

// fakeSocialProc is the fake social API (NewSocialAPIServer) in a process
// of its own, started from the test binary (see runHelper). It counts the
// posts each intent created.
type fakeSocialProc struct {
	*testharness.Proc
	// URL is the API's base URL and Token its bearer token.
	URL   string
	Token string
	admin string
}

// startFakeSocialProc starts the fake social API process.
func startFakeSocialProc(t testing.TB) *fakeSocialProc {
	t.Helper()
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := "fake_" + hex.EncodeToString(b[:])
	p := testharness.StartProc(t, testharness.ProcSpec{Name: "socialapi", Path: os.Args[0],
		Env: []string{helperEnv + "=social", "SOCIAL_TOKEN=" + token}})
	f := &fakeSocialProc{Proc: p, Token: token}
	deadline := time.Now().Add(30 * time.Second)
	for f.URL == "" || f.admin == "" {
		sc := bufio.NewScanner(strings.NewReader(p.Output()))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "SOCIAL_BASE_URL="); ok {
				f.URL = v
			}
			if v, ok := strings.CutPrefix(sc.Text(), "ADMIN_URL="); ok {
				f.admin = v
			}
		}
		if time.Now().After(deadline) || !p.Running() {
			t.Fatalf("fake social API process did not start\n%s", p.Tail(4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return f
}

// State reads the API's counters (the process must be running, not
// paused).
func (f *fakeSocialProc) State(t testing.TB) fakeState {
	t.Helper()
	cl := http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get(f.admin + "/state")
	if err != nil {
		t.Fatalf("fake social API state: %v", err)
	}
	defer resp.Body.Close()
	var st fakeState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("fake social API state: %v", err)
	}
	return st
}

// Queue queues faults for the next POSTs, in order (parseFault's names).
func (f *fakeSocialProc) Queue(t testing.TB, faults ...string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"faults": faults})
	resp, err := http.Post(f.admin+"/faults", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("queue faults: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("queue faults: %s", resp.Status)
	}
}

// smallDisk is a small file system of its own (a tmpfs) that a fault test
// fills and empties: a data directory on it runs out of space for real
// (ENOSPC from the kernel), without touching the machine's disks.
type smallDisk struct {
	t    testing.TB
	Dir  string
	fill string
}

// mountSmallDisk mounts a tmpfs of size bytes on a new temporary
// directory. It needs root (CAP_SYS_ADMIN), which CI has (.ci/run runs as
// root); without it the test is skipped, except under CI=true where it
// fails: a fault that cannot be set up must not pass silently.
func mountSmallDisk(t testing.TB, size int64) *smallDisk {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		msg := fmt.Sprintf("cannot mount a %d-byte tmpfs for the full-disk fault (needs root): %v", size, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return &smallDisk{t: t, Dir: dir, fill: filepath.Join(dir, "filler")}
}

// Free is the space left on the file system for an unprivileged writer.
func (d *smallDisk) Free() int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.Dir, &st); err != nil {
		d.t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// FillLeaving allocates a filler file so that about leave bytes stay free.
func (d *smallDisk) FillLeaving(leave int64) {
	d.t.Helper()
	n := d.Free() - leave
	if n <= 0 {
		return
	}
	f, err := os.OpenFile(d.fill, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	// The file system's own bookkeeping takes a little of what statfs
	// reports: ask for less until the kernel grants it.
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, 0, st.Size()+n)
		if err == nil {
			return
		}
		if err != syscall.ENOSPC || n <= 64<<10 {
			d.t.Fatalf("fill the small disk: %v", err)
		}
		n -= 64 << 10
	}
}

// Empty removes the filler: the space returns.
func (d *smallDisk) Empty() {
	d.t.Helper()
	if err := os.Remove(d.fill); err != nil && !os.IsNotExist(err) {
		d.t.Fatal(err)
	}
}

// stopNode stops node i with SIGTERM and waits for it.
func stopNode(t testing.TB, c *testharness.NATSCluster, i int) {
	t.Helper()
	if c.Nodes[i].Proc.Term(time.Minute) == -1 {
		t.Fatalf("%s did not stop after SIGTERM", c.Nodes[i].Name)
	}
}

// wipeNode deletes the store of node i, which must be stopped: a node
// that comes back with an empty disk.
func wipeNode(t testing.TB, c *testharness.NATSCluster, i int) {
	t.Helper()
	if c.Nodes[i].Proc.Running() {
		t.Fatalf("wipe %s: the node is running", c.Nodes[i].Name)
	}
	if err := os.RemoveAll(c.Nodes[i].Store); err != nil {
		t.Fatal(err)
	}
}

// isolate cuts node i from every other node and from its clients, or
// (cut false) heals those links.
func isolate(c *testharness.NATSCluster, i int, cut bool) {
	links := []*testharness.Proxy{c.Nodes[i].Client}
	for j := range c.Nodes {
		if j != i {
			links = append(links, c.Route[i][j], c.Route[j][i])
		}
	}
	for _, l := range links {
		if cut {
			l.Cut()
		} else {
			l.Heal()
		}
	}
}

// waitIsolated waits until node i sees no peer and no peer sees it: the
// cut is real (no route found its way around the proxies).
func waitIsolated(t testing.TB, c *testharness.NATSCluster, i int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok := c.Routes(i) == 0
		for j, n := range c.Nodes {
			if j != i && n.Proc.Running() && c.Routes(j) != len(c.Nodes)-2 {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still has routes %s after the cut", c.Nodes[i].Name, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// streamLeader is the index of the node leading stream (by its /jsz), or
// -1 when no running node says it leads.
func streamLeader(c *testharness.NATSCluster, stream string) int {
	for i, n := range c.Nodes {
		var jsz struct {
			AccountDetails []struct {
				Streams []struct {
					Name    string `json:"name"`
					Cluster struct {
						Leader string `json:"leader"`
					} `json:"cluster"`
				} `json:"stream_detail"`
			} `json:"account_details"`
		}
		if !n.Proc.Running() || c.Monitor(i, "/jsz?streams=true", &jsz) != nil {
			continue
		}
		for _, a := range jsz.AccountDetails {
			for _, s := range a.Streams {
				if s.Name == stream && s.Cluster.Leader == n.Name {
					return i
				}
			}
		}
	}
	return -1
}

// clientLinks makes a new proxy to every node's client port, for one
// client of its own (a second settle process the test partitions alone
// from NATS), and returns their URL list and the proxies.
func clientLinks(t testing.TB, c *testharness.NATSCluster) (string, []*testharness.Proxy) {
	var urls []string
	var links []*testharness.Proxy
	for _, n := range c.Nodes {
		p := testharness.StartProxy(t, n.Direct)
		links = append(links, p)
		urls = append(urls, c.URL(p.Addr()))
	}
	return strings.Join(urls, ","), links
}

// The process cluster is real and its cuts are real: an isolated node
// sees no peer (no route found its way around the proxies), the other two
// keep a stream writable, and the healed node catches up.
func TestNATSClusterProcessesIsolateAndHeal(t *testing.T) {
	c := testharness.StartNATSCluster(t, testharness.NATSClusterOptions{})
	for i := range c.Nodes {
		if got := c.Routes(i); got != 2 {
			t.Fatalf("%s sees %d peers, want 2", c.Nodes[i].Name, got)
		}
	}
	nc, err := nats.Connect(c.DirectURLs(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	testharness.CreateStream(t, js, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	isolate(c, 2, true)
	waitIsolated(t, c, 2, 30*time.Second)
	// The majority elects a leader (if n3 led) and takes writes again.
	deadline := time.Now().Add(30 * time.Second)
	for k := 0; k < 10; {
		if _, err := js.Publish(ctx, "t.x", []byte("x")); err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("publish with a minority cut: %v", err)
			}
			continue
		}
		k++
	}
	isolate(c, 2, false)
	c.WaitMeshed(time.Minute)
	c.WaitHealthy(time.Minute)
	nc3, err := nats.Connect(c.DirectURLs(2))
	if err != nil {
		t.Fatal(err)
	}
	defer nc3.Close()
	for _, r := range []int{0, 1, 2} {
		if got := c.Routes(r); got != 2 {
			t.Fatalf("after heal %s sees %d peers", c.Nodes[r].Name, got)
		}
	}
	if l := streamLeader(c, "T"); l < 0 {
		t.Fatal("no stream leader")
	}
}
