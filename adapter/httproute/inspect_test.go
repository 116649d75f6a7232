package httproute_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// TestInspectSaysWhatToPass: a probe of a route
// whose search lists one parent's items says to pass --parent, instead of
// failing with a library error about adapter.ForIntent; with it, the
// search is made as the intent would make it.
func TestInspectSaysWhatToPass(t *testing.T) {
	rec := newRecorder(t, func(r *http.Request) (int, string) {
		if strings.HasPrefix(r.URL.Path, "/accounts/") {
			return 200, `{"id":"n1","by":"u1","kind":"k","text":"hi"}`
		}
		return 200, `{"notes":[{"id":"n1","by":"u1","at":1700000000,"kind":"k","text":"hi"}]}`
	})
	a := buildYAML(t, []byte(scopedRoute), map[string]string{"BASE": rec.srv.URL})
	in, err := a.Inspect(bg, httproute.InspectOptions{Account: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	s := in.Search
	if len(s.Missing) != 2 || s.Missing[0] != "--parent PARENT" || s.Missing[1] != "--payload JSON" || !strings.Contains(s.Err, "pass --parent PARENT and --payload JSON") {
		t.Fatalf("without --parent: missing %v, err %q", s.Missing, s.Err)
	}
	if len(rec.reqs) != 0 {
		t.Fatalf("%d requests made", len(rec.reqs))
	}
	in, err = a.Inspect(bg, httproute.InspectOptions{Account: "u1", Parent: "th/1", RequestID: "r1", Payload: []byte(`{"kind":"k","text":"hi"}`)})
	if err != nil || in.Search.Err != "" || len(in.Search.Records) != 1 || !strings.HasPrefix(in.Search.URL, "{{base}}/threads/th%2F1/notes?") || in.Readback == nil || in.Readback.Err != "" {
		t.Fatalf("with --parent: %+v %+v %v", in.Search, in.Readback, err)
	}
}

// TestInspectReportsAPageCap: GitHub serves 2
// comments a page (capped silently) while the route asks for 100; the
// probe reports the cap it sees — with next links (a short page with a
// next one) and with page numbers (a short page, then a page that is not
// empty).
func TestInspectReportsAPageCap(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now), fakeapi.WithGitHubPageCap(2))
	for i := 0; i < 3; i++ {
		api.Inject(fakeapi.GitHubComment{Issue: 1, Body: "c" + itoa(i)})
	}
	clock.Advance(time.Minute)
	for name, a := range map[string]*httproute.Adapter{
		"next link": buildFile(t, "github_comments.yaml", githubEnv(api), clock.Now),
		"page numbers": buildFile(t, "github_comments.yaml", githubEnv(api), clock.Now,
			"&per_page={{page_size}}", "&per_page={{page_size}}&page={{page}}", "      next_link: true\n", "      end: empty_page\n"),
	} {
		in, err := a.Inspect(bg, httproute.InspectOptions{})
		if err != nil || in.Search.Err != "" {
			t.Fatalf("%s: %v %+v", name, err, in.Search)
		}
		if s := in.Search; s.PageSize != 100 || s.PageCap != 2 || !s.More || s.Items != 2 {
			t.Fatalf("%s: page size %d, cap %d, more %v, items %d", name, s.PageSize, s.PageCap, s.More, s.Items)
		}
	}
	// No cap: a last page shorter than asked is not one.
	uncapped := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now))
	uncapped.Inject(fakeapi.GitHubComment{Issue: 1, Body: "c"})
	in, err := buildFile(t, "github_comments.yaml", githubEnv(uncapped), clock.Now).Inspect(bg, httproute.InspectOptions{})
	if err != nil || in.Search.PageCap != 0 || in.Search.More {
		t.Fatalf("uncapped: %+v %v", in.Search, err)
	}
}

// A probe names a mapped field the API returned empty, with the object it
// saw: a comment on a pull request has no issue_url, which the route
// reads the parent from.
func TestInspectReportsAMappedFieldReturnedEmpty(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now), fakeapi.WithGitHubPullRequests(9))
	c := api.Inject(fakeapi.GitHubComment{Issue: 9, Body: "LGTM"})
	clock.Advance(time.Minute)
	a := buildFile(t, "github_comments.yaml", githubEnv(api), clock.Now)
	in, err := a.Inspect(bg, httproute.InspectOptions{})
	if err != nil || in.Search.Err != "" {
		t.Fatalf("%v %+v", err, in.Search)
	}
	var out strings.Builder
	in.WriteText(&out, a)
	want := "  empty: parent_id (read from $.issue_url): the API returned it empty for item 1 (external_id " + itoa(int(c.ID))
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "/pulls/9#issuecomment-") {
		t.Fatalf("the probe does not name the empty field with the object:\n%s", out.String())
	}
	if strings.Contains(out.String(), "marker: the route writes none") {
		t.Fatalf("a marker suggested on a route that writes one:\n%s", out.String())
	}
}

// On a route without a correlation marker whose write sends a text field
// as it is, the probe suggests a marker there.
func TestInspectSuggestsAMarker(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(clock.Now))
	a := buildFile(t, "social.yaml", testharness.FakeEnv(testharness.At{Addr: api.URL(), Secret: api.Token()}), clock.Now)
	in, err := a.Inspect(bg, httproute.InspectOptions{Account: "acct_1"})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	in.WriteText(&out, a)
	for _, want := range []string{"marker: the route writes none", `read: $.body`, `send "{{payload.body}}{{marker}}" in write.body.body`} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("the probe lacks %q:\n%s", want, out.String())
		}
	}
}
