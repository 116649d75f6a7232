package fakeapi_test

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

const payBody = `{"amount":4900,"currency":"jpy","customer":"c_1","description":"Pro plan, August"}`

func payPost(t *testing.T, api *fakeapi.PaymentAPI, client *http.Client, key, body string) bkResp {
	t.Helper()
	hdr := map[string]string{}
	if key != "" {
		hdr["Idempotency-Key"] = key
	}
	return bkSend(t, api.URL(), api.Token(), client, http.MethodPost, "/v1/charges", body, hdr)
}

func payLookup(t *testing.T, api *fakeapi.PaymentAPI, key string) bkResp {
	t.Helper()
	return bkSend(t, api.URL(), api.Token(), nil, http.MethodGet, "/v1/charges?idempotency_key="+url.QueryEscape(key), "", nil)
}

func TestPaymentCreate(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 9, 0, 0, 0, time.UTC)
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewPaymentAPI(t, fakeapi.WithPaymentClock(clock.Now))
	r := payPost(t, api, nil, "pk_1", payBody)
	if r.err != nil || r.status != http.StatusCreated {
		t.Fatalf("POST: %d %v %s", r.status, r.err, r.body)
	}
	m := bkJSON(t, r.body)
	if m["id"] != "ch_1" || m["amount"] != 4900.0 || m["currency"] != "jpy" || m["customer"] != "c_1" ||
		m["description"] != "Pro plan, August" || m["status"] != "succeeded" || m["created"] != float64(t0.Unix()) {
		t.Fatalf("charge %v", m)
	}
	if api.Charges() != 1 || api.ChargesForKey("pk_1") != 1 || api.Writes() != 1 {
		t.Fatalf("charges %d for key %d writes %d", api.Charges(), api.ChargesForKey("pk_1"), api.Writes())
	}
	if l := payLookup(t, api, "pk_1"); l.status != 200 || bkJSON(t, l.body)["id"] != "ch_1" {
		t.Fatalf("lookup: %d %s", l.status, l.body)
	}
	if l := payLookup(t, api, "pk_404"); l.status != 404 {
		t.Fatalf("lookup unknown: %d", l.status)
	}
	if l := bkSend(t, api.URL(), api.Token(), nil, http.MethodGet, "/v1/charges", "", nil); l.status != 400 {
		t.Fatalf("lookup without key: %d", l.status)
	}
	if g := bkSend(t, api.URL(), api.Token(), nil, http.MethodGet, "/v1/charges/ch_1", "", nil); g.status != 200 || bkJSON(t, g.body)["amount"] != 4900.0 {
		t.Fatalf("get: %d %s", g.status, g.body)
	}
	if g := bkSend(t, api.URL(), api.Token(), nil, http.MethodGet, "/v1/charges/ch_9", "", nil); g.status != 404 {
		t.Fatalf("get unknown: %d", g.status)
	}
	if cl := api.ChargeList(); len(cl) != 1 || cl[0].IdempotencyKey != "pk_1" {
		t.Fatalf("charges %+v", cl)
	}
}

