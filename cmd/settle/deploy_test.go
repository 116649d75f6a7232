package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/settle-dev/settle/deploy"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
)

// The reader of the shipped cluster configuration (deploy/nats) has the
// rights serve --nats-listen gives its own reader: no more, no less.
func TestShippedNATSReaderMatchesNATSListen(t *testing.T) {
	t.Setenv("SETTLE_NATS_PASSWORD", "x")
	t.Setenv("READER_NATS_PASSWORD", "y")
	text, err := deploy.NATSConfig(1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "n1.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := natsserver.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range o.Users {
		if u.Username != natsReaderUser {
			continue
		}
		pub := slices.Sorted(slices.Values(u.Permissions.Publish.Allow))
		want := slices.Sorted(slices.Values(readerPublish(ledger.DefaultStoreConfig().Stream)))
		if !slices.Equal(pub, want) {
			t.Errorf("reader publish:\n%v\nserve --nats-listen:\n%v", pub, want)
		}
		if sub := u.Permissions.Subscribe.Allow; !slices.Equal(sub, []string{events.AllSubjects, "_INBOX.>"}) {
			t.Errorf("reader subscribe: %v", sub)
		}
		return
	}
	t.Fatalf("deploy/nats/n1.conf has no user %q", natsReaderUser)
}

// A NATS URL list (the cluster's three nodes, each with the password, as
// deploy/settle.env.example writes it) is printed without any password.
func TestRedactURLMasksEveryURLOfAList(t *testing.T) {
	in := "nats://settle:pw-1@n1.internal:4222,nats://settle:pw-2@n2.internal:4222, nats://settle:pw-3@n3.internal:4222,nats://n4:4222"
	got := redactURL(in)
	if want := "nats://…@n1.internal:4222,nats://…@n2.internal:4222, nats://…@n3.internal:4222,nats://n4:4222"; got != want {
		t.Fatalf("redactURL = %q, want %q", got, want)
	}
}
