package goadapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/consumers/reconcile"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/examples/goadapter"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// The Go adapter serves a route as a compiled route file does: a write
// whose response is lost after the API committed it is found by the
// reconciler's search, read back and confirmed, with one effect.
func TestGuestbookSettlesALostResponse(t *testing.T) {
	ctx := context.Background()
	clock := testharness.NewManualClock(time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC))
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(clock.Now))
	gb, err := goadapter.New(api.URL(), api.Token())
	if err != nil {
		t.Fatal(err)
	}
	route := adapter.Route{Name: "guestbook", Adapter: gb, Policy: adapter.DefaultPolicy()}
	if err := adapter.ValidateRoute(route); err != nil {
		t.Fatal(err)
	}
	store := testharness.OpenStore(t, testharness.StartNode(t).JS)
	pc := producer.DefaultConfig()
	pc.Actor, pc.Now = "writer", clock.Now
	p, err := producer.New(store, pc, route)
	if err != nil {
		t.Fatal(err)
	}
	api.Next(fakeapi.CommitThenDrop())
	res, err := p.Execute(ctx, producer.Request{Route: "guestbook", Account: "acct_1", RequestID: "visit:1",
		Payload: json.RawMessage(`{"body":"was here"}`)})
	if err != nil || res.State != fsm.Unknown {
		t.Fatalf("execute: %v, state %v", err, res)
	}

	rc := reconcile.DefaultConfig()
	rc.Worker, rc.Now = "worker", clock.Now
	rc.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := reconcile.NewReconciler(store, rc, route)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; ; k++ {
		sr, err := r.Step(ctx, "guestbook", res.IntentID)
		if err != nil {
			t.Fatal(err)
		}
		if sr.Done {
			break
		}
		if k == 100 {
			t.Fatal("the intent did not settle in 100 steps")
		}
		clock.Advance(max(sr.Wait, time.Second))
	}
	h, err := store.Load(ctx, "guestbook", res.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	i, err := fsm.Fold(h.Events)
	if err != nil {
		t.Fatal(err)
	}
	if i.State != fsm.Confirmed || i.Receipt == nil || i.Receipt.ExternalID != api.Posts()[0].ID || api.Effects() != 1 {
		t.Fatalf("state %s (%s) receipt %+v effects %d evidence %+v", i.State, i.ManualReason, i.Receipt, api.Effects(), i.Evidence)
	}
}

// Bad input is refused naming the field, before any request.
func TestGuestbookRefusesBadInput(t *testing.T) {
	if _, err := goadapter.New("ftp://x", "t"); err == nil {
		t.Fatal("a non-http base was accepted")
	}
	gb, err := goadapter.New("http://127.0.0.1:1", "t")
	if err != nil {
		t.Fatal(err)
	}
	var fe *events.FieldError
	if _, err := gb.NormalizePayload(json.RawMessage(`{"body":" "}`)); !errors.As(err, &fe) || fe.Field != "payload.body" {
		t.Fatalf("empty body: %v", err)
	}
	_, err = gb.Write(context.Background(), adapter.WriteRequest{Payload: json.RawMessage(`{"body":"x"}`)})
	var ce *adapter.CallError
	if !errors.As(err, &ce) || ce.Class != adapter.NotSent {
		t.Fatalf("a write without an account: %v", err)
	}
}
