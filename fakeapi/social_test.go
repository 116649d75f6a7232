package fakeapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

const asset1 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

type call struct {
	status int
	body   []byte
	err    error
}

// post sends one POST /v1/posts with a plain net/http client that cannot
// replay it (GetBody cleared, no keep-alive reuse).
func post(t *testing.T, api *fakeapi.SocialAPI, client *http.Client, payload string, hdr map[string]string) call {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, api.URL()+"/v1/posts", strings.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	if _, ok := hdr["Authorization"]; !ok {
		req.Header.Set("Authorization", "Bearer "+api.Token())
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	if client == nil {
		client = newClient(0)
	}
	resp, err := client.Do(req)
	if err != nil {
		return call{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return call{status: resp.StatusCode, body: b, err: err}
}

func newClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
}

func get(t *testing.T, api *fakeapi.SocialAPI, path string, auth bool) call {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, api.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+api.Token())
	}
	resp, err := newClient(5 * time.Second).Do(req)
	if err != nil {
		return call{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return call{status: resp.StatusCode, body: b, err: err}
}

func decodePost(t *testing.T, b []byte) fakeapi.Post {
	t.Helper()
	var p fakeapi.Post
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("decode post %q: %v", b, err)
	}
	return p
}

type listResp struct {
	Items      []map[string]any `json:"items"`
	NextCursor string           `json:"next_cursor"`
}

func list(t *testing.T, api *fakeapi.SocialAPI, account string, q url.Values) listResp {
	t.Helper()
	c := get(t, api, "/v1/accounts/"+url.PathEscape(account)+"/posts?"+q.Encode(), true)
	if c.err != nil || c.status != 200 {
		t.Fatalf("list: status %d err %v body %s", c.status, c.err, c.body)
	}
	var lr listResp
	if err := json.Unmarshal(c.body, &lr); err != nil {
		t.Fatal(err)
	}
	return lr
}

const hello = `{"account":"acct_1","body":"hello","assets":["` + asset1 + `"]}`

func TestSocialCreateSuccess(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(clock.Now))

	c := post(t, api, nil, `{"account":"acct_1","body":"hello","assets":["`+asset1+`"],"parent_id":"p_9"}`,
		map[string]string{"Idempotency-Key": "sk_1", "X-Settle-Attempt": "at_1"})
	if c.err != nil || c.status != http.StatusCreated {
		t.Fatalf("status %d err %v body %s", c.status, c.err, c.body)
	}
	p := decodePost(t, c.body)
	if p.ID != "p_1" || p.URL != api.URL()+"/p/p_1" || p.AuthorID != "acct_1" || p.Body != "hello" ||
		len(p.Assets) != 1 || p.Assets[0] != asset1 || p.ParentID != "p_9" || p.Visibility != "public" || !p.CreatedAt.Equal(t0) {
		t.Fatalf("unexpected post %+v", p)
	}
	var raw map[string]any
	_ = json.Unmarshal(c.body, &raw)
	if raw["created_at"] != "2025-03-01T12:00:00.123456789Z" {
		t.Fatalf("created_at = %v", raw["created_at"])
	}
	if api.Effects() != 1 || api.EffectsForKey("sk_1") != 1 || api.Writes() != 1 {
		t.Fatalf("effects %d for key %d writes %d", api.Effects(), api.EffectsForKey("sk_1"), api.Writes())
	}
	stored := api.Posts()
	if len(stored) != 1 || stored[0].IdempotencyKey != "sk_1" || stored[0].AttemptID != "at_1" {
		t.Fatalf("stored %+v", stored)
	}
	wl := api.WriteLog()
	if len(wl) != 1 || wl[0].Status != 201 || wl[0].AttemptID != "at_1" || len(wl[0].PostIDs) != 1 {
		t.Fatalf("write log %+v", wl)
	}

	if g := get(t, api, "/v1/posts/p_1", true); g.status != 200 || decodePost(t, g.body).ID != "p_1" {
		t.Fatalf("get: %d %s", g.status, g.body)
	}
	if g := get(t, api, "/p/p_1", false); g.status != 200 || !strings.Contains(string(g.body), "hello") {
		t.Fatalf("page: %d %s", g.status, g.body)
	}
	if g := get(t, api, "/v1/posts/p_404", true); g.status != 404 {
		t.Fatalf("get unknown: %d", g.status)
	}
	if g := get(t, api, "/p/p_404", false); g.status != 404 {
		t.Fatalf("page unknown: %d", g.status)
	}
	if api.Reads() != 2 || api.ListCalls() != 0 {
		t.Fatalf("reads %d list calls %d", api.Reads(), api.ListCalls())
	}
}

