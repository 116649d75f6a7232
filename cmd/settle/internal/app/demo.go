package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/examples/routes"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/node"
	"github.com/settle-dev/settle/producer"
)

// Demo runs the demo in dir (its embedded store): a post whose response
// is dropped after the fake API committed it. The log shows the intent
// recorded and started before the call, the outcome unknown;
// reconciliation finds the post read-only, reads it back and confirms it.
// The fake API counts exactly one effect. The story goes to out, the
// node's warnings to stderr.
func Demo(ctx context.Context, dir string, out, stderr io.Writer) error {
	api := fakeapi.NewSocialAPIServer(fakeapi.SocialConfig{})
	defer api.Close()
	route, err := demoRoute(api)
	if err != nil {
		return errors.Errorf("demo: %w", err)
	}
	n, err := openDemoNode(ctx, dir, route, stderr)
	if err != nil {
		return errors.Errorf("demo: %w", err)
	}
	defer n.Close()
	defer runNode(ctx, n)()
	prod, store := n.Producer(), n.Store()
	if err := n.Started(ctx); err != nil {
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

	fmt.Fprintln(out, "2. Reconcile: read-only search by account and window, exact match, readback")
	h, i, err := waitSettled(ctx, store, "social_post", res.IntentID)
	if err != nil {
		return errors.Errorf("demo: reconcile: %w", err)
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

// demoRoute is the route of examples/routes/social.yaml, the file a user
// copies, compiled against the fake API.
func demoRoute(api *fakeapi.SocialAPI) (adapter.Route, error) {
	data, err := routes.File("social.yaml")
	if err != nil {
		return adapter.Route{}, err
	}
	env := map[string]string{"SOCIAL_BASE_URL": api.URL(), "SOCIAL_TOKEN": api.Token()}
	cfgs, err := httproute.Parse(data, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return adapter.Route{}, err
	}
	return httproute.Build(cfgs[0])
}

// openDemoNode is the demo's settle process: the embedded server (fsync
// always) in dir, one reconciler, warnings and errors on stderr.
func openDemoNode(ctx context.Context, dir string, route adapter.Route, stderr io.Writer) (*node.Node, error) {
	cfg := node.DefaultConfig()
	cfg.Command, cfg.Actor, cfg.Data, cfg.Routes, cfg.Workers = "settle demo", "demo-writer", dir, []adapter.Route{route}, 1
	cfg.Logger = slog.New(node.ScrubbingHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), nil))
	return node.Open(ctx, cfg)
}

// waitSettled waits until the node's reconcilers settled the intent (no
// reconciler will act on it again) and returns its history and fold.
func waitSettled(ctx context.Context, store *ledger.Store, route, id string) (*ledger.History, *fsm.Intent, error) {
	dec := fsm.DefaultDecider("demo")
	deadline := time.Now().Add(time.Minute)
	for {
		h, err := store.Load(ctx, route, id)
		if err != nil {
			return nil, nil, err
		}
		i, err := h.Fold()
		if err != nil {
			return nil, nil, err
		}
		if dec.Next(i, i.Caps(), time.Now()).Kind == fsm.StepDone || time.Now().After(deadline) {
			return h, i, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func printHistory(out io.Writer, h []events.Event) {
	for _, e := range h {
		extra := ""
		switch d := e.Data.(type) {
		case *events.OutcomeUnknownData:
			extra = d.Code
		case *events.WriteStartedData, *events.IntentStartedData:
			extra = "attempt " + e.AttemptID
		case *events.CandidateFoundData:
			extra = d.ExternalID + " via " + string(d.Source)
		case *events.ReconcileStartedData:
			extra = "strategy " + d.Strategy
		}
		fmt.Fprintf(out, "   v%-2d %-22s %s %s\n", e.Version, e.Type, e.At.Format("15:04:05.000"), strings.TrimSpace(extra))
	}
}
