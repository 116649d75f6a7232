package reconcile

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// TestNoProbeWhenTheRouteDeclaresNoURLCheck (found by the seeded
// simulation): github_comments.yaml declares its readback checks as
// author, payload and parent — a private repository's pages answer 404
// to a visitor without credentials — yet the reconciler fetched the
// comment's html_url after every readback, and a failing web site (500s)
// made each readback a failed read: the intent, whose comment the API
// had already shown with its marker, went to a human at the window's end
// (written_unverified). A route that declares no url check is never
// probed.
func TestNoProbeWhenTheRouteDeclaresNoURLCheck(t *testing.T) {
	n := testharness.StartNode(t)
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubClock(clock.Now), fakeapi.WithGitHubPrivateRepo())
	data, err := os.ReadFile("../../examples/routes/github_comments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GITHUB_API_URL": api.URL(), "GITHUB_REPOSITORY": "octo-org/hello-world", "GITHUB_TOKEN": api.Token()}
	cfgs, err := httproute.Parse(data, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	cfgs[0].Now, cfgs[0].Client = clock.Now, &http.Client{Timeout: 2 * time.Second}
	route, err := httproute.Build(cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	store, err := ledger.OpenStore(context.Background(), n.JS, ledger.DefaultStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	pc := producer.DefaultConfig()
	pc.Now, pc.Actor = clock.Now, "writer"
	prod, err := producer.New(store, pc, route)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Worker, cfg.Now, cfg.Logger = "w1", clock.Now, quietLogger()
	rec, err := NewReconciler(store, cfg, route)
	if err != nil {
		t.Fatal(err)
	}

	// The response is lost; the web site answers 500 for a long while.
	api.Next(fakeapi.CommitThenDrop())
	f := make([]fakeapi.ReadFault, 1000)
	for k := range f {
		f[k] = fakeapi.ReadError500
	}
	api.FailPages(f...)
	res, err := prod.Execute(context.Background(), producer.Request{Route: route.Name, Account: api.UserID(), RequestID: "deploy-1",
		ParentExternalID: "7", Payload: json.RawMessage(`{"body":"Build #42 passed"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var i *fsm.Intent
	for k := 0; k < 200; k++ {
		clock.Advance(time.Second)
		sr, err := rec.Step(context.Background(), route.Name, res.IntentID)
		if err != nil {
			t.Fatal(err)
		}
		if sr.Done {
			break
		}
		clock.Advance(sr.Wait)
	}
	h, err := store.Load(context.Background(), route.Name, res.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	if i, err = h.Fold(); err != nil {
		t.Fatal(err)
	}
	if i.State != fsm.Confirmed || api.Effects() != 1 || api.PageCalls() != 0 {
		t.Fatalf("%s %q, %d effects, %d pages probed (want confirmed, 1, 0)", i.State, i.ManualReason, api.Effects(), api.PageCalls())
	}
	for _, c := range i.Receipt.Checks {
		if c.Name == "url" {
			t.Fatalf("the receipt has a url check the route does not declare: %+v", i.Receipt.Checks)
		}
	}
}