func TestSocialUnauthorized(t *testing.T) {
	const token = "tok_very_secret_123"
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialToken(token))
	if api.Token() != token {
		t.Fatal("Token()")
	}
	for _, auth := range []string{"", "Bearer wrong", "Basic " + token, "Bearer " + token + "x", token} {
		c := post(t, api, nil, hello, map[string]string{"Authorization": auth})
		if c.err != nil || c.status != http.StatusUnauthorized {
			t.Fatalf("auth %q: status %d err %v", auth, c.status, c.err)
		}
		if strings.Contains(string(c.body), token) {
			t.Fatalf("401 body echoes the token: %s", c.body)
		}
	}
	for _, path := range []string{"/v1/posts/p_1", "/v1/accounts/acct_1/posts"} {
		if g := get(t, api, path, false); g.status != http.StatusUnauthorized {
			t.Fatalf("GET %s without token: %d", path, g.status)
		}
	}
	if api.Effects() != 0 || api.Writes() != 5 || len(api.Posts()) != 0 {
		t.Fatalf("effects %d writes %d", api.Effects(), api.Writes())
	}
	// A 401 does not consume a fault.
	api.Next(fakeapi.Status(500))
	post(t, api, nil, hello, map[string]string{"Authorization": ""})
	if api.PendingFaults() != 1 {
		t.Fatal("401 consumed a fault")
	}
}

func TestSocialMalformed(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	for _, body := range []string{
		``, `{`, `[]`, `{"account":"acct_1"}`, `{"body":"x"}`,
		`{"account":"acct_1","body":"x","assets":["nothex"]}`,
		`{"account":"acct_1","body":"x","extra":1}`,
		`{"account":"acct_1","body":"x"} {}`,
	} {
		c := post(t, api, nil, body, nil)
		if c.err != nil || c.status != http.StatusBadRequest {
			t.Fatalf("body %q: status %d err %v", body, c.status, c.err)
		}
	}
	if api.Effects() != 0 {
		t.Fatalf("effects %d", api.Effects())
	}
}

func TestSocialCommitThenDrop(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	api.Next(fakeapi.CommitThenDrop())
	c := post(t, api, nil, hello, map[string]string{"Idempotency-Key": "sk_1"})
	if c.err == nil {
		t.Fatalf("expected a client error, got %d %s", c.status, c.body)
	}
	if api.Effects() != 1 || api.EffectsForKey("sk_1") != 1 || api.Writes() != 1 {
		t.Fatalf("effects %d writes %d", api.Effects(), api.Writes())
	}
	if wl := api.WriteLog(); wl[0].Status != 0 || wl[0].Fault.Kind != fakeapi.FaultCommitThenDrop {
		t.Fatalf("write log %+v", wl)
	}
	// The next POST is normal.
	if c := post(t, api, nil, hello, nil); c.status != 201 {
		t.Fatalf("after fault: %d %v", c.status, c.err)
	}
}

func TestSocialResetBeforeCommit(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	api.Next(fakeapi.ResetBeforeCommit())
	c := post(t, api, nil, hello, nil)
	if c.err == nil {
		t.Fatalf("expected a client error, got %d", c.status)
	}
	if !errors.Is(c.err, syscall.ECONNRESET) {
		t.Logf("client error (not ECONNRESET, acceptable): %v", c.err)
	}
	if api.Effects() != 0 || api.Writes() != 1 {
		t.Fatalf("effects %d writes %d", api.Effects(), api.Writes())
	}
}

func TestSocialDelay(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	api.Next(fakeapi.Delay(time.Minute))
	start := time.Now()
	c := post(t, api, newClient(200*time.Millisecond), hello, nil)
	if c.err == nil {
		t.Fatalf("expected a timeout, got %d", c.status)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("timeout took too long")
	}
	if api.Effects() != 1 {
		t.Fatalf("effects %d", api.Effects())
	}
	// A short delay is simply slow.
	api.Next(fakeapi.Delay(50 * time.Millisecond))
	if c := post(t, api, nil, hello, nil); c.status != 201 {
		t.Fatalf("short delay: %d %v", c.status, c.err)
	}
}

