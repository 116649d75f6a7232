package testharness

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
)

// LossyAPIPrefix is the JetStream API prefix of a connection whose API
// requests pass through LossyAPI (jetstream.NewWithAPIPrefix(nc,
// LossyAPIPrefix)).
const LossyAPIPrefix = "LOSSY.API"

// LossyAPI forwards the JetStream API requests made under LossyAPIPrefix
// to $JS.API with the client's reply subject, except those drop loses (as
// a server restarting, or a meta leader being elected, never answers). It
// returns the count of lost requests.
func LossyAPI(t testing.TB, nc *nats.Conn, drop func(subject string) bool) *atomic.Int64 {
	t.Helper()
	var lost atomic.Int64
	sub, err := nc.Subscribe(LossyAPIPrefix+".>", func(m *nats.Msg) {
		subject := "$JS.API." + strings.TrimPrefix(m.Subject, LossyAPIPrefix+".")
		if drop(subject) {
			lost.Add(1)
			return
		}
		if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: m.Reply, Header: m.Header, Data: m.Data}); err != nil {
			t.Errorf("forward %s: %v", subject, err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	return &lost
}
