package testharness

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The process cluster is real and its cuts are real: an isolated node
// sees no peer (no route found its way around the proxies), the other two
// keep a stream writable, and the healed node catches up.
func TestNATSClusterProcessesIsolateAndHeal(t *testing.T) {
	c := StartNATSCluster(t, NATSClusterOptions{})
	for i := range c.Nodes {
		if got := c.Routes(i); got != 2 {
			t.Fatalf("%s sees %d peers, want 2", c.Nodes[i].Name, got)
		}
	}
	nc, err := nats.Connect(c.DirectURLs(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	CreateStream(t, js, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.Isolate(2)
	c.WaitIsolated(2, 30*time.Second)
	// The majority elects a leader (if n3 led) and takes writes again.
	deadline := time.Now().Add(30 * time.Second)
	for k := 0; k < 10; {
		if _, err := js.Publish(ctx, "t.x", []byte("x")); err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("publish with a minority cut: %v", err)
			}
			continue
		}
		k++
	}
	c.Heal(2)
	c.WaitMeshed(time.Minute)
	c.WaitHealthy(time.Minute)
	nc3, err := nats.Connect(c.DirectURLs(2))
	if err != nil {
		t.Fatal(err)
	}
	defer nc3.Close()
	for _, r := range []int{0, 1, 2} {
		if got := c.Routes(r); got != 2 {
			t.Fatalf("after heal %s sees %d peers", c.Nodes[r].Name, got)
		}
	}
	if l := c.StreamLeader("T"); l < 0 {
		t.Fatal("no stream leader")
	}
}