func TestSocialDelayEndsOnClose(t *testing.T) {
	api := fakeapi.NewSocialAPIServer(fakeapi.SocialConfig{})
	api.Next(fakeapi.Delay(time.Hour))
	done := make(chan call, 1)
	go func() { done <- post(t, api, newClient(0), hello, nil) }()
	deadline := time.Now().Add(5 * time.Second)
	for api.Writes() == 0 || api.Effects() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the POST never arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { api.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung on a Delay fault")
	}
	<-done
	api.Close() // idempotent
}

func TestSocialStatus(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	for _, code := range []int{400, 422, 429, 500, 502, 503, 504} {
		api.Next(fakeapi.Status(code))
		c := post(t, api, nil, hello, nil)
		if c.err != nil || c.status != code {
			t.Fatalf("want %d, got %d %v", code, c.status, c.err)
		}
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if err := json.Unmarshal(c.body, &e); err != nil || e.Error.Code == "" {
			t.Fatalf("error body %q", c.body)
		}
	}
	if api.Effects() != 0 {
		t.Fatalf("effects %d", api.Effects())
	}
}

func TestSocialFaultsInOrder(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	api.Next(fakeapi.Status(503), fakeapi.CommitThenDrop(), fakeapi.Status(429))
	if c := post(t, api, nil, hello, nil); c.status != 503 {
		t.Fatalf("1st: %d %v", c.status, c.err)
	}
	if c := post(t, api, nil, hello, nil); c.err == nil {
		t.Fatalf("2nd: %d", c.status)
	}
	if c := post(t, api, nil, hello, nil); c.status != 429 {
		t.Fatalf("3rd: %d %v", c.status, c.err)
	}
	if c := post(t, api, nil, hello, nil); c.status != 201 {
		t.Fatalf("4th: %d %v", c.status, c.err)
	}
	if api.Effects() != 2 || api.Writes() != 4 || api.PendingFaults() != 0 {
		t.Fatalf("effects %d writes %d", api.Effects(), api.Writes())
	}
}

func TestSocialVisibilityDelay(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(clock.Now))
	api.Next(fakeapi.VisibilityDelay(30 * time.Second))
	c := post(t, api, nil, hello, nil)
	if c.status != 201 {
		t.Fatalf("status %d %v", c.status, c.err)
	}
	id := decodePost(t, c.body).ID
	check := func(want bool) {
		t.Helper()
		g := get(t, api, "/v1/posts/"+id, true)
		page := get(t, api, "/p/"+id, false)
		lr := list(t, api, "acct_1", nil)
		if got := g.status == 200; got != want {
			t.Fatalf("get visible=%v, want %v", got, want)
		}
		if got := page.status == 200; got != want {
			t.Fatalf("page visible=%v, want %v", got, want)
		}
		if got := len(lr.Items) == 1; got != want {
			t.Fatalf("list visible=%v, want %v", got, want)
		}
	}
	check(false)
	clock.Advance(29 * time.Second)
	check(false)
	clock.Advance(time.Second)
	check(true)
	if api.Effects() != 1 {
		t.Fatalf("effects %d", api.Effects())
	}
}

func TestSocialDefaultVisibilityDelay(t *testing.T) {
	clock := testharness.NewManualClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(clock.Now), fakeapi.WithVisibilityDelay(time.Minute))
	post(t, api, nil, hello, nil)
	if len(list(t, api, "acct_1", nil).Items) != 0 {
		t.Fatal("visible too early")
	}
	clock.Advance(time.Minute)
	if len(list(t, api, "acct_1", nil).Items) != 1 {
		t.Fatal("not visible after the delay")
	}
}

