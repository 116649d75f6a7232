package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestRoutesCheckOffline: settle routes check --offline
// checks every example route file without its secrets (CI has none):
// OK for each; without --offline the missing variables are errors.
func TestRoutesCheckOffline(t *testing.T) {
	files, err := filepath.Glob("../../examples/routes/*.yaml")
	if err != nil || len(files) < 6 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, name := range []string{"GITHUB_API_URL", "GITHUB_REPOSITORY", "GITHUB_TOKEN", "SLACK_API_URL", "SLACK_BOT_TOKEN", "STRIPE_API_URL", "STRIPE_SECRET_KEY",
		"SOCIAL_BASE_URL", "SOCIAL_TOKEN", "BOOKING_BASE_URL", "BOOKING_TOKEN", "PAYMENT_BASE_URL", "PAYMENT_TOKEN"} {
		t.Setenv(name, "") // empty: an error online
	}
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb}
	if err := m.Run(t.Context(), append([]string{"routes", "check", "--offline"}, files...)); err != nil {
		t.Fatalf("offline: %v\n%s\n%s", err, out.String(), errb.String())
	}
	if n := strings.Count(out.String(), "1 route(s) OK (offline: environment values not checked)"); n != len(files) {
		t.Fatalf("%d of %d files OK:\n%s", n, len(files), out.String())
	}
	out.Reset()
	errb.Reset()
	if err := m.Run(t.Context(), append([]string{"routes", "check"}, files...)); err == nil || !strings.Contains(errb.String(), "is empty") {
		t.Fatalf("online without the environment: %v\n%s", err, errb.String())
	}
}
