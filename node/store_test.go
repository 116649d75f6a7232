package node

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/ledger"
)

// Validate reports every problem at once, each naming its field.
func TestConfigValidateNamesEveryProblem(t *testing.T) {
	ok := DefaultConfig()
	ok.Command, ok.Data, ok.Routes = "test", "dir", []adapter.Route{{Name: "r"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	bad := ok
	bad.Lease, bad.MinFreeMB, bad.Steps, bad.GroupCommit = 500*time.Millisecond, 0, 1025, "on"
	bad.Data, bad.Workers, bad.MaxClockOffset, bad.Routes = "", 0, -time.Second, nil
	var ce *ConfigError
	if err := bad.Validate(); !errors.As(err, &ce) {
		t.Fatalf("a bad config: %v", err)
	}
	got := map[string]string{}
	for _, p := range ce.Problems {
		got[p.Field] = p.Reason
	}
	want := map[string]string{
		"Data": "is required unless NATSURL is set", "Routes": "at least one route is required",
		"GroupCommit": `"on": want auto, measured or off`, "Workers": "0 only with NATSURL (another process must settle the intents)",
		"MinFreeMB": "0 must be ≥ 1", "MaxClockOffset": "-1s is negative", "Lease": "500ms must be at least 1s",
		"Steps": "1025 is outside 1..1024",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("problems:\n%v\nwant:\n%v", got, want)
	}
	withURL := ok
	withURL.Data, withURL.NATSURL, withURL.Workers = "", "nats://127.0.0.1:4222", 0
	if err := withURL.Validate(); err != nil {
		t.Fatalf("mcp with --nats-url and no workers: %v", err)
	}
}

// Opening the store is retried only when nobody answered in time (a
// cluster electing the stream's leader), never on a refusal.
func TestStoreTimeoutRetriesOnlyTimeouts(t *testing.T) {
	wrap := func(err error) error {
		return errors.WithHint(errors.Wrapf(err, "open store: stream %s", "SETTLE_INTENTS"), "hint")
	}
	for err, want := range map[error]bool{
		wrap(context.DeadlineExceeded):             true,
		wrap(nats.ErrTimeout):                      true,
		wrap(nats.ErrNoResponders):                 true,
		wrap(jetstream.ErrJetStreamNotEnabled):     false,
		wrap(errors.New("insufficient resources")): false,
	} {
		if got := storeTimeout(err); got != want {
			t.Errorf("%v: retried %v, want %v", err, got, want)
		}
	}
}

// serve and mcp publish every append alone on an embedded server that does
// not fsync every write (atomic batches cost it more than the lone publishes
// they replace); with fsync always, and on a server settle did not start,
// the group commit decides; --group-commit measured and off override it.
func TestStoreConfigFollowsTheEmbeddedServersSync(t *testing.T) {
	group := ledger.DefaultStoreConfig().BatchMax
	const url = "nats://127.0.0.1:4222"
	for _, c := range []struct {
		natsURL      string
		dur          embedded.Durability
		replicas     int
		groupCommit  string
		wantBatchMax int
	}{
		{"", embedded.SyncDefault, 1, GroupCommitAuto, 1},
		{"", embedded.SyncAlways, 1, GroupCommitAuto, group},
		{"", "", 1, GroupCommitAuto, group},
		{url, embedded.SyncDefault, 3, GroupCommitAuto, group},
		{url, embedded.SyncAlways, 3, GroupCommitAuto, group},
		{"", embedded.SyncDefault, 1, GroupCommitMeasured, group},
		{"", embedded.SyncAlways, 1, GroupCommitOff, 1},
		{url, embedded.SyncAlways, 3, GroupCommitOff, 1},
	} {
		sc := StoreConfig(c.natsURL, c.dur, c.replicas, c.groupCommit)
		if sc.BatchMax != c.wantBatchMax || sc.Replicas != c.replicas {
			t.Errorf("StoreConfig(%q, %q, %d, %q): BatchMax %d, Replicas %d; want %d, %d", c.natsURL, c.dur, c.replicas, c.groupCommit, sc.BatchMax, sc.Replicas, c.wantBatchMax, c.replicas)
		}
		if err := sc.Validate(); err != nil {
			t.Errorf("StoreConfig(%q, %q, %d, %q): %v", c.natsURL, c.dur, c.replicas, c.groupCommit, err)
		}
	}
	for v, ok := range map[string]bool{"auto": true, "measured": true, "off": true, "": false, "on": false, "OFF": false} {
		if err := CheckGroupCommit(v); (err == nil) != ok {
			t.Errorf("CheckGroupCommit(%q) = %v", v, err)
		}
	}
	if err := CheckGroupCommit("on"); err == nil || err.Error() != `"on": want auto, measured or off` {
		t.Errorf("CheckGroupCommit(on) = %v", err)
	}
}