func TestSocialCorruptions(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	cases := []struct {
		fault     fakeapi.Fault
		check     func(p fakeapi.Post) bool
		pageFound bool
	}{
		{fakeapi.WrongAuthor("acct_evil"), func(p fakeapi.Post) bool { return p.AuthorID == "acct_evil" }, true},
		{fakeapi.WrongParent("p_77"), func(p fakeapi.Post) bool { return p.ParentID == "p_77" }, true},
		{fakeapi.MissingAsset(), func(p fakeapi.Post) bool { return len(p.Assets) == 0 }, true},
		{fakeapi.URL404(), func(p fakeapi.Post) bool { return p.AuthorID == "acct_1" }, false},
		{fakeapi.Draft(), func(p fakeapi.Post) bool { return p.Visibility == "draft" }, false},
	}
	for _, tc := range cases {
		t.Run(tc.fault.String(), func(t *testing.T) {
			api.Next(tc.fault)
			c := post(t, api, nil, hello, nil)
			if c.status != 201 {
				t.Fatalf("status %d %v", c.status, c.err)
			}
			p := decodePost(t, c.body)
			if !tc.check(p) {
				t.Fatalf("response does not show the corruption: %+v", p)
			}
			g := get(t, api, "/v1/posts/"+p.ID, true)
			if g.status != 200 || !tc.check(decodePost(t, g.body)) {
				t.Fatalf("get: %d %s", g.status, g.body)
			}
			if page := get(t, api, "/p/"+p.ID, false); (page.status == 200) != tc.pageFound {
				t.Fatalf("page status %d", page.status)
			}
		})
	}
	if api.Effects() != len(cases) {
		t.Fatalf("effects %d", api.Effects())
	}
}

func TestSocialDraftDropped(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	api.Next(fakeapi.Draft().Dropped())
	if c := post(t, api, nil, hello, nil); c.err == nil {
		t.Fatalf("expected a client error, got %d", c.status)
	}
	ps := api.Posts()
	if api.Effects() != 1 || len(ps) != 1 || ps[0].Visibility != "draft" {
		t.Fatalf("effects %d posts %+v", api.Effects(), ps)
	}
}

func TestSocialDuplicate(t *testing.T) {
	api := fakeapi.NewSocialAPI(t)
	api.Next(fakeapi.Duplicate())
	c := post(t, api, nil, hello, map[string]string{"Idempotency-Key": "sk_d"})
	if c.status != 201 {
		t.Fatalf("status %d %v", c.status, c.err)
	}
	if id := decodePost(t, c.body).ID; id != "p_1" {
		t.Fatalf("answered with %s", id)
	}
	ps := api.Posts()
	if api.Effects() != 2 || api.EffectsForKey("sk_d") != 2 || len(ps) != 2 || ps[0].Body != ps[1].Body || ps[0].ID == ps[1].ID {
		t.Fatalf("effects %d posts %+v", api.Effects(), ps)
	}
}

func TestSocialIdempotencyKey(t *testing.T) {
	t.Run("honoured", func(t *testing.T) {
		api := fakeapi.NewSocialAPI(t, fakeapi.WithIdempotencyKeys())
		api.Next(fakeapi.CommitThenDrop())
		if c := post(t, api, nil, hello, map[string]string{"Idempotency-Key": "sk_1", "X-Settle-Attempt": "at_1"}); c.err == nil {
			t.Fatal("expected the response to be dropped")
		}
		c := post(t, api, nil, hello, map[string]string{"Idempotency-Key": "sk_1", "X-Settle-Attempt": "at_2"})
		if c.status != 200 || decodePost(t, c.body).ID != "p_1" {
			t.Fatalf("replay: %d %s", c.status, c.body)
		}
		if api.Effects() != 1 || api.EffectsForKey("sk_1") != 1 || api.Writes() != 2 {
			t.Fatalf("effects %d", api.Effects())
		}
		if wl := api.WriteLog(); !wl[1].Replay || wl[1].AttemptID != "at_2" {
			t.Fatalf("write log %+v", wl)
		}
		// Another key, and no key, create.
		post(t, api, nil, hello, map[string]string{"Idempotency-Key": "sk_2"})
		post(t, api, nil, hello, nil)
		post(t, api, nil, hello, nil)
		if api.Effects() != 4 || api.EffectsForKey("sk_2") != 1 {
			t.Fatalf("effects %d", api.Effects())
		}
	})
	t.Run("ignored", func(t *testing.T) {
		api := fakeapi.NewSocialAPI(t)
		for range 2 {
			if c := post(t, api, nil, hello, map[string]string{"Idempotency-Key": "sk_1"}); c.status != 201 {
				t.Fatalf("status %d", c.status)
			}
		}
		if api.Effects() != 2 || api.EffectsForKey("sk_1") != 2 {
			t.Fatalf("effects %d", api.Effects())
		}
	})
}

