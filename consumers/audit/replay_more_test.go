package audit

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/testharness"
)

// When its ordered consumer has nothing pending before the stream's last
// sequence, the audit asks the stream (its leader, on a replicated one)
// whether a message follows: yes while one does, whatever its subject, no
// after the last one; without a stream (nothing to ask) it stops there.
func TestMoreAfterAsksTheStream(t *testing.T) {
	node := testharness.StartNode(t)
	ctx := t.Context()
	st, err := node.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "M", Subjects: []string{"m.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"m.a", "m.a", "m.b.c", "m.d"} {
		if _, err := node.JS.Publish(ctx, subj, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	a := &auditor{stream: st}
	for seq, want := range map[uint64]bool{0: true, 1: true, 2: true, 3: true, 4: false, 10: false} {
		got, err := a.moreAfter(ctx, seq)
		if err != nil || got != want {
			t.Errorf("moreAfter(%d) = %v, %v; want %v", seq, got, err, want)
		}
	}
	if got, err := (&auditor{}).moreAfter(ctx, 1); got || err != nil {
		t.Errorf("without a stream: moreAfter = %v, %v; want false", got, err)
	}
}
