package httproute_test

import (
	"github.com/cockroachdb/errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// TestShortPageDoesNotEndAListing: GitHub caps a page at 100 silently
// (the fake here at 5); a route that asks for pages of 10 by page number
// gets a short first page. Taken as the last, it would leave the comments
// on page 2 — our own write among them — unread (a lost response would
// look like "not written", and be written again). Only an empty page, or
// the declared total, ends the listing.
func TestShortPageDoesNotEndAListing(t *testing.T) {
	clock := testharness.NewManualClock(rt0)
	api := fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubToken(secretToken), fakeapi.WithGitHubClock(clock.Now), fakeapi.WithGitHubPageCap(5))
	paged := []string{
		"&per_page={{page_size}}", "&per_page={{page_size}}&page={{page}}",
		"      next_link: true\n", "      end: empty_page\n",
		"page_size: 100      # GitHub's largest page", "page_size: 10",
	}
	a := buildFile(t, "github_comments.yaml", githubEnv(api), clock.Now, paged...)
	for i := 0; i < 7; i++ {
		api.Inject(fakeapi.GitHubComment{Issue: 3, Body: "by hand " + itoa(i), UserID: 77, UserLogin: "someone"})
		clock.Advance(time.Second)
	}
	pl := normalized(t, a, `{"body":"Build #7 passed"}`)
	req := writeReq(1, api.UserID(), "3", pl)
	if _, err := a.Write(bg, req); err != nil {
		t.Fatal(err)
	}
	q := adapter.SearchQuery{Account: api.UserID(), From: rt0.Add(-time.Minute), To: rt0.Add(time.Hour)}
	before := api.ListCalls()
	recs, err := a.Search(bg, q)
	if err != nil {
		t.Fatal(err)
	}
	if pages := api.ListCalls() - before; pages != 3 {
		t.Fatalf("read %d pages, want 3 (5, 3, then the empty page that proves the end)", pages)
	}
	if len(recs) != 8 || recs[7].CorrelationID != req.IntentID {
		t.Fatalf("%d records, the last %+v: the write on page 2 was not read", len(recs), recs[len(recs)-1])
	}

	// max_pages reached is a read failure of class unknown, never a list:
	// the records read so far come with an error marked
	// adapter.ErrListingIncomplete (they can prove a write present only).
	short := buildFile(t, "github_comments.yaml", githubEnv(api), clock.Now, append(paged, "max_pages: 50", "max_pages: 2")...)
	recs, err = short.Search(bg, q)
	ce := callError(t, err)
	if !errors.Is(err, adapter.ErrListingIncomplete) || ce.Class != adapter.Unknown || ce.Code != "listing_incomplete" || !strings.Contains(err.Error(), "max_pages") {
		t.Fatalf("max_pages reached: %v %+v", recs, err)
	}
	if len(recs) != 8 {
		t.Fatalf("max_pages reached: %d records read so far returned, want the 8 of pages 1 and 2", len(recs))
	}
}

// TestDeclaredTotalEndsAListing: an offset-paged API that caps pages at 5
// silently and says its total. The offsets advance by what was received
// (0, 5, 10: asking for offset 10 after a capped page would skip items 5
// to 9), and the declared total ends the listing without an empty page.
// Before, the first short page ended it with 5 of 12 items.
func TestDeclaredTotalEndsAListing(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	rec := newRecorder(t, func(r *http.Request) (int, string) {
		mu.Lock()
		asked = append(asked, r.URL.RawQuery)
		mu.Unlock()
		off := atoi(r.URL.Query().Get("offset"))
		var items []string
		for i := off; i < 12 && i < off+min(5, atoi(r.URL.Query().Get("limit"))); i++ {
			items = append(items, `{"id":"i`+itoa(i)+`","by":"u","at":1700000000,"t":"x"}`)
		}
		return 200, `{"total":12,"rows":[` + strings.Join(items, ",") + `]}`
	})
	a := buildYAML(t, []byte(`routes:
  - name: offsets
    base_url: ${env:BASE}
    write: {method: POST, url: "{{base}}/w", response: {external_id: $.id}}
    search:
      url: "{{base}}/l?offset={{offset}}&limit={{page_size}}"
      items: $.rows
      page_size: 10
      total: $.total
      fields: {external_id: $.id, author_id: $.by, created_at: $.at, payload: {t: $.t}}
    readback: {url: "{{base}}/r/{{external_id}}"}
    policy: {retry: never}
`), map[string]string{"BASE": rec.srv.URL})
	recs, err := a.Search(bg, adapter.SearchQuery{Account: "u"})
	if err != nil || len(recs) != 12 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(asked, " "); got != "offset=0&limit=10 offset=5&limit=10 offset=10&limit=10" {
		t.Fatalf("pages asked: %s", got)
	}
}
