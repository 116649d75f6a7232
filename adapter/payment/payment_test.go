package payment_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/adaptertest"
	"github.com/settle-dev/settle/adapter/payment"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// token is distinctive so that a leak into any error string is caught.
const token = "sk_PAYMENT_S3CRET_never_leak"

const charge = `{"amount":4900,"currency":"jpy","customer":"c_1","description":"Pro plan, August"}`

var t0 = time.Date(2026, 8, 1, 9, 0, 0, 0, time.UTC)

func newAPI(t *testing.T, opts ...fakeapi.PaymentOption) (*fakeapi.PaymentAPI, *testharness.ManualClock) {
	t.Helper()
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewPaymentAPI(t, append([]fakeapi.PaymentOption{
		fakeapi.WithPaymentToken(token), fakeapi.WithPaymentClock(clock.Now)}, opts...)...)
	return api, clock
}

func newAdapter(t *testing.T, baseURL string, mod func(*payment.Config)) *payment.Adapter {
	t.Helper()
	return adaptertest.Build(t, payment.New, payment.Config{BaseURL: baseURL, Token: token, KeyRetention: 24 * time.Hour}, mod)
}

func writeReq(t *testing.T, raw string, attempt string) adapter.WriteRequest {
	t.Helper()
	return adaptertest.WriteRequest(t, payment.NormalizePayload, intentPay, attempt, raw)
}

var intentPay = adaptertest.Intent{IntentID: "in_pay", RequestID: "task:charge", IdempotencyKey: "ik_pay_1", Account: "merchant_1"}

func TestWriteSuccess(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()
	req := writeReq(t, charge, "a1")
	res, err := a.Write(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExternalID != "ch_1" || res.LiveURL != api.URL()+"/v1/charges/ch_1" || res.StatusCode != 201 {
		t.Fatalf("result %+v", res)
	}
	cl := api.ChargeList()
	if api.Charges() != 1 || cl[0].IdempotencyKey != "ik_pay_1" || cl[0].AttemptID != "in_pay.a1" {
		t.Fatalf("charges %+v", cl)
	}
	st, err := a.Status(ctx, adapter.StatusQuery{RequestID: req.RequestID, IdempotencyKey: req.IdempotencyKey})
	if err != nil || st.State != adapter.StatusCompleted || st.ExternalID != "ch_1" || !st.ReceivedAt.Equal(t0) ||
		hash(t, st.Payload) != hash(t, req.Payload) {
		t.Fatalf("status %+v %v", st, err)
	}
	r, err := a.Get(ctx, "ch_1")
	if err != nil || r.ExternalID != "ch_1" || hash(t, r.Payload) != hash(t, req.Payload) || !r.CreatedAt.Equal(t0) {
		t.Fatalf("get %+v %v", r, err)
	}
	if code, err := a.Probe(ctx, res.LiveURL); err != nil || code != 200 {
		t.Fatalf("probe: %d %v", code, err)
	}
	// The replay of the same attempt's request is the same charge.
	res2, err := a.Write(ctx, writeReq(t, charge, "a2"))
	if err != nil || res2.ExternalID != "ch_1" || api.Charges() != 1 {
		t.Fatalf("retry: %+v %v charges %d", res2, err, api.Charges())
	}
}

func TestWriteCommitThenDrop(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()
	api.Next(fakeapi.CommitThenDrop())
	_, err := a.Write(ctx, writeReq(t, charge, "a1"))
	if ce := callError(t, err); ce.Class != adapter.Unknown {
		t.Fatalf("got %+v", ce)
	}
	if api.Charges() != 1 {
		t.Fatalf("charges %d", api.Charges())
	}
	st, err := a.Status(ctx, adapter.StatusQuery{IdempotencyKey: "ik_pay_1"})
	if err != nil || st.State != adapter.StatusCompleted || st.ExternalID != "ch_1" {
		t.Fatalf("status %+v %v", st, err)
	}
}

func TestWriteResetBeforeCommit(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()
	api.Next(fakeapi.ResetBeforeCommit())
	_, err := a.Write(ctx, writeReq(t, charge, "a1"))
	if ce := callError(t, err); ce.Class != adapter.Unknown {
		t.Fatalf("got %+v", ce)
	}
	if api.Charges() != 0 {
		t.Fatalf("charges %d", api.Charges())
	}
	if _, err := a.Status(ctx, adapter.StatusQuery{IdempotencyKey: "ik_pay_1"}); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("status: %v", err)
	}
}

