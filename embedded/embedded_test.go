package embedded

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

func TestConfigValidate(t *testing.T) {
	cases := map[string]Config{
		"Dir":        {Durability: SyncAlways},
		"Durability": {Dir: "x", Durability: "sometimes"},
		"Port":       {Dir: "x", Durability: SyncAlways, Port: 70000},
		"Name":       {Dir: "x", Durability: SyncAlways, ClusterName: "c"},
	}
	for field, c := range cases {
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "config."+field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	if _, err := ParseDurability("default"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseDurability("fast"); err == nil {
		t.Fatal("unknown durability accepted")
	}
}

func TestStartInProcessAndRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	for round := 0; round < 2; round++ {
		s, err := Start(Config{Dir: dir, Durability: SyncAlways, Port: -1})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := s.Connect()
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		st, err := js.CreateOrUpdateStream(t.Context(), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.FileStorage})
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if _, err := js.Publish(t.Context(), "t.a", []byte("kept")); err != nil {
				t.Fatal(err)
			}
		}
		m, err := st.GetMsg(t.Context(), 1)
		if err != nil || string(m.Data) != "kept" {
			t.Fatalf("round %d: %v", round, err)
		}
		nc.Close()
		s.Stop()
	}
}
