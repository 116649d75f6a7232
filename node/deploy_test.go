package node

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
// rights serve --nats-listen gives its own reader: no more, no less —
// and the example route's reconciler consumer is out of its reach as it
// is on the embedded server.
func TestShippedNATSReaderMatchesNATSListen(t *testing.T) {
	t.Setenv("SETTLE_NATS_PASSWORD", "x")
	t.Setenv("READER_NATS_PASSWORD", "y")
	for n := 1; n <= 3; n++ {
		text, err := deploy.NATSConfig(n)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "n.conf")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		o, err := natsserver.ProcessConfigFile(path)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, u := range o.Users {
			if u.Username != ReaderUser {
				continue
			}
			found = true
			stream := ledger.DefaultStoreConfig().Stream
			pub := slices.Sorted(slices.Values(u.Permissions.Publish.Allow))
			want := slices.Sorted(slices.Values(readerPublish(stream)))
			if !slices.Equal(pub, want) {
				t.Errorf("n%d reader publish:\n%v\nserve --nats-listen:\n%v", n, pub, want)
			}
			deny := slices.Sorted(slices.Values(u.Permissions.Publish.Deny))
			wantDeny := slices.Sorted(slices.Values(readerDeny(stream, map[string]string{"social_post": "settle-reconciler-social_post"})))
			if !slices.Equal(deny, wantDeny) {
				t.Errorf("n%d reader deny:\n%v\nserve --nats-listen with the example route:\n%v", n, deny, wantDeny)
			}
			if sub := u.Permissions.Subscribe.Allow; !slices.Equal(sub, []string{events.AllSubjects, "_INBOX.>"}) {
				t.Errorf("n%d reader subscribe: %v", n, sub)
			}
		}
		if !found {
			t.Fatalf("deploy/nats/n%d.conf has no user %q", n, ReaderUser)
		}
	}
}

// A NATS URL list (the cluster's three nodes, each with the password, as
// deploy/settle.env.example writes it) is printed without any password.
func TestRedactURLMasksEveryURLOfAList(t *testing.T) {
	in := "nats://settle:pw-1@n1.internal:4222,nats://settle:pw-2@n2.internal:4222, nats://settle:pw-3@n3.internal:4222,nats://n4:4222"
	got := RedactURL(in)
	if want := "nats://…@n1.internal:4222,nats://…@n2.internal:4222, nats://…@n3.internal:4222,nats://n4:4222"; got != want {
		t.Fatalf("RedactURL = %q, want %q", got, want)
	}
}
