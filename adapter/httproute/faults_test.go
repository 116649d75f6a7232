package httproute_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/fakeapi"
)

// TestSocialRouteFaults: each fault of the social fake is classified by
// the route of examples/routes/social.yaml as the call's outcome demands.
func TestSocialRouteFaults(t *testing.T) {
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialToken(secretToken))
	gen := loadExample(t, "social.yaml", api.URL())
	payload, _ := gen.NormalizePayload(json.RawMessage(`{"body":"fault"}`))
	cases := []struct {
		name  string
		fault fakeapi.Fault
		class adapter.Class
	}{
		{"commit_then_drop", fakeapi.CommitThenDrop(), adapter.Unknown},
		{"reset_before_commit", fakeapi.ResetBeforeCommit(), adapter.Unknown},
		{"draft_dropped", fakeapi.Draft().Dropped(), adapter.Unknown},
		{"422", fakeapi.Status(422), adapter.Rejected},
		{"400", fakeapi.Status(400), adapter.Rejected},
		{"429", fakeapi.Status(429), adapter.Rejected},
		{"409", fakeapi.Status(409), adapter.Unknown},
		{"408", fakeapi.Status(408), adapter.Unknown},
		{"500", fakeapi.Status(500), adapter.Unknown},
		{"502", fakeapi.Status(502), adapter.Unknown},
		{"501", fakeapi.Status(501), adapter.Rejected},
		{"302", fakeapi.Status(302), adapter.Unknown},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			api.Next(c.fault)
			_, err := gen.Write(bg, writeReq(100+i, "acct-f", "", payload))
			if ce := callError(t, err); ce.Class != c.class {
				t.Fatalf("class %s, want %s", ce.Class, c.class)
			}
		})
	}
	t.Run("timeout_after_send", func(t *testing.T) {
		api.Next(fakeapi.Delay(5 * time.Second))
		ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
		defer cancel()
		_, err := gen.Write(ctx, writeReq(300, "acct-f", "", payload))
		if ce := callError(t, err); ce.Class != adapter.Unknown {
			t.Fatalf("a timeout after sending is %s", ce.Class)
		}
	})
	t.Run("invalid_before_send", func(t *testing.T) {
		writes := api.Writes()
		for _, req := range []adapter.WriteRequest{
			writeReq(400, "", "", payload),                                        // no account
			writeReq(401, "acct", "", json.RawMessage(`{"body":""}`)),             // empty body
			writeReq(402, "acct", "", json.RawMessage(`{"body":"x","y":1}`)),      // unknown field
			writeReq(403, "acct", "", json.RawMessage(`{"body":"x","assets":1}`)), // not an array
		} {
			_, err := gen.Write(bg, req)
			if ce := callError(t, err); ce.Class != adapter.NotSent {
				t.Fatalf("invalid write %+v: %+v", req, *ce)
			}
		}
		if api.Writes() != writes {
			t.Fatal("an invalid write reached the API")
		}
	})
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