func TestPaymentRefusals(t *testing.T) {
	api := fakeapi.NewPaymentAPI(t, fakeapi.WithPaymentToken("sk_test_secret"))
	if r := bkSend(t, api.URL(), "", nil, http.MethodPost, "/v1/charges", payBody, map[string]string{"Idempotency-Key": "pk_1"}); r.status != 401 {
		t.Fatalf("no token: %d", r.status)
	}
	r := payPost(t, api, nil, "", payBody)
	if r.status != 400 || !strings.Contains(string(r.body), "idempotency_key_required") {
		t.Fatalf("missing key: %d %s", r.status, r.body)
	}
	for _, body := range []string{
		`{`,
		`{"currency":"jpy","customer":"c_1"}`,
		`{"amount":0,"currency":"jpy","customer":"c_1"}`,
		`{"amount":-5,"currency":"jpy","customer":"c_1"}`,
		`{"amount":10.5,"currency":"jpy","customer":"c_1"}`,
		`{"amount":100,"currency":"JPY","customer":"c_1"}`,
		`{"amount":100,"currency":"yen!","customer":"c_1"}`,
		`{"amount":100,"currency":"jpy"}`,
		`{"amount":100,"currency":"jpy","customer":"c_1","extra":true}`,
	} {
		if r := payPost(t, api, nil, "pk_1", body); r.status != 400 {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
	}
	if api.Charges() != 0 {
		t.Fatalf("charges %d", api.Charges())
	}
	// Validation failures are not stored under the key.
	if r := payPost(t, api, nil, "pk_1", payBody); r.status != 201 {
		t.Fatalf("after refusals: %d %s", r.status, r.body)
	}
}

func TestPaymentReplay(t *testing.T) {
	api := fakeapi.NewPaymentAPI(t)
	first := payPost(t, api, nil, "pk_1", payBody)
	// Same parameters in another order and spacing are the same request.
	reordered := `{"description":"Pro plan, August", "customer":"c_1","currency":"jpy", "amount":4900}`
	for i, body := range []string{payBody, reordered, payBody} {
		r := payPost(t, api, nil, "pk_1", body)
		if r.status != first.status || !bytes.Equal(r.body, first.body) {
			t.Fatalf("replay %d: %d %q, want %d %q", i, r.status, r.body, first.status, first.body)
		}
		if r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay %d is not marked", i)
		}
	}
	if first.header.Get("Idempotent-Replayed") != "" {
		t.Fatal("the first response is marked as a replay")
	}
	if api.Charges() != 1 || api.ChargesForKey("pk_1") != 1 || api.Writes() != 4 {
		t.Fatalf("charges %d writes %d", api.Charges(), api.Writes())
	}
}

func TestPaymentSameKeyDifferentBody(t *testing.T) {
	api := fakeapi.NewPaymentAPI(t)
	if r := payPost(t, api, nil, "pk_1", payBody); r.status != 201 {
		t.Fatalf("first: %d", r.status)
	}
	for _, body := range []string{
		`{"amount":4901,"currency":"jpy","customer":"c_1","description":"Pro plan, August"}`,
		`{"amount":4900,"currency":"jpy","customer":"c_1"}`,
	} {
		r := payPost(t, api, nil, "pk_1", body)
		if r.status != 422 || !strings.Contains(string(r.body), "idempotency_key_reused") {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
	}
	if api.Charges() != 1 {
		t.Fatalf("a 422 charged: %d", api.Charges())
	}
}

func TestPaymentConcurrentDuplicate(t *testing.T) {
	api := fakeapi.NewPaymentAPI(t)
	api.Next(fakeapi.Delay(500 * time.Millisecond))
	done := make(chan bkResp, 1)
	go func() { done <- payPost(t, api, nil, "pk_1", payBody) }()
	deadline := time.Now().Add(5 * time.Second)
	for api.Charges() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first POST never arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	second := payPost(t, api, nil, "pk_1", payBody)
	if second.status != http.StatusConflict || !strings.Contains(string(second.body), "idempotency_key_in_use") {
		t.Fatalf("duplicate in flight: %d %s", second.status, second.body)
	}
	first := <-done
	if first.status != 201 {
		t.Fatalf("first: %d %v", first.status, first.err)
	}
	third := payPost(t, api, nil, "pk_1", payBody)
	if third.status != 201 || !bytes.Equal(third.body, first.body) || third.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after completion: %d %s", third.status, third.body)
	}
	if api.Charges() != 1 {
		t.Fatalf("charges %d", api.Charges())
	}
}

func TestPaymentConcurrentBurst(t *testing.T) {
	api := fakeapi.NewPaymentAPI(t)
	api.Next(fakeapi.Delay(100 * time.Millisecond))
	var wg sync.WaitGroup
	results := make([]bkResp, 10)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = payPost(t, api, nil, "pk_burst", payBody)
		}()
	}
	wg.Wait()
	created := 0
	for i, r := range results {
		switch {
		case r.status == 201 && r.header.Get("Idempotent-Replayed") == "":
			created++
		case r.status == 201 || r.status == 409:
		default:
			t.Fatalf("result %d: %d %v", i, r.status, r.err)
		}
	}
	if created != 1 || api.Charges() != 1 {
		t.Fatalf("created %d charges %d", created, api.Charges())
	}
}

