package testharness

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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/settle-dev/settle/fakeapi"
)

// HelperEnv is the environment variable that turns a test binary into a
// helper process (RunHelper): the fault tests run the fake external API
// in a process of its own, so that it can be stopped (SIGSTOP) like a
// real API that hangs, without building another binary.
const HelperEnv = "SETTLE_TESTHARNESS_HELPER"

// RunHelper must be called first in the TestMain of a package that starts
// helper processes: in a helper it runs the helper and exits; in a normal
// test run it returns at once.
func RunHelper() {
	switch os.Getenv(HelperEnv) {
	case "":
		return
	case "social":
		os.Exit(runSocialHelper())
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: no such helper\n", HelperEnv, os.Getenv(HelperEnv))
		os.Exit(2)
	}
}

// FakeState is what the fake social API process reports of its writes.
type FakeState struct {
	// Writes counts POSTs received, Effects posts created by them.
	Writes  int `json:"writes"`
	Effects int `json:"effects"`
	// ByIntent counts the posts created per intent (from the attempt
	// header "<intent>.a<n>"); "" holds posts whose write carried none.
	ByIntent map[string]int `json:"by_intent"`
}

// Duplicated lists the intents with more than one effect.
func (s FakeState) Duplicated() []string {
	var out []string
	for id, n := range s.ByIntent {
		if n > 1 {
			out = append(out, id)
		}
	}
	return out
}

func runSocialHelper() int {
	token := os.Getenv("SOCIAL_TOKEN")
	api := fakeapi.NewSocialAPIServer(fakeapi.SocialConfig{Token: token})
	defer api.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "social helper:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		st := FakeState{Writes: api.Writes(), Effects: api.Effects(), ByIntent: map[string]int{}}
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

// FakeSocialProc is the fake social API (NewSocialAPIServer) in a process
// of its own, started from the test binary (see RunHelper). It counts the
// posts each intent created.
type FakeSocialProc struct {
	*Proc
	// URL is the API's base URL and Token its bearer token.
	URL   string
	Token string
	admin string
}

// StartFakeSocialProc starts the fake social API process. The test binary
// must call RunHelper in its TestMain.
func StartFakeSocialProc(t testing.TB) *FakeSocialProc {
	t.Helper()
	token := fakeToken()
	p := StartProc(t, ProcSpec{Name: "socialapi", Path: os.Args[0], Env: []string{HelperEnv + "=social", "SOCIAL_TOKEN=" + token}})
	f := &FakeSocialProc{Proc: p, Token: token}
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
func (f *FakeSocialProc) State(t testing.TB) FakeState {
	t.Helper()
	cl := http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get(f.admin + "/state")
	if err != nil {
		t.Fatalf("fake social API state: %v", err)
	}
	defer resp.Body.Close()
	var st FakeState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("fake social API state: %v", err)
	}
	return st
}

// Queue queues faults for the next POSTs, in order ("none",
// "commit_then_drop", "reset_before_commit", "delay:2s", "status:503").
func (f *FakeSocialProc) Queue(t testing.TB, faults ...string) {
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

// fakeToken is a random bearer token for a fake API process.
func fakeToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "fake_" + hex.EncodeToString(b[:])
}
