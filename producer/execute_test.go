package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	cerrors "github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

var t0 = time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)

// env is a real embedded nats-server, the store, a fake social API over
// real HTTP and a producer with one route "social_post".
type env struct {
	node *testharness.Node
	api  *fakeapi.SocialAPI
	ad   *httproute.Adapter
	p    *producer.Producer
	// store is p's.
	store *ledger.Store
}

// newEnv is the env with the route social_post compiled from
// examples/routes/social.yaml, after each mod changed the route.
func newEnv(t *testing.T, mod ...func(*adapter.Route)) *env {
	t.Helper()
	return newEnvOn(t, nil, mod...)
}

// newEnvOn is newEnv with made(js) run on the fresh server before the
// store opens (to make the stream as an older version did).
func newEnvOn(t *testing.T, made func(jetstream.JetStream), mod ...func(*adapter.Route)) *env {
	t.Helper()
	n := testharness.StartNode(t)
	if made != nil {
		made(n.JS)
	}
	api := fakeapi.NewSocialAPI(t)
	route := testharness.ExampleRoute(t, "social.yaml", api, testharness.RouteTimeout(2*time.Second))
	ad := route.Adapter.(*httproute.Adapter)
	for _, m := range mod {
		m(&route)
	}
	pc := producer.DefaultConfig()
	pc.Actor = "writer-1"
	store := testharness.OpenStore(t, n.JS)
	p, err := producer.New(store, pc, route)
	if err != nil {
		t.Fatal(err)
	}
	return &env{node: n, api: api, ad: ad, p: p, store: store}
}

func req(requestID, body string) producer.Request {
	return producer.Request{Route: "social_post", Account: "acct_1", RequestID: requestID,
		Payload: json.RawMessage(`{"body":"` + body + `"}`)}
}

// types lists the event types of a history.
func types(h []events.Event) []events.Type {
	out := make([]events.Type, len(h))
	for i, e := range h {
		out[i] = e.Type
	}
	return out
}

// logged loads the history from the log (not from the result).
func (e *env) logged(t *testing.T, intentID string) []events.Event {
	t.Helper()
	h, err := e.store.Load(context.Background(), "social_post", intentID)
	if err != nil {
		t.Fatal(err)
	}
	return h.Events
}

func wantTypes(t *testing.T, h []events.Event, want ...events.Type) {
	t.Helper()
	got := types(h)
	if len(got) != len(want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("history %v, want %v", got, want)
		}
	}
}

