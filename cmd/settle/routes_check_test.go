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

// settle routes check prints, for every route, the risks it still
// carries: a route without a correlation marker takes an identical object
// made within clock_skew before the write as ambiguous; a marked route
// names the marker's own limits.
func TestRoutesCheckPrintsEachRoutesRisks(t *testing.T) {
	files, err := filepath.Glob("../../examples/routes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb}
	if err := m.Run(t.Context(), append([]string{"routes", "check", "--offline"}, files...)); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	for _, want := range []string{
		"social.yaml: route social_post: risk: without a correlation marker, an identical object made by the same account within clock_skew (5s) before the write is taken as ambiguous",
		"github_comments.yaml: route github_issue_comment: risk: the correlation marker is visible to the API's users",
		"github_comments.yaml: route github_issue_comment: risk: a parent the API shows empty (read from $.issue_url) is not compared on an object the marker names",
		"booking.yaml: route booking_change: risk: a retry relies on the API keeping the idempotency key for 24h, as the route declares",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("routes check lacks %q:\n%s", want, out.String())
		}
	}
	for _, f := range files {
		if !strings.Contains(out.String(), filepath.Base(f)+": route ") {
			t.Errorf("no risk printed for the route of %s", f)
		}
	}
}
