package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/testharness"
)

// receiver is a real HTTP endpoint that verifies every request's
// signature and fails on purpose: the first attempt of each event gets
// one of five failures (a 500, a 429 with Retry-After, a redirect, no
// answer within the deliverer's timeout, a connection closed without an
// answer); later attempts get 200. It records every body it answered 2xx
// to, and the most requests it had at once.
type receiver struct {
	t       *testing.T
	srv     *httptest.Server
	timeout time.Duration

	mu        sync.Mutex
	attempts  map[string]int
	ok        map[string][][]byte // event id -> bodies answered 2xx
	unsigned  int
	conc, max int
	failures  int
	hold      chan struct{} // when set, every request waits for it to close
}

func newReceiver(t *testing.T, timeout time.Duration) *receiver {
	r := &receiver{t: t, timeout: timeout, attempts: map[string]int{}, ok: map[string][][]byte{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.conc++
	r.max = max(r.max, r.conc)
	hold := r.hold
	r.mu.Unlock()
	defer func() { r.mu.Lock(); r.conc--; r.mu.Unlock() }()
	if hold != nil {
		<-hold
	}
	if err := Verify(req.Header.Get(SignatureHeader), body, testSecret, DefaultTolerance, time.Now()); err != nil {
		r.mu.Lock()
		r.unsigned++
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var b Body
	if err := json.Unmarshal(body, &b); err != nil || b.ID == "" || b.ID != req.Header.Get(EventIDHeader) {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.attempts[b.ID]++
	n := r.attempts[b.ID]
	mode := len(r.attempts) % 5
	if n == 1 {
		r.failures++
	}
	r.mu.Unlock()
	if n == 1 {
		switch mode {
		case 0:
			http.Error(w, "boom", http.StatusInternalServerError)
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			http.Redirect(w, req, "/elsewhere", http.StatusFound)
		case 3:
			// No answer in time. Counted out of the requests at once now:
			// the sender's own timeout ends it, and this handler may
			// notice only after the sender's next request began.
			r.mu.Lock()
			r.conc--
			r.mu.Unlock()
			select {
			case <-req.Context().Done():
			case <-time.After(r.timeout + 2*time.Second):
			}
			r.mu.Lock()
			r.conc++ // for the deferred decrement
			r.mu.Unlock()
		case 4:
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
		}
		return
	}
	r.mu.Lock()
	r.ok[b.ID] = append(r.ok[b.ID], body)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) delivered() map[string][][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][][]byte{}
	for k, v := range r.ok {
		out[k] = v
	}
	return out
}

// settlements writes intents on a real stream: one of each settlement
// (confirmed by response, by readback and by an operator, rejected,
// handed to a human, abandoned), more confirmed ones, and events that are
// none (started, unknown, an unknown type, a malformed one). It returns
// the settlements' event ids with their body type.
func settlements(t *testing.T, n *testharness.Node, more int) map[string]string {
	l := testharness.NewHandLog(t, n.JS, nil, t0)
	want := map[string]string{}
	last := func(x *testharness.HandHistory, typ string) {
		want[x.H.Events[len(x.H.Events)-1].EventID] = typ
	}
	for k := 0; k < more; k++ {
		// Half recorded and started in one message (IntentStarted), half
		// as IntentRecorded then WriteStarted: the body names both alike.
		var x *testharness.HandHistory
		if k%2 == 0 {
			x = l.RecordStarted("wh-" + strconv.Itoa(k))
		} else {
			x = l.Record("wh-" + strconv.Itoa(k)).Started(1)
		}
		x.Next(x.Attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: x.Receipt("p_"+strconv.Itoa(k), "response")})
		last(x, "intent.confirmed")
	}
	rb := l.Record("wh-readback").Started(1)
	rb.Next(rb.Attempt(1), &events.WriteSucceededData{ExternalID: "p_rb", StatusCode: 201}).
		Next("", &events.ReadbackPassedData{Receipt: rb.Receipt("p_rb", "readback")})
	last(rb, "intent.confirmed")
	rej := l.Record("wh-rejected").Started(1)
	rej.Next(rej.Attempt(1), &events.WriteRejectedData{Code: "http_400", StatusCode: 400})
	last(rej, "intent.rejected")
	op := l.Record("wh-operator").Started(1)
	op.Next(op.Attempt(1), &events.OutcomeUnknownData{Code: "timeout"}).
		Next("", &events.ManualActionRequiredData{Reason: events.ReasonNoQueryNoDedup})
	last(op, "intent.manual_action")
	op.Next("", &events.OperatorConfirmedData{Operator: "alice", Reason: "seen on the feed", Receipt: op.Receipt("p_op", "operator")})
	last(op, "intent.confirmed")
	ab := l.Record("wh-abandoned")
	ab.Next("", &events.AbandonedData{By: "alice", Reason: "not wanted"})
	last(ab, "intent.abandoned")
	l.PublishRaw(rej.ID(), `{"schema":"settle.event/v1","event_id":"`+rej.ID()+`:4","intent_id":"`+rej.ID()+
		`","version":4,"type":"WriteTeleported","at":"2026-07-22T09:00:30Z","actor":"future","data":{}}`)
	l.PublishRaw(rej.ID(), `{"schema":"settle.event/v1","event_id":"`+rej.ID()+`:5"}`)
	return want
}

func testConfig(url string, logs io.Writer) Config {
	c := DefaultConfig()
	c.URL = url + "/hooks/settle?token=query-token-never-logged"
	c.Secret = Secret(testSecret)
	c.From = FromAll
	c.Timeout = 500 * time.Millisecond
	c.MaxInFlight = 3
	c.RetryDelay = 20 * time.Millisecond
	c.MaxRetryDelay = 300 * time.Millisecond
	c.Progress = 50 * time.Millisecond
	c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return c
}

// fixture is a node holding settlements, a receiver and a deliverer's
// configuration pointing at it (logs kept).
type fixture struct {
	n    *testharness.Node
	want map[string]string
	r    *receiver
	cfg  Config
	logs *testharness.SyncBuffer
}

func newFixture(t *testing.T, more int) *fixture {
	f := &fixture{n: testharness.StartNode(t), logs: &testharness.SyncBuffer{}}
	f.want = settlements(t, f.n, more)
	f.r = newReceiver(t, testConfig("", nil).Timeout)
	f.cfg = testConfig(f.r.srv.URL, f.logs)
	return f
}

// waitDelivered waits until the receiver answered 2xx to every wanted
// event and the consumer holds nothing: every event acked.
func waitDelivered(t *testing.T, r *receiver, js jetstream.JetStream, durable string, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := r.delivered()
		var info *jetstream.ConsumerInfo
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if c, err := js.Consumer(ctx, "SETTLE_INTENTS", durable); err == nil {
			info = c.CachedInfo()
		}
		cancel()
		if len(got) >= len(want) && info != nil && info.NumPending == 0 && info.NumAckPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d of %d events; consumer %+v", len(got), len(want), info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every settlement reaches the endpoint, through every kind of failure,
// signed, with its stable id and the same bytes on every attempt; nothing
// else is sent; no more than MaxInFlight requests at once; the consumer
// acks an event only after a 2xx (nothing is pending at the end); the
// logs name failures but hold neither the secret nor the URL's query.
func TestDeliverEverySettlementThroughFailures(t *testing.T) {
	f := newFixture(t, 20)
	n, want, r, cfg, logs := f.n, f.want, f.r, f.cfg, f.logs
	d, err := New(n.JS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	waitDelivered(t, r, n.JS, cfg.Durable, want)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	got := r.delivered()
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("delivered %s, which is no settlement", id)
		}
	}
	for id, typ := range want {
		bodies := got[id]
		if len(bodies) == 0 {
			t.Errorf("%s (%s) never delivered", id, typ)
			continue
		}
		for _, b := range bodies[1:] {
			if !bytes.Equal(b, bodies[0]) {
				t.Errorf("%s delivered with different bodies:\n%s\n%s", id, bodies[0], b)
			}
		}
		var b Body
		if err := json.Unmarshal(bodies[0], &b); err != nil {
			t.Fatal(err)
		}
		e, err := events.Decode(b.Event)
		if err != nil {
			t.Fatalf("%s: the body's event does not decode: %v", id, err)
		}
		if b.Schema != BodySchema || b.ID != id || b.Type != typ || e.EventID != id || b.Intent.ID != e.IntentID ||
			b.Intent.State != Outcome(strings.TrimPrefix(typ, "intent.")) || !b.Created.Equal(e.At) {
			t.Errorf("%s: body %s", id, bodies[0])
		}
		if b.Intent.Route != "social_post" || b.Intent.Account != "acct_1" || b.Intent.Tenant != "default" ||
			!strings.HasPrefix(b.Intent.RequestID, "wh-") {
			t.Errorf("%s: intent %+v lacks the names of its IntentRecorded", id, b.Intent)
		}
	}
	r.mu.Lock()
	maxConc, failures, unsigned := r.max, r.failures, r.unsigned
	r.mu.Unlock()
	if maxConc > cfg.MaxInFlight {
		t.Errorf("%d requests at once, MaxInFlight %d", maxConc, cfg.MaxInFlight)
	}
	if unsigned != 0 {
		t.Errorf("%d requests failed their signature", unsigned)
	}
	st := d.Stats()
	if st.Failed < uint64(failures) || st.Delivered < uint64(len(want)) || st.Dropped != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v; the receiver failed %d attempts on purpose, %d events", st, failures, len(want))
	}
	out := logs.String()
	for _, s := range []string{string(testSecret), "query-token-never-logged"} {
		if strings.Contains(out, s) {
			t.Fatalf("the log holds %q:\n%s", s, out)
		}
	}
	for _, s := range []string{"endpoint refused the delivery", "status=500", "status=429", "status=302", "timed out", "webhook: progress", "malformed event; terminated"} {
		if !strings.Contains(out, s) {
			t.Errorf("the log lacks %q", s)
		}
	}
}

// A stopped deliverer lets its attempts in flight finish; a new one on
// the same durable resumes: an event whose 2xx came after the stop is not
// sent again unless its ack was lost, and nothing is lost.
func TestDeliverResumesOnTheDurable(t *testing.T) {
	f := newFixture(t, 4)
	n, want, r, cfg := f.n, f.want, f.r, f.cfg
	for id := range want { // no failures on purpose here
		r.attempts[id] = 1
	}
	r.hold = make(chan struct{})
	cfg.Timeout = 10 * time.Second
	d, err := New(n.JS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for {
		r.mu.Lock()
		c := r.conc
		r.mu.Unlock()
		if c == cfg.MaxInFlight {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests in flight, want %d", c, cfg.MaxInFlight)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel() // stop while MaxInFlight attempts wait for their answer
	select {
	case <-done:
		t.Fatal("Run returned before its attempts in flight finished")
	case <-time.After(100 * time.Millisecond):
	}
	r.mu.Lock()
	close(r.hold)
	r.hold = nil
	r.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := len(r.delivered()); got != cfg.MaxInFlight {
		t.Fatalf("after the stop %d events delivered, want the %d in flight", got, cfg.MaxInFlight)
	}
	if st := d.Stats(); st.Delivered != uint64(cfg.MaxInFlight) {
		t.Fatalf("stats after the stop: %+v", st)
	}

	d2, err := New(n.JS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go func() { _ = d2.Run(ctx2) }()
	waitDelivered(t, r, n.JS, cfg.Durable, want)
	for id, bodies := range r.delivered() {
		if len(bodies) != 1 {
			t.Errorf("%s delivered %d times; every ack was confirmed", id, len(bodies))
		}
	}
}

// A consumer the server refuses to change (an existing durable of the
// same name that acks nothing) is logged as an error with the server's
// reason, and tried again until Run is stopped.
func TestRunNamesARefusedConsumer(t *testing.T) {
	n := testharness.StartNode(t)
	settlements(t, n, 1)
	var logs testharness.SyncBuffer
	cfg := testConfig("http://127.0.0.1:9", &logs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := n.JS.CreateConsumer(ctx, "SETTLE_INTENTS", jetstream.ConsumerConfig{Durable: cfg.Durable, AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Fatal(err)
	}
	d2, _ := New(n.JS, cfg)
	done := make(chan error, 1)
	go func() { done <- d2.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(logs.String(), `level=ERROR msg="webhook: cannot create the consumer; nothing is delivered until it can be" endpoint=http://127.0.0.1:9/hooks/settle durable=settle-webhook err="webhook: consumer: ack policy can not be updated (error 10012)`) {
		if time.Now().After(deadline) {
			t.Fatalf("no error naming the refusal:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// The delay doubles per attempt from RetryDelay up to MaxRetryDelay, is
// drawn in [d/2, d), and is at least the endpoint's Retry-After (bounded).
func TestBackoff(t *testing.T) {
	c := DefaultConfig()
	c.URL, c.Secret = "http://h/", Secret(testSecret)
	for _, tc := range []struct {
		n          uint64
		rnd        float64
		retryAfter time.Duration
		want       time.Duration
	}{
		{1, 0, 0, 500 * time.Millisecond},
		{1, 0.999999, 0, 999999500 * time.Nanosecond},
		{2, 0, 0, time.Second},
		{4, 0, 0, 4 * time.Second},
		{11, 0, 0, 5 * time.Minute},
		{11, 0.5, 0, 7*time.Minute + 30*time.Second},
		{1 << 40, 0.999, 0, 10*time.Minute - 300*time.Millisecond},
		{1, 0, 30 * time.Second, 30 * time.Second},
		{1, 0, time.Hour, 10 * time.Minute},
	} {
		c.Rand = func() float64 { return tc.rnd }
		d, err := New(&noJS{}, c)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.backoff(tc.n, tc.retryAfter); got != tc.want {
			t.Errorf("backoff(%d, rand %v, retry-after %s) = %s, want %s", tc.n, tc.rnd, tc.retryAfter, got, tc.want)
		}
	}
}

type noJS struct{ jetstream.JetStream }

// A new consumer with From "new" starts after the last event the log
// held when it was made: earlier settlements are not sent, later ones
// are, and an existing consumer keeps that start.
func TestFromNewStartsAfterTheLog(t *testing.T) {
	f := newFixture(t, 2)
	n, before, r, cfg := f.n, f.want, f.r, f.cfg
	cfg.From = FromNew
	d, _ := New(n.JS, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := d.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(ctx); err != nil { // again: the consumer exists, its start is kept
		t.Fatal(err)
	}
	l := testharness.NewHandLog(t, n.JS, nil, t0.Add(time.Hour))
	x := l.Record("after").Started(1)
	x.Next(x.Attempt(1), &events.WriteConfirmedData{StatusCode: 201, Receipt: x.Receipt("p_after", "response")})
	after := map[string]string{x.H.Events[2].EventID: "intent.confirmed"}
	go func() { _ = d.Run(ctx) }()
	waitDelivered(t, r, n.JS, cfg.Durable, after)
	got := r.delivered()
	if len(got) != 1 || got[x.H.Events[2].EventID] == nil {
		t.Fatalf("delivered %d events, want only the one after the start (%d were before)", len(got), len(before))
	}
}