// 409: the same key is still in flight. That is no proof of anything: it
// may yet charge.
func TestWriteInFlightIsUnknown(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()
	api.Next(fakeapi.Delay(time.Minute))
	slow := newAdapter(t, api.URL(), func(c *payment.Config) { c.Client = &http.Client{Timeout: 200 * time.Millisecond} })
	if _, err := slow.Write(ctx, writeReq(t, charge, "a1")); callError(t, err).Class != adapter.Unknown {
		t.Fatalf("slow: %v", err)
	}
	_, err := a.Write(ctx, writeReq(t, charge, "a2"))
	if ce := callError(t, err); ce.Class != adapter.Unknown || ce.Code != "idempotency_key_in_flight" || ce.StatusCode != 409 || ce.Retryable {
		t.Fatalf("got %+v", ce)
	}
	// Even a policy that calls every 4xx definite cannot make it a rejection.
	strict := newAdapter(t, api.URL(), func(c *payment.Config) {
		c.Status = adapter.StatusPolicy{Definite4xx: func(code int) bool { return code >= 400 && code < 500 }}
	})
	if _, err := strict.Write(ctx, writeReq(t, charge, "a3")); callError(t, err).Class != adapter.Unknown {
		t.Fatalf("strict: %v", err)
	}
	if api.Charges() != 1 {
		t.Fatalf("charges %d", api.Charges())
	}
}

// TestWriteKeyReused (issue 25 defect 11): the key reused with another
// body is evidence that an earlier request reached the API (it may have
// charged): unknown with adapter.CodeKeyReused, as a 422 and as Stripe's
// 400 idempotency_error. Before, both were a definite rejection telling
// the caller nothing was charged.
func TestWriteKeyReused(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()
	if _, err := a.Write(ctx, writeReq(t, charge, "a1")); err != nil {
		t.Fatal(err)
	}
	_, err := a.Write(ctx, writeReq(t, `{"amount":5000,"currency":"jpy","customer":"c_1"}`, "a2"))
	if ce := callError(t, err); ce.Class != adapter.Unknown || ce.Code != adapter.CodeKeyReused || ce.StatusCode != 422 || ce.Retryable {
		t.Fatalf("got %+v", ce)
	}
	if api.Charges() != 1 {
		t.Fatalf("charges %d", api.Charges())
	}

	stripe := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`)
	}))
	defer stripe.Close()
	_, err = newAdapter(t, stripe.URL, nil).Write(ctx, writeReq(t, charge, "a3"))
	if ce := callError(t, err); ce.Class != adapter.Unknown || ce.Code != adapter.CodeKeyReused || ce.StatusCode != 400 {
		t.Fatalf("Stripe's idempotency_error: %+v", ce)
	}
}

func TestWriteStatuses(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	for _, tc := range []struct {
		code      int
		class     adapter.Class
		retryable bool
	}{
		{400, adapter.Rejected, false},
		{402, adapter.Rejected, false},
		{429, adapter.Rejected, true},
		{500, adapter.Unknown, false},
		{502, adapter.Unknown, false},
		{504, adapter.Unknown, false},
	} {
		api.Next(fakeapi.Status(tc.code))
		_, err := a.Write(context.Background(), writeReq(t, charge, "a1"))
		ce := callError(t, err)
		if ce.Class != tc.class || ce.Retryable != tc.retryable || ce.StatusCode != tc.code {
			t.Fatalf("%d: got %+v", tc.code, ce)
		}
	}
	if api.Charges() != 0 {
		t.Fatalf("charges %d", api.Charges())
	}
}

func TestWriteResponseMismatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ch_9","amount":1,"currency":"usd","customer":"c_9","status":"succeeded"}`))
	}))
	defer srv.Close()
	a := newAdapter(t, srv.URL, nil)
	_, err := a.Write(context.Background(), writeReq(t, charge, "a1"))
	if ce := callError(t, err); ce.Class != adapter.Unknown || ce.Code != "response_mismatch" {
		t.Fatalf("got %+v", ce)
	}
}

