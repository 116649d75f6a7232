package testharness

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SettleSpec describes one `settle serve` process of a test.
type SettleSpec struct {
	Name string
	// Bin is the settle binary (BuildBinary(t, SettlePackage)).
	Bin string
	// Data is serve's --data, Routes its --routes.
	Data, Routes string
	// NATSURL, when set, is --nats-url (with --replicas Replicas, 3 when
	// 0); otherwise serve runs its embedded server and listens for
	// readers at NATSListen (a loopback address chosen when empty).
	NATSURL    string
	Replicas   int
	NATSListen string
	// Args are more serve flags; Env more environment.
	Args []string
	Env  []string
	// NoWait: StartSettle returns without waiting for /readyz.
	NoWait bool
}

// SettleProc is a `settle serve --dev` process whose HTTP API is at URL,
// a loopback address kept across restarts.
type SettleProc struct {
	*Proc
	Spec SettleSpec
	URL  string
}

// StartSettle starts `settle serve` and waits until /readyz says ready.
func StartSettle(t testing.TB, spec SettleSpec) *SettleProc {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	args := []string{"serve", "--dev", "--addr", addr, "--data", spec.Data, "--routes", spec.Routes}
	if spec.NATSURL != "" {
		args = append(args, "--nats-url", spec.NATSURL, "--replicas", strconv.Itoa(cmp.Or(spec.Replicas, 3)))
	} else {
		spec.NATSListen = cmp.Or(spec.NATSListen, "127.0.0.1:"+strconv.Itoa(freePort(t)))
		args = append(args, "--nats-listen", spec.NATSListen)
	}
	spec.Name = cmp.Or(spec.Name, "settle")
	s := &SettleProc{Spec: spec, URL: "http://" + addr}
	s.Proc = StartProc(t, ProcSpec{Name: spec.Name, Path: spec.Bin, Args: append(args, spec.Args...), Env: spec.Env})
	if !spec.NoWait {
		s.WaitReady(t, 2*time.Minute)
	}
	return s
}

// WaitReady waits until /readyz answers 200; the test fails if the
// process exits first or the wait times out.
func (s *SettleProc) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if code, _ := s.Get("/readyz"); code == http.StatusOK {
			return
		}
		if !s.Running() {
			t.Fatalf("%s exited (code %d) before it was ready\n%s", s.Name(), s.Wait(time.Second), s.Tail(6000))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready in %s\n%s", s.Name(), timeout, s.Tail(6000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Restart starts the process again with the same flags and waits for it.
func (s *SettleProc) Restart(t testing.TB) {
	t.Helper()
	s.Start()
	s.WaitReady(t, 2*time.Minute)
}

// Get returns the status and body of GET path (0 when the request
// failed).
func (s *SettleProc) Get(path string) (int, []byte) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(s.URL + path)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// SubmitResult is the answer to one submit (Code 0: no answer).
type SubmitResult struct {
	Code     int
	IntentID string
	State    string
	Version  uint64 // the events the answer says are on the log
	Problem  string // the problem's type, when the answer is one
	Detail   string
	Err      error
}

var settleClient = &http.Client{Timeout: 2 * time.Minute}

// Submit posts one intent on route for account with request id rid and
// payload {"body": body}.
func (s *SettleProc) Submit(route, account, rid, body string) SubmitResult {
	b, _ := json.Marshal(map[string]any{"route": route, "account": account, "request_id": rid,
		"payload": map[string]any{"body": body}})
	resp, err := settleClient.Post(s.URL+"/v1/intents", "application/json", bytes.NewReader(b))
	if err != nil {
		return SubmitResult{Err: err}
	}
	defer resp.Body.Close()
	var m struct {
		IntentID string `json:"intent_id"`
		State    string `json:"state"`
		Version  uint64 `json:"version"`
		Type     string `json:"type"`
		Detail   string `json:"detail"`
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &m)
	return SubmitResult{Code: resp.StatusCode, IntentID: m.IntentID, State: m.State, Version: m.Version,
		Problem: strings.TrimPrefix(m.Type, "urn:settle:problem:"), Detail: m.Detail}
}
