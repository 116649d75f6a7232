package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/consumers/webhook"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// hookReceiver is a webhook endpoint that verifies every signature and
// applies each request's body (records it) before it answers. While held,
// requests wait; one released after its sender died is applied and
// answered to nobody, as a receiver whose answer was lost. Afterwards the
// first attempt of every other event is refused (503).
type hookReceiver struct {
	secret []byte

	mu       sync.Mutex
	applied  map[string][][]byte // event id -> bodies applied (answered 2xx)
	seen     map[string]int      // event id -> requests
	badSig   int
	waiting  []string // event ids that waited while held
	held     chan struct{}
	refusals int
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := webhook.Verify(r.Header.Get(webhook.SignatureHeader), body, h.secret, webhook.DefaultTolerance, time.Now()); err != nil {
		h.mu.Lock()
		h.badSig++
		h.mu.Unlock()
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	var b webhook.Body
	if err := json.Unmarshal(body, &b); err != nil || b.ID != r.Header.Get(webhook.EventIDHeader) {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.seen[b.ID]++
	held := h.held
	if held != nil {
		h.waiting = append(h.waiting, b.ID)
	}
	refuse := held == nil && h.seen[b.ID] == 1
	if refuse {
		h.refusals++
	}
	h.mu.Unlock()
	if held != nil {
		<-held
	}
	if refuse {
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	h.mu.Lock()
	h.applied[b.ID] = append(h.applied[b.ID], body)
	h.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// settle serve --webhook, killed with SIGKILL while deliveries wait for
// the endpoint's answer, then started again: every settlement on the log
// reaches the endpoint (nothing lost), the ones whose answer the kill
// lost come again with the same event id and the same bytes, every
// request is signed, and the secret appears nowhere in settle's output.
func TestWebhookSurvivesKillMidDelivery(t *testing.T) {
	bin := settleBinary(t)
	api := fakeapi.NewSocialAPI(t)
	secret := "whsec-e2e-" + strings.Repeat("5a", 16)
	recv := &hookReceiver{secret: []byte(secret), applied: map[string][][]byte{}, seen: map[string]int{}, held: make(chan struct{})}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	release := sync.OnceFunc(func() {
		recv.mu.Lock()
		close(recv.held)
		recv.held = nil
		recv.mu.Unlock()
	})
	t.Cleanup(release)

	s := testharness.StartSettle(t, testharness.SettleSpec{
		Bin: bin, Data: filepath.Join(t.TempDir(), "data"), Routes: "../../examples/routes/social.yaml",
		Args: []string{"--webhook", srv.URL + "/settle", "--webhook-timeout", "2s", "--webhook-max-retry-delay", "1s", "--webhook-max-inflight", "4"},
		Env:  []string{"SOCIAL_BASE_URL=" + api.URL(), "SOCIAL_TOKEN=" + api.Token(), "SETTLE_WEBHOOK_SECRET=" + secret},
	})
	var ids []string
	for k := 0; k < 12; k++ {
		switch k % 4 {
		case 1:
			api.Next(fakeapi.Status(400)) // rejected
		case 2:
			api.Next(fakeapi.CommitThenDrop()) // unknown, then found and read back
		}
		r := s.Submit("social_post", "acct_1", fmt.Sprintf("hook:%d", k), fmt.Sprintf("post %d for the webhook", k))
		if r.Code != http.StatusCreated {
			t.Fatalf("submit %d: %d %s %v", k, r.Code, r.Detail, r.Err)
		}
		ids = append(ids, r.IntentID)
	}
	// Deliveries wait for their answer; settle dies under them.
	deadline := time.Now().Add(time.Minute)
	for {
		recv.mu.Lock()
		n := len(recv.waiting)
		recv.mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries reached the endpoint\n%s", n, s.Tail(4000))
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Kill9()
	release() // the receiver applies what it held; the answers go nowhere
	s.Restart(t)

	// Every settlement of every intent, as the log holds it.
	want := map[string]string{}
	deadline = time.Now().Add(3 * time.Minute)
	for _, id := range ids {
		for {
			settled, evs := intentSettlements(t, s, id)
			if settled {
				for k, v := range evs {
					want[k] = v
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("intent %s did not settle\n%s", id, s.Tail(4000))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Wait for every settlement, and for a second delivery of each one
	// whose answer the kill lost (it was never acked).
	for {
		recv.mu.Lock()
		missing, again := 0, 0
		for id := range want {
			if len(recv.applied[id]) == 0 {
				missing++
			}
		}
		for _, id := range recv.waiting {
			if len(recv.applied[id]) < 2 {
				again++
			}
		}
		recv.mu.Unlock()
		if missing == 0 && again == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d settlements never reached the endpoint; %d cut by the kill not sent again\n%s", missing, len(want), again, s.Tail(6000))
		}
		time.Sleep(50 * time.Millisecond)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	dups := 0
	for id, bodies := range recv.applied {
		typ, ok := want[id]
		if !ok {
			t.Errorf("the endpoint got %s, which is no settlement on the log", id)
			continue
		}
		var b webhook.Body
		if err := json.Unmarshal(bodies[0], &b); err != nil || b.ID != id || b.Type != "intent."+string(webhook.Settlements[events.Type(typ)]) {
			t.Errorf("%s (%s): body %s", id, typ, bodies[0])
		}
		for _, other := range bodies[1:] {
			dups++
			if !bytes.Equal(other, bodies[0]) {
				t.Errorf("%s applied twice with different bodies:\n%s\n%s", id, bodies[0], other)
			}
		}
	}
	if dups < len(recv.waiting) {
		t.Errorf("%d settlements came twice, %d were cut by the kill", dups, len(recv.waiting))
	}
	if recv.badSig != 0 || recv.refusals == 0 {
		t.Errorf("bad signatures %d, refusals on purpose %d", recv.badSig, recv.refusals)
	}
	kinds := map[string]bool{}
	for _, typ := range want {
		kinds[typ] = true
	}
	if !kinds[string(events.WriteRejected)] || !kinds[string(events.ReadbackPassed)] {
		t.Errorf("settlements %v lack a rejection or a readback", kinds)
	}
	if code, m := s.Get("/metrics"); code != 200 || !bytes.Contains(m, []byte(`settle_webhook_deliveries_total{result="delivered"}`)) {
		t.Errorf("metrics lack the webhook's deliveries: %d", code)
	}
	out := s.Output()
	if strings.Contains(out, secret) {
		t.Fatal("the webhook secret appeared in settle's output")
	}
	for _, line := range []string{"webhook: delivering settlements", `msg="webhook: endpoint refused the delivery; retrying"`, "status=503"} {
		if !strings.Contains(out, line) {
			t.Errorf("settle's log lacks %q", line)
		}
	}
	t.Logf("%d settlements delivered; %d applied again after the kill, with the same id and bytes", len(want), dups)
}

// intentSettlements reads an intent through the API: whether it is
// settled (confirmed or rejected), and its settlement events by id.
func intentSettlements(t *testing.T, s *testharness.SettleProc, id string) (bool, map[string]string) {
	code, raw := s.Get("/v1/intents/" + id)
	if code != http.StatusOK {
		return false, nil
	}
	var in struct {
		State   string            `json:"state"`
		History []json.RawMessage `json:"history"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatalf("intent %s: %v", id, err)
	}
	out := map[string]string{}
	for _, h := range in.History {
		var e struct {
			EventID string `json:"event_id"`
			Type    string `json:"type"`
		}
		_ = json.Unmarshal(h, &e)
		if _, ok := webhook.Settlements[events.Type(e.Type)]; ok {
			out[e.EventID] = e.Type
		}
	}
	return in.State == "confirmed" || in.State == "rejected", out
}