func TestSocialListPagination(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := testharness.NewManualClock(t0)
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(clock.Now), fakeapi.WithSocialPageSize(2))
	for i := range 5 {
		post(t, api, nil, fmt.Sprintf(`{"account":"acct_1","body":"post %d"}`, i), nil)
		clock.Advance(time.Second)
	}
	post(t, api, nil, `{"account":"acct_2","body":"other"}`, nil)
	injected := api.Inject(fakeapi.Post{AuthorID: "acct_1", Body: "planted", CreatedAt: t0.Add(-time.Hour)})
	if api.Effects() != 6 {
		t.Fatalf("inject counted as an effect: %d", api.Effects())
	}

	var bodies []string
	cursor := ""
	pages := 0
	for {
		q := url.Values{}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		lr := list(t, api, "acct_1", q)
		pages++
		if len(lr.Items) > 2 {
			t.Fatalf("page of %d items", len(lr.Items))
		}
		for _, it := range lr.Items {
			bodies = append(bodies, it["body"].(string))
		}
		// A post created between pages must not shift the next page.
		if pages == 1 {
			post(t, api, nil, `{"account":"acct_1","body":"late"}`, nil)
		}
		if lr.NextCursor == "" {
			break
		}
		cursor = lr.NextCursor
	}
	want := []string{"post 4", "post 3", "post 2", "post 1", "post 0", "planted"}
	if strings.Join(bodies, "|") != strings.Join(want, "|") {
		t.Fatalf("bodies %v, want %v", bodies, want)
	}
	if pages != 3 || api.ListCalls() != 3 {
		t.Fatalf("pages %d list calls %d", pages, api.ListCalls())
	}
	_ = injected

	// Window filter, inclusive.
	q := url.Values{"since": {t0.Add(time.Second).Format(time.RFC3339)}, "until": {t0.Add(3 * time.Second).Format(time.RFC3339Nano)}}
	lr := list(t, api, "acct_1", q)
	if len(lr.Items) != 2 || lr.NextCursor == "" {
		t.Fatalf("window page 1: %+v", lr)
	}
	q.Set("cursor", lr.NextCursor)
	lr2 := list(t, api, "acct_1", q)
	if len(lr2.Items) != 1 || lr2.NextCursor != "" || lr2.Items[0]["body"] != "post 1" {
		t.Fatalf("window page 2: %+v", lr2)
	}
	// Bad query.
	if g := get(t, api, "/v1/accounts/acct_1/posts?since=yesterday", true); g.status != 400 {
		t.Fatalf("bad since: %d", g.status)
	}
	if g := get(t, api, "/v1/accounts/acct_1/posts?cursor=zzz", true); g.status != 400 {
		t.Fatalf("bad cursor: %d", g.status)
	}
}

func TestSocialOmitBodyInList(t *testing.T) {
	api := fakeapi.NewSocialAPI(t, fakeapi.WithOmitBodyInList())
	post(t, api, nil, hello, nil)
	lr := list(t, api, "acct_1", nil)
	if len(lr.Items) != 1 {
		t.Fatalf("items %+v", lr.Items)
	}
	if _, ok := lr.Items[0]["body"]; ok {
		t.Fatal("body present")
	}
	if _, ok := lr.Items[0]["assets"]; ok {
		t.Fatal("assets present")
	}
	if g := get(t, api, "/v1/posts/p_1", true); decodePost(t, g.body).Body != "hello" {
		t.Fatal("get lacks the body")
	}
}

func TestSocialConcurrent(t *testing.T) {
	api := fakeapi.NewSocialAPI(t, fakeapi.WithIdempotencyKeys())
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			post(t, api, nil, hello, map[string]string{"Idempotency-Key": fmt.Sprintf("sk_%d", i%5)})
			get(t, api, "/v1/accounts/acct_1/posts", true)
			_ = api.Posts()
		}()
	}
	wg.Wait()
	if api.Effects() != 5 || api.Writes() != 20 {
		t.Fatalf("effects %d writes %d", api.Effects(), api.Writes())
	}
}