func TestWriteNotSent(t *testing.T) {
	api, _ := newAPI(t)
	adaptertest.NotSent(t, newAdapter(t, api.URL(), nil), writeReq(t, charge, "a1"), api.Writes, map[string]func(*adapter.WriteRequest){
		"no key":      func(r *adapter.WriteRequest) { r.IdempotencyKey = "" },
		"bad payload": func(r *adapter.WriteRequest) { r.Payload = json.RawMessage(`{"amount":0}`) },
		"attempt LF":  func(r *adapter.WriteRequest) { r.AttemptID = "a\n1" },
	})
}

func TestKeyExpiryCapabilities(t *testing.T) {
	api, clock := newAPI(t, fakeapi.WithPaymentKeyRetention(time.Hour))
	a := newAdapter(t, api.URL(), func(c *payment.Config) { c.KeyRetention = time.Hour })
	if caps := a.Capabilities(); !caps.IdempotencyKey || caps.KeyRetention != time.Hour || !caps.StatusQuery || caps.Search {
		t.Fatalf("capabilities %+v", caps)
	}
	ctx := context.Background()
	if _, err := a.Write(ctx, writeReq(t, charge, "a1")); err != nil {
		t.Fatal(err)
	}
	// Past the retention the API forgets the key: the same request charges
	// again. This is why settle never retries past KeyRetention.
	clock.Advance(time.Hour)
	res, err := a.Write(ctx, writeReq(t, charge, "a2"))
	if err != nil || res.ExternalID != "ch_2" || api.ChargesForKey("ik_pay_1") != 2 {
		t.Fatalf("past retention: %+v %v charges %d", res, err, api.ChargesForKey("ik_pay_1"))
	}
}

func TestGetProbeSearch(t *testing.T) {
	api, _ := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()
	for _, id := range []string{"ch_404", "../ch_1"} {
		if _, err := a.Get(ctx, id); !errors.Is(err, adapter.ErrNotFound) {
			t.Fatalf("Get(%q): %v", id, err)
		}
	}
	if _, err := a.Get(ctx, ""); err == nil {
		t.Fatal("empty id accepted")
	}
	if _, err := a.Status(ctx, adapter.StatusQuery{RequestID: "x"}); err == nil {
		t.Fatal("a status query without key was accepted")
	}
	if code, err := a.Probe(ctx, api.URL()+"/v1/charges/ch_404"); err != nil || code != 404 {
		t.Fatalf("probe: %d %v", code, err)
	}
	if recs, err := a.Search(ctx, adapter.SearchQuery{}); recs != nil || err != nil {
		t.Fatalf("search %v %v", recs, err)
	}
	var hits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer other.Close()
	for _, u := range []string{other.URL + "/v1/charges/ch_1", api.URL() + "/v1/other"} {
		if _, err := a.Probe(ctx, u); err == nil {
			t.Fatalf("probe %s accepted", u)
		}
	}
	if hits.Load() != 0 {
		t.Fatal("a foreign origin was contacted")
	}
}

func TestNewValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg   payment.Config
		field string
	}{
		{payment.Config{Token: token, KeyRetention: time.Hour}, "config.BaseURL"},
		{payment.Config{BaseURL: "mailto:x", Token: token, KeyRetention: time.Hour}, "config.BaseURL"},
		{payment.Config{BaseURL: "https://x#f", Token: token, KeyRetention: time.Hour}, "config.BaseURL"},
		{payment.Config{BaseURL: "https://x", KeyRetention: time.Hour}, "config.Token"},
		{payment.Config{BaseURL: "https://x", Token: "a\nb", KeyRetention: time.Hour}, "config.Token"},
		{payment.Config{BaseURL: "https://x", Token: token}, "config.KeyRetention"},
	} {
		_, err := payment.New(tc.cfg)
		var fe *events.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Fatalf("%+v: got %v, want field %s", tc.cfg, err, tc.field)
		}
		noToken(t, err)
	}
}

func TestNormalizePayload(t *testing.T) {
	for in, want := range map[string]string{
		charge: `{"amount":4900,"currency":"jpy","customer":"c_1","description":"Pro plan, August"}`,
		`{"customer":"c_1","currency":"usd","amount":1e3}`:                   `{"amount":1000,"currency":"usd","customer":"c_1"}`,
		`{"amount":1000,"currency":"usd","customer":"c_1","description":""}`: `{"amount":1000,"currency":"usd","customer":"c_1"}`,
	} {
		out, err := payment.NormalizePayload(json.RawMessage(in))
		if err != nil || string(out) != want {
			t.Fatalf("%s: %s %v", in, out, err)
		}
	}
	a := newAdapter(t, "http://x", nil)
	if _, err := a.NormalizePayload(json.RawMessage(charge)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, field string }{
		{``, "payload"},
		{`1`, "payload"},
		{`{"amount":1,"currency":"jpy","customer":"c","customer_id":"x"}`, "payload.customer_id"},
		{`{"currency":"jpy","customer":"c"}`, "payload.amount"},
		{`{"amount":0,"currency":"jpy","customer":"c"}`, "payload.amount"},
		{`{"amount":-1,"currency":"jpy","customer":"c"}`, "payload.amount"},
		{`{"amount":1.5,"currency":"jpy","customer":"c"}`, "payload.amount"},
		{`{"amount":"100","currency":"jpy","customer":"c"}`, "payload.amount"},
		{`{"amount":1e300,"currency":"jpy","customer":"c"}`, "payload.amount"},
		{`{"amount":1,"customer":"c"}`, "payload.currency"},
		{`{"amount":1,"currency":"JPY","customer":"c"}`, "payload.currency"},
		{`{"amount":1,"currency":"jp","customer":"c"}`, "payload.currency"},
		{`{"amount":1,"currency":null,"customer":"c"}`, "payload.currency"},
		{`{"amount":1,"currency":"jpy"}`, "payload.customer"},
		{`{"amount":1,"currency":"jpy","customer":""}`, "payload.customer"},
		{`{"amount":1,"currency":"jpy","customer":"c\u0000"}`, "payload.customer"},
		{`{"amount":1,"currency":"jpy","customer":"c","description":5}`, "payload.description"},
		{`{"amount":1,"currency":"jpy","customer":"c","amount":2}`, "payload.amount"},
	} {
		_, err := payment.NormalizePayload(json.RawMessage(tc.in))
		var fe *events.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Fatalf("%s: got %v, want field %s", tc.in, err, tc.field)
		}
	}
}

func FuzzNormalizePayload(f *testing.F) {
	adaptertest.FuzzNormalizer(f, payment.NormalizePayload, nil,
		charge,
		`{"amount":1,"currency":"usd","customer":"c","description":""}`,
		`{"amount":9007199254740993,"currency":"usd","customer":"c"}`,
		`{"amount":1,"currency":"usd","customer":"c","x":{}}`,
		`[]`, `{`, ``, `null`)
}

func noToken(t *testing.T, err error) { t.Helper(); testharness.NoSecret(t, err, token) }

func callError(t *testing.T, err error) *adapter.CallError {
	t.Helper()
	return testharness.CallErrorOf(t, err, token)
}

func hash(t *testing.T, p []byte) string { t.Helper(); return testharness.Hash(t, p) }
