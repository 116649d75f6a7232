package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/social"
	"github.com/settle-dev/settle/consumers/reconcile"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
)

// demo: a post whose response is dropped after the fake API committed it.
// The log shows the intent recorded and started before the call, the
// outcome unknown; reconciliation finds the post read-only, reads it back
// and confirms it. The fake API counts exactly one effect.
func (m *Main) demo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	keep := fs.String("keep", "", "store the JetStream data in `DIR` and keep it (default: a temporary directory, removed)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	dir := *keep
	if dir == "" {
		d, err := os.MkdirTemp("", "settle-demo-")
		if err != nil {
			return errors.Errorf("demo: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	out := m.Stdout
	srv, err := embedded.Start(embedded.Config{Dir: dir, Durability: embedded.SyncAlways, Port: -1})
	if err != nil {
		return errors.Errorf("demo: %w", err)
	}
	defer srv.Stop()
	nc, err := srv.Connect()
	if err != nil {
		return errors.Errorf("demo: connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return errors.Errorf("demo: %w", err)
	}
	store, err := ledger.OpenStore(ctx, js, ledger.DefaultStoreConfig())
	if err != nil {
		return errors.Errorf("demo: %w", err)
	}
	api := fakeapi.NewSocialAPIServer(fakeapi.SocialConfig{})
	defer api.Close()
	ad, err := social.New(social.Config{BaseURL: api.URL(), Token: api.Token(), Client: &http.Client{Timeout: 5 * time.Second}})
	if err != nil {
		return errors.Errorf("demo: %w", err)
	}
	route := adapter.Route{Name: "social_post", Adapter: ad, Policy: adapter.DefaultPolicy()}
	pc := producer.DefaultConfig()
	pc.Actor = "demo-writer"
	prod, err := producer.New(store, pc, route)
	if err != nil {
		return errors.Errorf("demo: %w", err)
	}
	fmt.Fprintf(out, "settle demo — embedded nats-server (JetStream, fsync always) in %s\n", dir)
	fmt.Fprintf(out, "fake social API at %s; its next POST commits the post and then drops the response\n\n", api.URL())
	api.Next(fakeapi.CommitThenDrop())

	req := producer.Request{Route: "social_post", Account: "acct_agentmemories", RequestID: "demo-task:step-1",
		Payload: json.RawMessage(`{"body":"Reconciliation settles unknown results without a second write."}`)}
	res, err := prod.Execute(ctx, req)
	if err != nil {
		return errors.Errorf("demo: execute: %w", err)
	}
	fmt.Fprintf(out, "1. Execute %s (request %s)\n", res.IntentID, req.RequestID)
	printHistory(out, res.History)
	fmt.Fprintf(out, "   state: %s — the response was lost; the API counts %d effect(s)\n\n", res.State, api.Effects())

	rcfg := reconcile.DefaultConfig()
	rcfg.Worker = "demo-reconciler"
	rcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	rec, err := reconcile.NewReconciler(store, rcfg, route)
	if err != nil {
		return errors.Errorf("demo: %w", err)
	}
	fmt.Fprintln(out, "2. Reconcile: read-only search by account and window, exact match, readback")
	var i *fsm.Intent
	for step := 0; step < 50; step++ {
		sr, err := rec.Step(ctx, "social_post", res.IntentID)
		if err != nil {
			return errors.Errorf("demo: reconcile: %w", err)
		}
		if sr.Done {
			break
		}
		if sr.Wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(min(sr.Wait, time.Second)):
			}
		}
	}
	h, err := store.Load(ctx, "social_post", res.IntentID)
	if err != nil {
		return errors.Errorf("demo: %w", err)
	}
	if i, err = h.Fold(); err != nil {
		return errors.Errorf("demo: %w", err)
	}
	printHistory(out, h.Events[len(res.History):])
	fmt.Fprintf(out, "   state: %s\n\n", i.State)
	if i.Receipt == nil {
		return errors.Errorf("demo: no receipt: the intent ended in %s (%s)", i.State, i.ManualReason)
	}
	fmt.Fprintln(out, "3. Receipt")
	fmt.Fprintf(out, "   external id:     %s\n   live url:        %s\n   payload sha256:  %s\n   readback at:     %s\n   idempotency key: %s\n",
		i.Receipt.ExternalID, i.Receipt.LiveURL, i.Receipt.PayloadSHA256, i.Receipt.ReadbackAt.Format(time.RFC3339), i.Receipt.IdempotencyKey)
	for _, c := range i.Receipt.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(out, "   check %-10s %s %s\n", c.Name, mark, c.Detail)
	}
	fmt.Fprintf(out, "\nfake API: %d POST request(s), %d effect(s) — written once, settled without a second write.\n", api.Writes(), api.Effects())
	if api.Effects() != 1 || i.State != fsm.Confirmed {
		return errors.Errorf("demo: expected 1 effect and confirmed, got %d and %s", api.Effects(), i.State)
	}
	return nil
}

func printHistory(out io.Writer, h []events.Event) {
	for _, e := range h {
		extra := ""
		switch d := e.Data.(type) {
		case *events.OutcomeUnknownData:
			extra = d.Code
		case *events.WriteStartedData:
			extra = "attempt " + e.AttemptID
		case *events.CandidateFoundData:
			extra = d.ExternalID + " via " + d.Source
		case *events.ReconcileStartedData:
			extra = "strategy " + d.Strategy
		}
		fmt.Fprintf(out, "   v%-2d %-22s %s %s\n", e.Version, e.Type, e.At.Format("15:04:05.000"), strings.TrimSpace(extra))
	}
}
