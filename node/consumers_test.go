package node

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/testharness"
)

// lostResponse submits one intent whose response the fake API drops.
func lostResponse(t *testing.T, n *Node, api *fakeapi.SocialAPI, rid string) string {
	t.Helper()
	api.Next(fakeapi.CommitThenDrop())
	res, err := n.Producer().Execute(t.Context(), producer.Request{Route: "social_post", Account: "acct_1", RequestID: rid,
		Payload: json.RawMessage(`{"body":"` + rid + `"}`)})
	if err != nil || res.State != fsm.Unknown {
		t.Fatalf("execute %s: %v (%+v)", rid, err, res)
	}
	return res.IntentID
}

func waitConfirmed(t *testing.T, n *Node, id string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		h, err := n.Store().Load(t.Context(), "social_post", id)
		if err == nil {
			if i, err := h.Fold(); err == nil && i.State == fsm.Confirmed {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("intent %s not confirmed within %s", id, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// With --nats-listen, a downstream reader reads the stream and manages
// its own consumers, and cannot delete, change, pull from or ack settle's
// own; the nats CLI's ordinary requests (its user's info) are answered and
// leave no ERROR line. An operator with full rights who deletes a route's
// consumer anyway: the reconciler makes it again within seconds (counted),
// and a lost-response intent submitted meanwhile still settles, once.
func TestSettlesConsumersAreSettles(t *testing.T) {
	api := fakeapi.NewSocialAPIServer(fakeapi.SocialConfig{})
	t.Cleanup(api.Close)
	port, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var logs testharness.SyncBuffer
	n := testNode(t, api, &logs, func(c *Config) {
		l, err := ParseListen(strconv.Itoa(port), "UNSET_TEST_PASSWORD_ENV", func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		c.Listen = l
	})
	ctx := t.Context()
	const name = "settle-reconciler-social_post"
	first := lostResponse(t, n, api, "before")
	waitConfirmed(t, n, first, time.Minute)

	// The reader: its own consumer, yes; settle's, no.
	js := testharness.JetStreamOf(t)(nats.Connect(n.ReaderURL(), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})))
	if _, err := js.CreateOrUpdateConsumer(ctx, "SETTLE_INTENTS", readerConsumer("downstream")); err != nil {
		t.Fatalf("a reader's own consumer: %v", err)
	}
	if err := js.DeleteConsumer(ctx, "SETTLE_INTENTS", "downstream"); err != nil {
		t.Fatalf("deleting its own consumer: %v", err)
	}
	for what, try := range map[string]func(context.Context) error{
		"delete": func(ctx context.Context) error { return js.DeleteConsumer(ctx, "SETTLE_INTENTS", name) },
		"update": func(ctx context.Context) error {
			_, err := js.UpdateConsumer(ctx, "SETTLE_INTENTS", readerConsumer(name))
			return err
		},
		"pull": func(ctx context.Context) error {
			c, err := js.Consumer(ctx, "SETTLE_INTENTS", name)
			if err != nil {
				return err
			}
			_, err = c.Next(jetstream.FetchMaxWait(time.Second))
			return err
		},
	} {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := try(tctx)
		cancel()
		if err == nil {
			t.Fatalf("the reader could %s settle's consumer %s", what, name)
		}
	}
	if _, err := n.js.Consumer(ctx, "SETTLE_INTENTS", name); err != nil {
		t.Fatalf("settle's consumer after the reader's attempts: %v", err)
	}
	// The nats CLI asks every server for its user's info.
	if _, err := js.Conn().Request("$SYS.REQ.USER.INFO", nil, 2*time.Second); err != nil {
		t.Fatalf("$SYS.REQ.USER.INFO: %v", err)
	}

	// An operator deletes the consumer with full rights.
	if err := n.js.DeleteConsumer(ctx, "SETTLE_INTENTS", name); err != nil {
		t.Fatal(err)
	}
	second := lostResponse(t, n, api, "after-delete")
	waitConfirmed(t, n, second, time.Minute)
	var recreated uint64
	for _, r := range n.recs {
		recreated += r.ConsumersRecreated()
	}
	if recreated == 0 {
		t.Fatalf("no reconciler counted a recreated consumer\n%s", logs.String())
	}
	if api.Effects() != 2 {
		t.Fatalf("%d effects for 2 intents", api.Effects())
	}
	if err := n.Ready(ctx); err != nil {
		t.Fatalf("not ready after the consumer was made again: %v", err)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("an ERROR line: %s", line)
		}
	}
	if !strings.Contains(logs.String(), "Permissions Violation") && !strings.Contains(logs.String(), "Publish Violation") {
		t.Errorf("the refused requests are not in the log (as warnings):\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "‹×›") {
		t.Errorf("a redacted error in the log:\n%s", logs.String())
	}
}

func readerConsumer(name string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: name, FilterSubject: events.AllSubjects, AckPolicy: jetstream.AckExplicitPolicy}
}

// A reconciler that cannot fetch from its route's consumer (the server
// gone) is reported by /readyz after fetchFailingAfter, by its cause in
// the log (readable, not redacted), and is healthy again once the server
// is back.
func TestReadyzReportsAReconcilerThatCannotFetch(t *testing.T) {
	api := fakeapi.NewSocialAPIServer(fakeapi.SocialConfig{})
	t.Cleanup(api.Close)
	var logs testharness.SyncBuffer
	n := testNode(t, api, &logs, nil)
	ctx := t.Context()
	waitConfirmed(t, n, lostResponse(t, n, api, "first"), time.Minute)
	check := func() error {
		for _, c := range n.ReadyChecks() {
			if c.Name == "reconcilers" {
				return c.Check(ctx)
			}
		}
		t.Fatal("no reconcilers check")
		return nil
	}
	n.srv.Server().Shutdown()
	deadline := time.Now().Add(time.Minute)
	for check() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still reports the reconcilers ready a minute after the server went away\n%s", logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	err := check()
	if !strings.Contains(err.Error(), "cannot fetch from consumer settle-reconciler-social_post") {
		t.Fatalf("the check: %v", err)
	}
	var fetchLine string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "fetch failed") {
			fetchLine = line
		}
	}
	if fetchLine == "" || strings.Contains(fetchLine, "‹×›") || !strings.Contains(fetchLine, "err=") || strings.Contains(fetchLine, `err=""`) {
		t.Fatalf("the fetch failure's cause is not readable in the log: %q", fetchLine)
	}
	if err := n.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Minute)
	for check() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the reconcilers not ready a minute after the server came back: %v", check())
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitConfirmed(t, n, lostResponse(t, n, api, "after"), time.Minute)
}
