package httproute_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/payment"
	"github.com/settle-dev/settle/fakeapi"
)

// TestPaymentParity: the payment example drives the Stripe-style fake
// like adapter/payment: charge, 409 in flight, 422 reuse, lookup by key,
// readback.
func TestPaymentParity(t *testing.T) {
	api := fakeapi.NewPaymentAPI(t, fakeapi.WithPaymentToken(secretToken))
	gen := loadExample(t, "payment.yaml", api.URL())
	hand, err := payment.New(payment.Config{BaseURL: api.URL(), Token: secretToken, KeyRetention: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if g, h := gen.Capabilities(), hand.Capabilities(); g != h {
		t.Fatalf("capabilities: generic %+v, hand-written %+v", g, h)
	}
	pl, err := gen.NormalizePayload(json.RawMessage(`{"amount":1200,"currency":"jpy","customer":"cus_1","description":""}`))
	if err != nil || string(pl) != `{"amount":1200,"currency":"jpy","customer":"cus_1"}` {
		t.Fatalf("normalize: %s %v", pl, err)
	}

	reqG, reqH := writeReq(1, "acct", "", pl), writeReq(2, "acct", "", pl)
	resG, errG := gen.Write(bg, reqG)
	resH, errH := hand.Write(bg, reqH)
	if errG != nil || errH != nil {
		t.Fatalf("write: generic %v, hand-written %v", errG, errH)
	}
	if resG.ExternalID != "ch_1" || resG.LiveURL != api.URL()+"/v1/charges/ch_1" || resG.StatusCode != http.StatusCreated || resH.ExternalID != "ch_2" {
		t.Fatalf("write: generic %+v, hand-written %+v", resG, resH)
	}
	if c := api.ChargeList()[0]; c.IdempotencyKey != reqG.IdempotencyKey || c.AttemptID != reqG.AttemptID {
		t.Fatalf("charge carried key %q attempt %q", c.IdempotencyKey, c.AttemptID)
	}
	// A replay answers the stored charge and charges nothing.
	if res, err := gen.Write(bg, reqG); err != nil || res.ExternalID != "ch_1" || api.Charges() != 2 {
		t.Fatalf("replay: %+v %v (%d charges)", res, err, api.Charges())
	}

	for _, req := range []adapter.WriteRequest{reqG, reqH} {
		q := adapter.StatusQuery{RequestID: req.RequestID, IdempotencyKey: req.IdempotencyKey}
		st := sameStatus(t, gen, hand, q)
		if st.State != adapter.StatusCompleted || hashOf(t, st.Payload) != hashOf(t, pl) || st.ReceivedAt.IsZero() {
			t.Fatalf("status: %+v", st)
		}
	}
	if _, err := gen.Status(bg, adapter.StatusQuery{IdempotencyKey: "sk_unknown"}); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("status of an unknown key: %v, want ErrNotFound", err)
	}
	if _, err := gen.Status(bg, adapter.StatusQuery{RequestID: "r"}); err == nil {
		t.Fatal("a status query without the key it needs succeeded")
	}

	g, e1 := gen.Get(bg, "ch_1")
	h, e2 := hand.Get(bg, "ch_1")
	if e1 != nil || e2 != nil || !reflect.DeepEqual(g, h) || hashOf(t, g.Payload) != hashOf(t, pl) {
		t.Fatalf("get: generic %+v %v, hand-written %+v %v", g, e1, h, e2)
	}
	if _, err := gen.Get(bg, "ch_404"); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("get of a missing charge: %v", err)
	}

	// The key reused with another body: 422, unknown (an earlier request
	// with the key reached the API).
	other, _ := gen.NormalizePayload(json.RawMessage(`{"amount":1,"currency":"jpy","customer":"cus_1"}`))
	reused := reqG
	reused.Payload = other
	_, errG = gen.Write(bg, reused)
	_, errH = hand.Write(bg, reused)
	sameClass(t, "key reused", errG, errH)
	if ce := callError(t, errG); ce.Class != adapter.Unknown || ce.Code != adapter.CodeKeyReused {
		t.Fatalf("key reused: %+v", *ce)
	}

	// A definite rejection carries the API's code.
	api.Next(fakeapi.Status(400))
	_, errG = gen.Write(bg, writeReq(5, "acct", "", pl))
	api.Next(fakeapi.Status(400))
	_, errH = hand.Write(bg, writeReq(6, "acct", "", pl))
	sameClass(t, "400", errG, errH)
	if ce := callError(t, errG); ce.Code != "injected" {
		t.Fatalf("400: %+v", *ce)
	}
	for _, f := range []fakeapi.Fault{fakeapi.CommitThenDrop(), fakeapi.Status(500), fakeapi.Status(429)} {
		api.Next(f)
		_, errG := gen.Write(bg, writeReq(7, "acct", "", pl))
		api.Next(f)
		_, errH := hand.Write(bg, writeReq(8, "acct", "", pl))
		sameClass(t, f.String(), errG, errH)
	}
}

// TestPaymentInFlight: a second attempt while the first is still executing
// is answered 409: unknown, never a rejection.
func TestPaymentInFlight(t *testing.T) {
	api := fakeapi.NewPaymentAPI(t, fakeapi.WithPaymentToken(secretToken))
	gen := loadExample(t, "payment.yaml", api.URL())
	pl, _ := gen.NormalizePayload(json.RawMessage(`{"amount":500,"currency":"eur","customer":"cus_9"}`))
	req := writeReq(1, "acct", "", pl)
	api.Next(fakeapi.Delay(300 * time.Millisecond))
	done := make(chan error, 1)
	go func() {
		_, err := gen.Write(bg, req)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for api.Charges() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	_, err := gen.Write(bg, req)
	if ce := callError(t, err); ce.Class != adapter.Unknown || ce.Code != "idempotency_key_in_flight" || ce.Retryable {
		t.Fatalf("in flight: %+v", *ce)
	}
	if err := <-done; err != nil {
		t.Fatalf("first attempt: %v", err)
	}
	if api.Charges() != 1 {
		t.Fatalf("%d charges", api.Charges())
	}
}