func TestPaymentKeyExpiry(t *testing.T) {
	clock := testharness.NewManualClock(time.Date(2026, 8, 1, 9, 0, 0, 0, time.UTC))
	api := fakeapi.NewPaymentAPI(t, fakeapi.WithPaymentClock(clock.Now))
	if r := payPost(t, api, nil, "pk_1", payBody); r.status != 201 {
		t.Fatalf("first: %d", r.status)
	}
	clock.Advance(24*time.Hour - time.Second)
	if r := payPost(t, api, nil, "pk_1", payBody); r.header.Get("Idempotent-Replayed") != "true" || api.Charges() != 1 {
		t.Fatalf("inside retention: %d charges %d", r.status, api.Charges())
	}
	clock.Advance(time.Second)
	r := payPost(t, api, nil, "pk_1", payBody)
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "" || bkJSON(t, r.body)["id"] != "ch_2" {
		t.Fatalf("past retention: %d %s", r.status, r.body)
	}
	if api.Charges() != 2 || api.ChargesForKey("pk_1") != 2 {
		t.Fatalf("charges %d for key %d", api.Charges(), api.ChargesForKey("pk_1"))
	}
	// A forgotten key takes a different body too.
	clock.Advance(25 * time.Hour)
	if r := payPost(t, api, nil, "pk_1", `{"amount":1,"currency":"usd","customer":"c_2"}`); r.status != 201 {
		t.Fatalf("other body past retention: %d", r.status)
	}
	if l := payLookup(t, api, "pk_1"); bkJSON(t, l.body)["id"] != "ch_3" {
		t.Fatalf("lookup answers the latest charge: %s", l.body)
	}
}

func TestPaymentFaults(t *testing.T) {
	api := fakeapi.NewPaymentAPI(t)

	api.Next(fakeapi.CommitThenDrop())
	if r := payPost(t, api, nil, "pk_drop", payBody); r.err == nil {
		t.Fatalf("CommitThenDrop answered %d", r.status)
	}
	if api.Charges() != 1 || payLookup(t, api, "pk_drop").status != 200 {
		t.Fatalf("charges %d", api.Charges())
	}
	if r := payPost(t, api, nil, "pk_drop", payBody); r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after drop: %d", r.status)
	}

	api.Next(fakeapi.ResetBeforeCommit())
	if r := payPost(t, api, nil, "pk_reset", payBody); r.err == nil {
		t.Fatalf("ResetBeforeCommit answered %d", r.status)
	}
	if api.Charges() != 1 || payLookup(t, api, "pk_reset").status != 404 {
		t.Fatalf("charges %d", api.Charges())
	}

	api.Next(fakeapi.Status(503))
	if r := payPost(t, api, nil, "pk_503", payBody); r.status != 503 {
		t.Fatalf("Status(503): %d", r.status)
	}
	if r := payPost(t, api, nil, "pk_503", payBody); r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("a 503 claimed the key: %d", r.status)
	}

	api.Next(fakeapi.Delay(time.Minute))
	if r := payPost(t, api, bkTimeoutClient(200*time.Millisecond), "pk_slow", payBody); r.err == nil {
		t.Fatalf("Delay answered %d", r.status)
	}
	if api.ChargesForKey("pk_slow") != 1 {
		t.Fatal("Delay charges before it waits")
	}
	if r := payPost(t, api, nil, "pk_slow", payBody); r.status != 409 {
		t.Fatalf("while the delayed request is in flight: %d", r.status)
	}
	if api.Charges() != 3 || api.PendingFaults() != 0 {
		t.Fatalf("charges %d pending %d", api.Charges(), api.PendingFaults())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Next accepted a fault the payment API does not implement")
		}
	}()
	api.Next(fakeapi.Draft())
}
