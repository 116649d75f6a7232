package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/testharness"
)

// The acks a real nats-server writes for settle's stream (a publish, a
// duplicate, an atomic batch's commit) take parseAck's direct reading, not
// encoding/json: if the server's spelling changed, this says so.
func TestServerAcksAreReadDirectly(t *testing.T) {
	n := testharness.StartNode(t)
	if _, err := ledger.OpenStore(context.Background(), n.JS, ledger.DefaultStoreConfig()); err != nil {
		t.Fatal(err)
	}
	nc := n.JS.Conn()
	request := func(m *nats.Msg) []byte {
		t.Helper()
		resp, err := nc.RequestMsg(m, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Data
	}
	msg := func(subject, id string, h ...string) *nats.Msg {
		m := nats.NewMsg(subject)
		m.Data = []byte(`{}`)
		m.Header.Set(jetstream.MsgIDHeader, id)
		for i := 0; i+1 < len(h); i += 2 {
			m.Header.Set(h[i], h[i+1])
		}
		return m
	}
	subject := "settle.intents.social_post.ack-test"
	acks := map[string][]byte{
		"publish":   request(msg(subject, "ack-test:1")),
		"duplicate": request(msg(subject, "ack-test:1")),
	}
	if err := nc.PublishMsg(msg(subject+"b", "ack-test-b:1", "Nats-Batch-Id", "b1", "Nats-Batch-Sequence", "1")); err != nil {
		t.Fatal(err)
	}
	acks["batch commit"] = request(msg(subject+"c", "ack-test-c:1", "Nats-Batch-Id", "b1", "Nats-Batch-Sequence", "2", "Nats-Batch-Commit", "1"))
	for name, a := range acks {
		t.Logf("%s: %s", name, a)
		if !ledger.AckReadDirectly(a) {
			t.Errorf("%s: ack %s is not read directly", name, a)
		}
	}
	if string(acks["duplicate"]) == string(acks["publish"]) {
		t.Errorf("the duplicate's ack %s does not say so", acks["duplicate"])
	}
}
