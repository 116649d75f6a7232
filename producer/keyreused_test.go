package producer_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// A "key already used" answer is evidence that an earlier request with the
// key reached the API: never a rejection, whatever class the adapter gave
// it (Stripe's 400 idempotency_error recorded rejected would hide a first
// attempt that had paid).
func TestClassifyKeyReusedIsUnknown(t *testing.T) {
	i := &fsm.Intent{}
	for _, class := range []adapter.Class{adapter.Rejected, adapter.NotSent, adapter.Unknown} {
		for _, retryable := range []bool{false, true} {
			d := producer.Classify(i, "a1", adapter.WriteResult{}, &adapter.CallError{Class: class, Code: adapter.CodeKeyReused,
				StatusCode: 400, Retryable: retryable, Message: "the key was used with other parameters"})
			u, ok := d.(*events.OutcomeUnknownData)
			if !ok || u.Code != events.CodeKeyReused || u.StatusCode != 400 || u.Message == "" {
				t.Fatalf("class %s retryable %v: %T %+v, want OutcomeUnknown{%s}", class, retryable, d, d, events.CodeKeyReused)
			}
		}
	}
}

// stripeRoute builds the shipped Stripe example route against api.
func stripeRoute(t *testing.T, api *fakeapi.StripeAPI, now func() time.Time) adapter.Route {
	t.Helper()
	raw, err := os.ReadFile("../examples/routes/stripe_payment_intent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"STRIPE_API_URL": api.URL(), "STRIPE_SECRET_KEY": api.Token()}
	cfgs, err := httproute.Parse(raw, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	cfgs[0].Now = now
	route, err := httproute.Build(cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	return route
}

// Execute against the Stripe fake, whose key was already used by another
// request with other parameters (the first attempt, made before a route
// edit): the 400 idempotency_error is recorded unknown, never rejected.
func TestExecuteKeyReusedByStripeIsUnknown(t *testing.T) {
	n := testharness.StartNode(t)
	api := fakeapi.NewStripeAPI(t, fakeapi.WithStripeClock(func() time.Time { return t0 }))
	route := stripeRoute(t, api, func() time.Time { return t0 })
	pc := producer.DefaultConfig()
	pc.Actor, pc.Now = "writer-1", func() time.Time { return t0 }
	p, err := producer.New(testharness.OpenStore(t, n.JS), pc, route)
	if err != nil {
		t.Fatal(err)
	}
	r := producer.Request{Route: route.Name, Account: api.AccountID(), RequestID: "order-1",
		Payload: json.RawMessage(`{"amount":4200,"currency":"jpy","customer":"cus_K1","payment_method":"pm_card_visa"}`)}
	// The earlier request under the intent's key, with other parameters:
	// it paid.
	key := events.IdempotencyKey(events.ScopedIntentID("default", route.Name, r.Account, r.RequestID))
	form := url.Values{"amount": {"5000"}, "currency": {"jpy"}, "customer": {"cus_K1"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"}, "off_session": {"true"}}
	req, _ := http.NewRequest(http.MethodPost, api.URL()+"/v1/payment_intents", strings.NewReader(form.Encode()))
	req.Header.Set("Authorization", "Bearer "+api.Token())
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || api.Effects() != 1 {
		t.Fatalf("the earlier request: HTTP %d, %d effects", resp.StatusCode, api.Effects())
	}
	res, err := p.Execute(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	last := res.History[len(res.History)-1]
	u, ok := last.Data.(*events.OutcomeUnknownData)
	if res.State != fsm.Unknown || !ok || u.Code != events.CodeKeyReused || u.StatusCode != 400 {
		t.Fatalf("state %s, last event %s %+v; want unknown with %s", res.State, last.Type, last.Data, events.CodeKeyReused)
	}
	if api.Effects() != 1 {
		t.Fatalf("%d effects", api.Effects())
	}
}
