package projector

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/settle-dev/settle/testharness"
)

// TestProjectorReplaysLogV1 projects a log written before a new intent's
// record and first write start became one message (IntentStarted): every
// intent's view must be the one the version that wrote the log made of it
// (testharness/testdata/logv1/views.json), with nothing quarantined.
func TestProjectorReplaysLogV1(t *testing.T) {
	n := testharness.StartNode(t)
	testharness.RepublishLogV1(t, n.JS)
	want := testharness.LogV1Views(t)
	p, err := Open(context.Background(), n.JS, Config{DBPath: filepath.Join(t.TempDir(), "views.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	if q, err := p.Quarantined(context.Background()); err != nil || len(q) != 0 {
		t.Fatalf("quarantined %v (%v)", q, err)
	}
	page, err := p.List(context.Background(), Filter{Limit: MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != len(want) || len(want) == 0 {
		t.Fatalf("%d intents, want %d", len(page.Items), len(want))
	}
	for id, w := range want {
		v, err := p.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		got, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var exp bytes.Buffer
		if err := json.Compact(&exp, w); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, exp.Bytes()) {
			t.Errorf("%s:\n got %s\nwant %s", id, got, exp.Bytes())
		}
	}
}
