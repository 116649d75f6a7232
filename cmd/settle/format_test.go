package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/node"
	"github.com/settle-dev/settle/testharness"
)

// olderStream makes, in data's store, the intents stream as a build
// before log formats were versioned made it (testharness.OlderStream), and
// returns the store directory.
func olderStream(t *testing.T, data string) string {
	t.Helper()
	store := filepath.Join(data, node.JetStreamDir)
	srv, err := embedded.Start(embedded.Config{Dir: store, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	testharness.OlderStream(t, testharness.JetStreamOf(t)(srv.Connect()))
	return store
}

// A stream of another log format is refused at start by serve, mcp, the
// audit and a rebuild of the views, each with the message naming both formats and what to do:
// nothing reports ready, nothing is read or changed.
func TestAnOlderLogFormatIsRefusedByServeMCPAndAudit(t *testing.T) {
	testharness.SkipShort(t, "embedded nats-servers")
	api := fakeapi.NewSocialAPIServer(fakeapi.SocialConfig{})
	t.Cleanup(api.Close)
	t.Setenv("SOCIAL_BASE_URL", api.URL())
	t.Setenv("SOCIAL_TOKEN", api.Token())
	data := t.TempDir()
	store := olderStream(t, data)
	want := testharness.OlderFormatMessage
	routes := "../../examples/routes/social.yaml"
	for _, c := range []struct {
		name string
		args []string
	}{
		{"serve", []string{"serve", "--dev", "--addr", "127.0.0.1:0", "--data", data, "--routes", routes}},
		{"mcp", []string{"mcp", "--data", data, "--routes", routes}},
		{"audit", []string{"audit", "--data", data}},
		{"views rebuild", []string{"views", "rebuild", "--data", data}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := m.Run(ctx, c.args)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("settle %s: %v, want an error saying %q\nstdout: %s\nstderr: %s", c.name, err, want, out.String(), errb.String())
			}
			if strings.Contains(out.String(), "serving") || strings.Contains(out.String(), "result:") {
				t.Fatalf("settle %s went on:\n%s", c.name, out.String())
			}
		})
	}
	// The stream is as the older build left it.
	srv, err := embedded.Start(embedded.Config{Dir: store, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	testharness.CheckOlderStreamUnchanged(t, testharness.JetStreamOf(t)(srv.Connect()))
}
