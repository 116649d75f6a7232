package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/fakeapi"
)

const probeSecret = "ghp_probe-secret-must-never-print-7e1f"

// TestRoutesProbe: settle routes probe resolves the identity, lists one
// search page, reads one object back and prints every field it resolved
// to; it writes nothing and prints no secret. The output is the one shown
// in examples/routes/README.md.
func TestRoutesProbe(t *testing.T) {
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(probeSecret))
	now := time.Now().UTC()
	api.Inject(fakeapi.GitHubComment{Issue: 7, Body: "Build #41 passed\n\n<!-- settle:in_mfrggzdfmztwq2lknnwg23tpobyxe43u -->", CreatedAt: now.Add(-20 * time.Minute)})
	api.Inject(fakeapi.GitHubComment{Issue: 12, Body: "Looks good to me", CreatedAt: now.Add(-5 * time.Minute), UserID: 77, UserLogin: "octocat"})
	t.Setenv("GITHUB_API_URL", api.URL())
	t.Setenv("GITHUB_REPOSITORY", "octo-org/hello-world")
	t.Setenv("GITHUB_TOKEN", probeSecret)

	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb}
	if err := m.Run(t.Context(), []string{"routes", "probe", "../../examples/routes/github_comments.yaml", "--route", "github_issue_comment"}); err != nil {
		t.Fatalf("probe: %v\n%s\n%s", err, out.String(), errb.String())
	}
	s := out.String()
	t.Logf("output:\n%s", s)
	for _, want := range []string{
		"route github_issue_comment (read-only probe; nothing is written)",
		"capabilities: correlation, search, search_authoritative",
		"identity: 4242",
		"GET {{base}}/issues/comments?since=", "-> HTTP 200, 2 item(s) on page 1, last page",
		"item 1:", "author_id       4242  (the credential's identity)", "parent_id       7",
		"correlation     in_mfrggzdfmztwq2lknnwg23tpobyxe43u", `payload         {"body":"Build #41 passed"}`,
		"item 2:", "author_id       77  (not the credential's identity)", "parent_id       12", "correlation     (none)",
		"readback: 1001", "live URL without credentials: HTTP 200",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(s+errb.String(), probeSecret) || strings.Contains(s, api.URL()+"/repos") {
		t.Fatalf("the probe printed a secret or base_url:\n%s", s)
	}
	if api.Writes() != 0 || api.Effects() != 0 {
		t.Fatalf("the probe wrote: %d writes", api.Writes())
	}

	// A read that fails is shown and makes the command fail; still no write.
	t.Setenv("GITHUB_TOKEN", "wrong-token")
	out.Reset()
	err := m.Run(t.Context(), []string{"routes", "probe", "../../examples/routes/github_comments.yaml"})
	if err == nil || !strings.Contains(out.String(), "identity: FAILED: ") || strings.Contains(out.String(), "wrong-token") {
		t.Fatalf("probe with a bad token: %v\n%s", err, out.String())
	}
	if err := m.Run(t.Context(), []string{"routes", "probe", "../../examples/routes/github_comments.yaml", "--route", "nope"}); err == nil ||
		!strings.Contains(err.Error(), "routes: github_issue_comment") {
		t.Fatalf("unknown route: %v", err)
	}
	if api.Writes() != 0 {
		t.Fatal("the probe wrote")
	}

	// An API that caps pages silently below the route's page_size: the
	// probe says so.
	capped := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(probeSecret), fakeapi.WithGitHubPageCap(1))
	capped.Inject(fakeapi.GitHubComment{Issue: 7, Body: "one", CreatedAt: now.Add(-3 * time.Minute)})
	capped.Inject(fakeapi.GitHubComment{Issue: 7, Body: "two", CreatedAt: now.Add(-2 * time.Minute)})
	t.Setenv("GITHUB_API_URL", capped.URL())
	t.Setenv("GITHUB_TOKEN", probeSecret)
	out.Reset()
	if err := m.Run(t.Context(), []string{"routes", "probe", "../../examples/routes/github_comments.yaml"}); err != nil {
		t.Fatalf("probe: %v\n%s", err, out.String())
	}
	if s := out.String(); !strings.Contains(s, "page cap: the API served 1 item(s) on a page that was not the last, though the route asks for 100") {
		t.Fatalf("no page cap reported:\n%s", s)
	}
}