func TestExecuteSuccess(t *testing.T) {
	e := newEnv(t)
	res, err := e.p.Execute(context.Background(), req("task:1", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	if res.State != fsm.Verifying || res.Replayed {
		t.Fatalf("state %s replayed %v", res.State, res.Replayed)
	}
	h := e.logged(t, res.IntentID)
	wantTypes(t, h, events.IntentStarted, events.WriteSucceeded)
	if e.api.Effects() != 1 || e.api.EffectsForKey(res.Intent.Recorded.IdempotencyKey) != 1 {
		t.Fatalf("effects %d", e.api.Effects())
	}
	if res.Intent.ExternalID == "" || res.Intent.ExternalID != e.api.Posts()[0].ID {
		t.Fatalf("external id %q", res.Intent.ExternalID)
	}
}

func TestExecuteTrustedResponseConfirms(t *testing.T) {
	e := newEnv(t, func(r *adapter.Route) { r.Policy.TrustResponse = true })
	res, err := e.p.Execute(context.Background(), req("task:1", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	h := e.logged(t, res.IntentID)
	wantTypes(t, h, events.IntentStarted, events.WriteConfirmed)
	if res.State != fsm.Confirmed || res.Intent.Receipt == nil || res.Intent.Receipt.Source != "response" || e.api.Effects() != 1 {
		t.Fatalf("state %s receipt %+v effects %d", res.State, res.Intent.Receipt, e.api.Effects())
	}
}

func TestExecuteRequestNeverWritten(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close() // nothing listens there: dial is refused
	e := newEnv(t, func(r *adapter.Route) {
		r.Adapter = testharness.ExampleRoute(t, "social.yaml", testharness.At{Addr: dead, Secret: "t0ken-for-the-test-only"}).Adapter
	})
	res, err := e.p.Execute(context.Background(), req("task:1", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	h := e.logged(t, res.IntentID)
	wantTypes(t, h, events.IntentStarted, events.WriteRejected)
	rej := h[1].Data.(*events.WriteRejectedData)
	if res.State != fsm.Rejected || !rej.Retryable || rej.Code != "connection_refused" {
		t.Fatalf("state %s rejection %+v", res.State, rej)
	}
	if e.api.Writes() != 0 || e.api.Effects() != 0 {
		t.Fatalf("fake saw %d writes", e.api.Writes())
	}
}

// probe wraps the adapter and, at the moment of the call, reads the log to
// see whether this attempt's WriteStarted is already acknowledged there.
type probe struct {
	adapter.Adapter
	store   *ledger.Store
	mu      sync.Mutex
	started []bool
}

func (p *probe) Write(ctx context.Context, r adapter.WriteRequest) (adapter.WriteResult, error) {
	h, err := p.store.Load(ctx, "social_post", r.IntentID)
	ok := false
	if err == nil {
		last := h.Events[len(h.Events)-1]
		ok = last.Type.StartsWrite() && last.AttemptID == r.AttemptID
	}
	p.mu.Lock()
	p.started = append(p.started, ok)
	p.mu.Unlock()
	return p.Adapter.Write(ctx, r)
}

func TestExecuteTimeoutAfterCommitIsUnknownWithWriteStartedFirst(t *testing.T) {
	e := newEnv(t)
	pr := &probe{Adapter: e.ad, store: e.store}
	pc := producer.DefaultConfig()
	p, err := producer.New(e.store, pc, adapter.Route{Name: "social_post", Adapter: pr, Policy: adapter.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	e.api.Next(fakeapi.CommitThenDrop())
	res, err := p.Execute(context.Background(), req("task:1", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	h := e.logged(t, res.IntentID)
	wantTypes(t, h, events.IntentStarted, events.OutcomeUnknown)
	if res.State != fsm.Unknown || e.api.Effects() != 1 {
		t.Fatalf("state %s effects %d", res.State, e.api.Effects())
	}
	if len(pr.started) != 1 || !pr.started[0] {
		t.Fatalf("WriteStarted was not on the log when the request was made: %v", pr.started)
	}
	// A client timeout while the server holds the response: unknown too.
	e.api.Next(fakeapi.Delay(5 * time.Second))
	res, err = p.Execute(context.Background(), req("task:2", "slow"))
	if err != nil {
		t.Fatal(err)
	}
	u := e.logged(t, res.IntentID)[1].Data.(*events.OutcomeUnknownData)
	if res.State != fsm.Unknown || u.Code != "timeout_after_send" || e.api.Effects() != 2 {
		t.Fatalf("state %s code %s effects %d", res.State, u.Code, e.api.Effects())
	}
}

func TestExecuteResetBeforeCommitIsUnknown(t *testing.T) {
	e := newEnv(t)
	e.api.Next(fakeapi.ResetBeforeCommit())
	res, err := e.p.Execute(context.Background(), req("task:1", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	wantTypes(t, e.logged(t, res.IntentID), events.IntentStarted, events.OutcomeUnknown)
	if res.State != fsm.Unknown || e.api.Effects() != 0 || e.api.Writes() != 1 {
		t.Fatalf("state %s effects %d writes %d", res.State, e.api.Effects(), e.api.Writes())
	}
}

func TestExecuteStatusClassification(t *testing.T) {
	cases := []struct {
		code      int
		state     fsm.State
		retryable bool
	}{
		{400, fsm.Rejected, false},
		{422, fsm.Rejected, false},
		{429, fsm.Rejected, true},
		{502, fsm.Unknown, false},
		{504, fsm.Unknown, false},
		{500, fsm.Unknown, false},
	}
	e := newEnv(t)
	for i, c := range cases {
		e.api.Next(fakeapi.Status(c.code))
		res, err := e.p.Execute(context.Background(), req("status:"+string(rune('a'+i)), "x"))
		if err != nil {
			t.Fatal(err)
		}
		if res.State != c.state {
			t.Errorf("HTTP %d: state %s, want %s", c.code, res.State, c.state)
		}
		if c.state == fsm.Rejected && res.Intent.LastRejection.Retryable != c.retryable {
			t.Errorf("HTTP %d: retryable %v", c.code, res.Intent.LastRejection.Retryable)
		}
	}
	if e.api.Effects() != 0 {
		t.Fatalf("effects %d", e.api.Effects())
	}
}

func TestExecuteSameRequestTwiceWritesOnce(t *testing.T) {
	e := newEnv(t)
	first, err := e.p.Execute(context.Background(), req("task:1", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.p.Execute(context.Background(), req("task:1", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	if !second.Replayed || second.State != first.State || second.Intent.ExternalID != first.Intent.ExternalID {
		t.Fatalf("second: replayed %v state %s", second.Replayed, second.State)
	}
	if e.api.Effects() != 1 || e.api.Writes() != 1 || len(e.logged(t, first.IntentID)) != 2 {
		t.Fatalf("effects %d writes %d", e.api.Effects(), e.api.Writes())
	}
	// Concurrent duplicates from many goroutines: still one write.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.p.Execute(context.Background(), req("task:2", "again")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if e.api.Effects() != 2 {
		t.Fatalf("8 concurrent identical requests: %d effects in total, want 2", e.api.Effects())
	}
}

func TestExecuteDifferentPayloadIsRefused(t *testing.T) {
	e := newEnv(t)
	first, err := e.p.Execute(context.Background(), req("task:1", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	before := len(e.logged(t, first.IntentID))
	_, err = e.p.Execute(context.Background(), req("task:1", "HELLO"))
	if !errors.Is(err, producer.ErrPayloadMismatch) {
		t.Fatalf("want ErrPayloadMismatch, got %v", err)
	}
	// The caller is told what to do.
	if h := cerrors.FlattenHints(err); !strings.Contains(h, "new request id") {
		t.Fatalf("hint %q", h)
	}
	if e.api.Effects() != 1 || e.api.Writes() != 1 || len(e.logged(t, first.IntentID)) != before {
		t.Fatalf("a refused request wrote: effects %d", e.api.Effects())
	}
	// The mismatch is refused before any write even if the first never
	// reached the API.
	e.api.Next(fakeapi.Status(400))
	if _, err := e.p.Execute(context.Background(), req("task:9", "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Execute(context.Background(), req("task:9", "b")); !errors.Is(err, producer.ErrPayloadMismatch) {
		t.Fatalf("got %v", err)
	}
}

func TestExecuteDryRunWritesNothing(t *testing.T) {
	e := newEnv(t)
	r := req("task:1", "hello")
	r.DryRun = true
	res, err := e.p.Execute(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if res.DryRun == nil || !res.DryRun.WouldWrite || res.DryRun.PayloadSHA256 == "" || res.DryRun.IdempotencyKey == "" {
		t.Fatalf("report %+v", res.DryRun)
	}
	if e.api.Writes() != 0 || e.api.Effects() != 0 {
		t.Fatalf("dry run wrote to the API")
	}
	if _, err := e.store.Load(context.Background(), "social_post", res.IntentID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("dry run appended to the log: %v", err)
	}
	info, err := e.store.Stream().Info(context.Background())
	if err != nil || info.State.Msgs != 0 {
		t.Fatalf("stream has %d messages after a dry run", info.State.Msgs)
	}
}

func TestExecuteCancelledMidCallRecordsUnknown(t *testing.T) {
	e := newEnv(t)
	e.api.Next(fakeapi.Delay(3 * time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for e.api.Writes() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	res, err := e.p.Execute(ctx, req("task:1", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	h := e.logged(t, res.IntentID)
	wantTypes(t, h, events.IntentStarted, events.OutcomeUnknown)
	if code := h[1].Data.(*events.OutcomeUnknownData).Code; code != "cancelled_after_send" {
		t.Fatalf("code %s", code)
	}
}

func TestExecuteRejectsBadRequestsNamingTheField(t *testing.T) {
	e := newEnv(t)
	cases := map[string]producer.Request{
		"account":    {Route: "social_post", RequestID: "r", Payload: json.RawMessage(`{"body":"x"}`)},
		"request_id": {Route: "social_post", Account: "a", Payload: json.RawMessage(`{"body":"x"}`)},
		"payload":    {Route: "social_post", Account: "a", RequestID: "r", Payload: json.RawMessage(`{"body":""}`)},
		"route":      {Route: "Bad Route", Account: "a", RequestID: "r", Payload: json.RawMessage(`{}`)},
	}
	for field, r := range cases {
		_, err := e.p.Execute(context.Background(), r)
		var fe *events.FieldError
		if !errors.Is(err, producer.ErrInvalidRequest) || !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s: got %v", field, err)
		}
	}
	if _, err := e.p.Execute(context.Background(), producer.Request{Route: "nope", Account: "a", RequestID: "r", Payload: json.RawMessage(`{}`)}); !errors.Is(err, producer.ErrUnknownRoute) ||
		cerrors.FlattenHints(err) != "the routes configured here are social_post" {
		t.Errorf("unknown route: %v (hint %q)", err, cerrors.FlattenHints(err))
	}
	if e.api.Writes() != 0 {
		t.Fatal("bad requests reached the API")
	}
}

func TestExecuteStartsAnIntentWhoseWriterDiedBeforeWriteStarted(t *testing.T) {
	e := newEnv(t)
	r := req("task:1", "hello")
	// A writer recorded the intent and died before WriteStarted.
	canon, err := e.ad.NormalizePayload(r.Payload)
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := events.PayloadSHA256(canon)
	id := events.ScopedIntentID("default", "social_post", "acct_1", "task:1")
	rec := events.New(id, 1, time.Now(), "dead-writer", "", &events.IntentRecordedData{
		Tenant: "default", Route: "social_post", Account: "acct_1", RequestID: "task:1",
		IdempotencyKey: events.IdempotencyKey(id), Payload: canon, PayloadSHA256: sum, Canon: events.CanonV1,
		PlannedAt: time.Now(), Policy: adapter.DefaultPolicy(),
	})
	if _, err := e.store.Append(context.Background(), "social_post", rec, 0); err != nil {
		t.Fatal(err)
	}
	res, err := e.p.Execute(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	wantTypes(t, e.logged(t, id), events.IntentRecorded, events.WriteStarted, events.WriteSucceeded)
	if res.State != fsm.Verifying || e.api.Effects() != 1 {
		t.Fatalf("state %s effects %d", res.State, e.api.Effects())
	}
}
