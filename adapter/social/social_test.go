package social_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/adaptertest"
	"github.com/settle-dev/settle/adapter/social"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/testharness"
)

// token is distinctive so that a leak into any error string is caught.
const token = "tok_S3CRET_must_never_leak_42"

const (
	asset1 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	asset2 = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
)

func newAPI(t *testing.T, opts ...fakeapi.SocialOption) *fakeapi.SocialAPI {
	t.Helper()
	return fakeapi.NewSocialAPI(t, append([]fakeapi.SocialOption{fakeapi.WithSocialToken(token)}, opts...)...)
}

func newAdapter(t *testing.T, baseURL string, mod func(*social.Config)) *social.Adapter {
	t.Helper()
	cfg := social.Config{BaseURL: baseURL, Token: token}
	if mod != nil {
		mod(&cfg)
	}
	a, err := social.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// noToken fails the test if err (its text or its CallError message) holds
// the token.

func normalize(t *testing.T, raw string) json.RawMessage {
	t.Helper()
	p, err := social.NormalizePayload(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("normalize %s: %v", raw, err)
	}
	return p
}

func writeReq(t *testing.T, raw string) adapter.WriteRequest {
	t.Helper()
	return adapter.WriteRequest{
		IntentID:       "in_1",
		AttemptID:      "at_1",
		RequestID:      "req_1",
		IdempotencyKey: "sk_1",
		Account:        "acct_1",
		Payload:        normalize(t, raw),
	}
}

const helloPayload = `{"body":"hello","assets":["` + asset1 + `"]}`

func TestWriteSuccess(t *testing.T) {
	api := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	req := writeReq(t, helloPayload)
	req.ParentExternalID = "p_parent"
	res, err := a.Write(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExternalID != "p_1" || res.LiveURL != api.URL()+"/p/p_1" || res.StatusCode != http.StatusCreated {
		t.Fatalf("result %+v", res)
	}
	ps := api.Posts()
	if len(ps) != 1 {
		t.Fatalf("posts %+v", ps)
	}
	p := ps[0]
	if p.AuthorID != "acct_1" || p.Body != "hello" || len(p.Assets) != 1 || p.Assets[0] != asset1 ||
		p.ParentID != "p_parent" || p.IdempotencyKey != "sk_1" || p.AttemptID != "at_1" {
		t.Fatalf("stored %+v", p)
	}
	if api.Effects() != 1 || api.Writes() != 1 {
		t.Fatalf("effects %d writes %d", api.Effects(), api.Writes())
	}
	code, err := a.Probe(context.Background(), res.LiveURL)
	if err != nil || code != 200 {
		t.Fatalf("probe %d %v", code, err)
	}
}

// A server that spells its JSON otherwise (PHP's "\/" and \u escapes,
// System.Text.Json's "\u002B" in a timestamp's offset, keys in another
// order, white space, members settle does not know) gives the same result:
// the adapter's one-pass reading of the response leaves such a body to
// encoding/json, and the timestamp is read with its escapes undone
// (adapter.JSONTime: time.Time's UnmarshalJSON would refuse it and make
// the write's outcome unknown).
func TestWriteReadsARespelledResponse(t *testing.T) {
	api := newAPI(t)
	api.Next(fakeapi.Respelled())
	var raw []byte
	a := newAdapter(t, api.URL(), func(c *social.Config) {
		c.Client = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := http.DefaultTransport.RoundTrip(r)
			if err == nil && r.Method == http.MethodPost {
				raw, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				resp.Body = io.NopCloser(bytes.NewReader(raw))
			}
			return resp, err
		})}
	})
	res, err := a.Write(context.Background(), writeReq(t, `{"body":"café"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`:\/\/`)) || !bytes.Contains(raw, []byte(`\u00e9`)) || !bytes.Contains(raw, []byte(`\u002B00:00"`)) ||
		!bytes.Contains(raw, []byte("x_server")) {
		t.Fatalf("the response was not respelled: %s", raw)
	}
	if res.ExternalID != "p_1" || res.LiveURL != api.URL()+"/p/p_1" || res.StatusCode != http.StatusCreated || api.Effects() != 1 {
		t.Fatalf("result %+v, %d effects", res, api.Effects())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestWriteCommitThenDrop(t *testing.T) {
	api := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	api.Next(fakeapi.CommitThenDrop())
	_, err := a.Write(context.Background(), writeReq(t, helloPayload))
	ce := callError(t, err)
	if ce.Class != adapter.Unknown || ce.Retryable {
		t.Fatalf("got %+v", ce)
	}
	if api.Effects() != 1 || api.Writes() != 1 {
		t.Fatalf("effects %d writes %d (the client must not replay)", api.Effects(), api.Writes())
	}
}

func TestWriteResetBeforeCommit(t *testing.T) {
	api := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	api.Next(fakeapi.ResetBeforeCommit())
	_, err := a.Write(context.Background(), writeReq(t, helloPayload))
	ce := callError(t, err)
	if ce.Class != adapter.Unknown {
		t.Fatalf("got %+v", ce)
	}
	if api.Effects() != 0 || api.Writes() != 1 {
		t.Fatalf("effects %d writes %d", api.Effects(), api.Writes())
	}
}

func TestWriteNotSent(t *testing.T) {
	api := newAPI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	a := newAdapter(t, "http://"+addr, nil)
	_, err = a.Write(context.Background(), writeReq(t, helloPayload))
	ce := callError(t, err)
	if ce.Class != adapter.NotSent || !ce.Retryable {
		t.Fatalf("got %+v", ce)
	}
	if api.Writes() != 0 || api.Effects() != 0 {
		t.Fatalf("writes %d", api.Writes())
	}
}

func TestWriteStatuses(t *testing.T) {
	api := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	cases := []struct {
		code      int
		class     adapter.Class
		retryable bool
	}{
		{400, adapter.Rejected, false},
		{401, adapter.Rejected, false},
		{422, adapter.Rejected, false},
		{429, adapter.Rejected, true},
		{408, adapter.Unknown, false},
		{409, adapter.Unknown, false},
		{500, adapter.Unknown, false},
		{502, adapter.Unknown, false},
		{503, adapter.Unknown, false},
		{504, adapter.Unknown, false},
	}
	for _, tc := range cases {
		api.Next(fakeapi.Status(tc.code))
		_, err := a.Write(context.Background(), writeReq(t, helloPayload))
		ce := callError(t, err)
		if ce.Class != tc.class || ce.Retryable != tc.retryable || ce.StatusCode != tc.code {
			t.Errorf("HTTP %d: got %+v", tc.code, ce)
		}
	}
	if api.Effects() != 0 || api.Writes() != len(cases) {
		t.Fatalf("effects %d writes %d", api.Effects(), api.Writes())
	}
}

func TestWriteUnauthorized(t *testing.T) {
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialToken("another_token"))
	a := newAdapter(t, api.URL(), nil)
	_, err := a.Write(context.Background(), writeReq(t, helloPayload))
	if ce := callError(t, err); ce.Class != adapter.Rejected || ce.StatusCode != 401 {
		t.Fatalf("got %+v", ce)
	}
	if api.Effects() != 0 {
		t.Fatal("effect without auth")
	}
}

func TestWriteTimeoutAfterSend(t *testing.T) {
	api := newAPI(t)
	a := newAdapter(t, api.URL(), func(c *social.Config) { c.Client = &http.Client{Timeout: 200 * time.Millisecond} })
	api.Next(fakeapi.Delay(time.Minute))
	_, err := a.Write(context.Background(), writeReq(t, helloPayload))
	ce := callError(t, err)
	if ce.Class != adapter.Unknown || ce.Code != "timeout_after_send" {
		t.Fatalf("got %+v", ce)
	}
	if api.Effects() != 1 || api.Writes() != 1 {
		t.Fatalf("effects %d writes %d", api.Effects(), api.Writes())
	}
}

func TestWriteCancelledContext(t *testing.T) {
	api := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := a.Write(ctx, writeReq(t, helloPayload))
	if ce := callError(t, err); ce.Class != adapter.NotSent {
		t.Fatalf("got %+v", ce)
	}
	if api.Writes() != 0 {
		t.Fatal("a cancelled write was sent")
	}
}

func TestWriteUnparseableSuccess(t *testing.T) {
	for _, body := range []string{`{}`, `not json`, `{"id":""}`, ``} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(body))
		}))
		a := newAdapter(t, srv.URL, nil)
		_, err := a.Write(context.Background(), writeReq(t, helloPayload))
		srv.Close()
		ce := callError(t, err)
		if ce.Class != adapter.Unknown || ce.Code != "response_unparseable" || ce.StatusCode != 201 {
			t.Fatalf("body %q: got %+v", body, ce)
		}
	}
}

func TestWriteIdempotentRetry(t *testing.T) {
	api := newAPI(t, fakeapi.WithIdempotencyKeys())
	a := newAdapter(t, api.URL(), func(c *social.Config) { c.IdempotencyKey = true; c.KeyRetention = 24 * time.Hour })
	api.Next(fakeapi.CommitThenDrop())
	req := writeReq(t, helloPayload)
	if _, err := a.Write(context.Background(), req); err == nil {
		t.Fatal("expected the response to be lost")
	}
	req.AttemptID = "at_2"
	res, err := a.Write(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExternalID != "p_1" || res.StatusCode != 200 {
		t.Fatalf("replay %+v", res)
	}
	if api.EffectsForKey("sk_1") != 1 || api.Effects() != 1 {
		t.Fatalf("effects for key %d", api.EffectsForKey("sk_1"))
	}
	wl := api.WriteLog()
	if len(wl) != 2 || wl[0].AttemptID != "at_1" || wl[1].AttemptID != "at_2" || wl[1].IdempotencyKey != "sk_1" {
		t.Fatalf("write log %+v", wl)
	}
}

func TestWriteInvalidRequest(t *testing.T) {
	api := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	for name, req := range map[string]adapter.WriteRequest{
		"bad payload": {Account: "acct_1", IdempotencyKey: "sk", Payload: json.RawMessage(`{"body":""}`)},
		"no payload":  {Account: "acct_1", IdempotencyKey: "sk"},
		"no account":  {IdempotencyKey: "sk", Payload: normalize(t, helloPayload)},
		"bad key":     {Account: "acct_1", IdempotencyKey: "sk\r\nX-Evil: 1", Payload: normalize(t, helloPayload)},
	} {
		_, err := a.Write(context.Background(), req)
		ce := callError(t, err)
		if ce.Class != adapter.NotSent || ce.Retryable {
			t.Errorf("%s: got %+v", name, ce)
		}
	}
	if api.Writes() != 0 {
		t.Fatalf("writes %d", api.Writes())
	}
}

func TestSearchPagination(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := testharness.NewManualClock(t0)
	api := newAPI(t, fakeapi.WithSocialClock(clock.Now), fakeapi.WithSocialPageSize(2))
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()

	intents := map[string]string{} // external id -> intent payload hash
	for i := range 5 {
		raw := fmt.Sprintf(`{"body":"post %d","assets":["%s","%s"]}`, i, asset2, asset1)
		if i%2 == 0 {
			raw = fmt.Sprintf(`{"body":"post %d"}`, i)
		}
		req := writeReq(t, raw)
		res, err := a.Write(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		intents[res.ExternalID] = hash(t, req.Payload)
		clock.Advance(time.Second)
	}
	other := writeReq(t, helloPayload)
	other.Account = "acct_2"
	if _, err := a.Write(ctx, other); err != nil {
		t.Fatal(err)
	}
	// Someone else's post with the same text but un-normalised (CRLF, NFD)
	// hashes like the normalised intent.
	planted := api.Inject(fakeapi.Post{AuthorID: "acct_1", Body: "cafe\u0301\r\nbar", CreatedAt: t0.Add(-time.Second)})
	intentCafe := normalize(t, `{"body":"caf\u00e9\nbar"}`)

	listsBefore := api.ListCalls()
	recs, err := a.Search(ctx, adapter.SearchQuery{Account: "acct_1", From: t0.Add(-time.Minute), To: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 6 {
		t.Fatalf("got %d records: %+v", len(recs), recs)
	}
	if calls := api.ListCalls() - listsBefore; calls != 3 {
		t.Fatalf("list calls %d, want 3 pages", calls)
	}
	for _, r := range recs {
		if r.Partial || r.Payload == nil || r.AuthorID != "acct_1" || r.Visibility != "public" || r.LiveURL == "" || r.CreatedAt.IsZero() {
			t.Fatalf("record %+v", r)
		}
		if r.ExternalID == planted.ID {
			if hash(t, r.Payload) != hash(t, intentCafe) {
				t.Fatalf("planted payload %s does not hash like %s", r.Payload, intentCafe)
			}
			continue
		}
		want, ok := intents[r.ExternalID]
		if !ok {
			t.Fatalf("unexpected record %+v", r)
		}
		if got := hash(t, r.Payload); got != want {
			t.Fatalf("record %s payload %s: hash %s, intent %s", r.ExternalID, r.Payload, got, want)
		}
	}

	// A narrower window.
	recs, err = a.Search(ctx, adapter.SearchQuery{Account: "acct_1", From: t0.Add(time.Second), To: t0.Add(2 * time.Second)})
	if err != nil || len(recs) != 2 {
		t.Fatalf("narrow window: %d records, %v", len(recs), err)
	}
	// An empty window.
	recs, err = a.Search(ctx, adapter.SearchQuery{Account: "acct_9", From: t0, To: t0.Add(time.Hour)})
	if err != nil || len(recs) != 0 {
		t.Fatalf("empty: %+v %v", recs, err)
	}
	// Bad queries.
	for _, q := range []adapter.SearchQuery{{}, {Account: "acct_1", From: t0, To: t0.Add(-time.Second)}} {
		_, err := a.Search(ctx, q)
		if err == nil {
			t.Fatalf("query %+v accepted", q)
		}
		noToken(t, err)
	}
}

func TestSearchDetectsCorruption(t *testing.T) {
	api := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()
	api.Next(fakeapi.MissingAsset())
	req := writeReq(t, helloPayload)
	if _, err := a.Write(ctx, req); err != nil {
		t.Fatal(err)
	}
	recs, err := a.Search(ctx, adapter.SearchQuery{Account: "acct_1"})
	if err != nil || len(recs) != 1 {
		t.Fatalf("%+v %v", recs, err)
	}
	if hash(t, recs[0].Payload) == hash(t, req.Payload) {
		t.Fatal("a post without its asset hashes like the intent")
	}
}

func TestSearchOmitsBody(t *testing.T) {
	api := newAPI(t, fakeapi.WithOmitBodyInList())
	a := newAdapter(t, api.URL(), func(c *social.Config) { c.OmitsBody = true })
	ctx := context.Background()
	req := writeReq(t, helloPayload)
	res, err := a.Write(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := a.Search(ctx, adapter.SearchQuery{Account: "acct_1"})
	if err != nil || len(recs) != 1 {
		t.Fatalf("%+v %v", recs, err)
	}
	if !recs[0].Partial || recs[0].Payload != nil || recs[0].ExternalID != res.ExternalID {
		t.Fatalf("record %+v", recs[0])
	}
	full, err := a.Get(ctx, recs[0].ExternalID)
	if err != nil {
		t.Fatal(err)
	}
	if full.Partial || hash(t, full.Payload) != hash(t, req.Payload) {
		t.Fatalf("full record %+v", full)
	}
	if !a.Capabilities().SearchOmitsBody {
		t.Fatal("capabilities")
	}
}

func TestSearchPageBound(t *testing.T) {
	api := newAPI(t, fakeapi.WithSocialPageSize(1))
	a := newAdapter(t, api.URL(), nil)
	for range social.MaxSearchPages + 1 {
		api.Inject(fakeapi.Post{AuthorID: "acct_1", Body: "x"})
	}
	_, err := a.Search(context.Background(), adapter.SearchQuery{Account: "acct_1"})
	if err == nil || !strings.Contains(err.Error(), "pages") {
		t.Fatalf("want a page-bound error, got %v", err)
	}
	noToken(t, err)
	if api.ListCalls() != social.MaxSearchPages {
		t.Fatalf("list calls %d", api.ListCalls())
	}
}

func TestSearchServerError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer srv.Close()
	a := newAdapter(t, srv.URL, nil)
	_, err := a.Search(context.Background(), adapter.SearchQuery{Account: "acct_1"})
	if ce := callError(t, err); ce.StatusCode != 500 {
		t.Fatalf("got %+v", ce)
	}
	_, err = a.Get(context.Background(), "p_1")
	if ce := callError(t, err); ce.StatusCode != 500 {
		t.Fatalf("got %+v", ce)
	}
}

func TestGet(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := testharness.NewManualClock(t0)
	api := newAPI(t, fakeapi.WithSocialClock(clock.Now))
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()

	api.Next(fakeapi.VisibilityDelay(10 * time.Second))
	req := writeReq(t, helloPayload)
	res, err := a.Write(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, res.ExternalID); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("invisible post: %v", err)
	}
	if code, err := a.Probe(ctx, res.LiveURL); err != nil || code != 404 {
		t.Fatalf("probe invisible: %d %v", code, err)
	}
	clock.Advance(10 * time.Second)
	r, err := a.Get(ctx, res.ExternalID)
	if err != nil {
		t.Fatal(err)
	}
	if r.ExternalID != res.ExternalID || r.LiveURL != res.LiveURL || r.AuthorID != "acct_1" || !r.CreatedAt.Equal(t0) ||
		r.Partial || hash(t, r.Payload) != hash(t, req.Payload) {
		t.Fatalf("record %+v", r)
	}
	for _, id := range []string{"p_404", "../p_1", "p_1/x", "p 1?x=1"} {
		if _, err := a.Get(ctx, id); !errors.Is(err, adapter.ErrNotFound) {
			t.Fatalf("Get(%q): %v", id, err)
		}
	}
	if _, err := a.Get(ctx, ""); err == nil {
		t.Fatal("empty id accepted")
	}
}

func TestProbe(t *testing.T) {
	api := newAPI(t)
	a := newAdapter(t, api.URL(), nil)
	ctx := context.Background()
	api.Next(fakeapi.Draft(), fakeapi.URL404())
	for range 2 {
		res, err := a.Write(ctx, writeReq(t, helloPayload))
		if err != nil {
			t.Fatal(err)
		}
		if code, err := a.Probe(ctx, res.LiveURL); err != nil || code != 404 {
			t.Fatalf("probe: %d %v", code, err)
		}
		if _, err := a.Get(ctx, res.ExternalID); err != nil {
			t.Fatalf("the API should still have the post: %v", err)
		}
	}

	// Probe never sends credentials, not even from URL user info, and does
	// not follow redirects.
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/login", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	b := newAdapter(t, srv.URL, nil)
	withUser := strings.Replace(srv.URL, "http://", "http://user:pass@", 1)
	for url, want := range map[string]int{srv.URL + "/p/1": 200, withUser + "/p/2": 200, srv.URL + "/redirect": 302} {
		code, err := b.Probe(ctx, url)
		if err != nil || code != want {
			t.Fatalf("probe %s: %d %v", url, code, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("requests %d", len(seen))
	}
	for _, h := range seen {
		if h != "" {
			t.Fatalf("probe sent Authorization %q", h)
		}
	}
	for _, bad := range []string{"", "/p/1", "ftp://x/y", "::"} {
		if _, err := b.Probe(ctx, bad); err == nil {
			t.Fatalf("probe %q accepted", bad)
		}
	}
}

func TestNewValidation(t *testing.T) {
	cases := []struct {
		cfg   social.Config
		field string
	}{
		{social.Config{Token: token}, "config.BaseURL"},
		{social.Config{BaseURL: "api.example.com", Token: token}, "config.BaseURL"},
		{social.Config{BaseURL: "ftp://api.example.com", Token: token}, "config.BaseURL"},
		{social.Config{BaseURL: "https://", Token: token}, "config.BaseURL"},
		{social.Config{BaseURL: "https://u:" + token + "@api.example.com", Token: token}, "config.BaseURL"},
		{social.Config{BaseURL: "https://api.example.com?k=" + token, Token: token}, "config.BaseURL"},
		{social.Config{BaseURL: "https://api.example.com"}, "config.Token"},
		{social.Config{BaseURL: "https://api.example.com", Token: token + "\n"}, "config.Token"},
		{social.Config{BaseURL: "https://api.example.com", Token: token, IdempotencyKey: true}, "config.KeyRetention"},
		{social.Config{BaseURL: "https://api.example.com", Token: token, KeyRetention: -time.Second}, "config.KeyRetention"},
	}
	for _, tc := range cases {
		_, err := social.New(tc.cfg)
		if err == nil {
			t.Fatalf("%+v accepted", tc.cfg.BaseURL)
		}
		noToken(t, err)
		if !strings.Contains(err.Error(), tc.field) || !errors.Is(err, events.ErrInvalidField) {
			t.Fatalf("error %q does not name %s", err, tc.field)
		}
	}
	a, err := social.New(social.Config{BaseURL: "https://api.example.com/social/", Token: token, IdempotencyKey: true, KeyRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	want := adapter.Capabilities{IdempotencyKey: true, KeyRetention: time.Hour, Search: true, SearchAuthoritative: true}
	if got := a.Capabilities(); got != want {
		t.Fatalf("capabilities %+v", got)
	}
}

func TestBaseURLPathPrefix(t *testing.T) {
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"p_7","url":"https://example.com/p/p_7"}`))
	}))
	defer srv.Close()
	a := newAdapter(t, srv.URL+"/social/", nil)
	res, err := a.Write(context.Background(), writeReq(t, helloPayload))
	if err != nil {
		t.Fatal(err)
	}
	if path != "/social/v1/posts" || res.ExternalID != "p_7" {
		t.Fatalf("request path %q, result %+v", path, res)
	}
}

func TestNormalizePayload(t *testing.T) {
	valid := []struct{ in, out string }{
		{`{"body":"hello"}`, `{"assets":[],"body":"hello"}`},
		{`{"assets":[],"body":"hello"}`, `{"assets":[],"body":"hello"}`},
		{` { "body" : "a\r\nb", "assets" : ["` + asset2 + `","` + asset1 + `"] } `, `{"assets":["` + asset2 + `","` + asset1 + `"],"body":"a\nb"}`},
		{`{"body":"cafe\u0301 <&>"}`, `{"assets":[],"body":"café <&>"}`},
	}
	for _, tc := range valid {
		got, err := social.NormalizePayload(json.RawMessage(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if string(got) != tc.out {
			t.Fatalf("%s: got %s, want %s", tc.in, got, tc.out)
		}
	}
	invalid := []struct{ in, field string }{
		{``, "payload"},
		{`null`, "payload"},
		{`"hello"`, "payload"},
		{`[1]`, "payload"},
		{`{"body":"a"} x`, "payload"},
		{`{"body":"a","body":"b"}`, "payload.body"},
		{`{}`, "payload.body"},
		{`{"body":null}`, "payload.body"},
		{`{"body":1}`, "payload.body"},
		{`{"body":""}`, "payload.body"},
		{`{"body":"  \n"}`, "payload.body"},
		{`{"body":"\ud800"}`, "payload.body"},
		{`{"body":"a","assets":null}`, "payload.assets"},
		{`{"body":"a","assets":"` + asset1 + `"}`, "payload.assets"},
		{`{"body":"a","assets":["` + asset1 + `",1]}`, "payload.assets[1]"},
		{`{"body":"a","assets":["` + asset1 + `","` + asset1 + `","` + strings.ToUpper(asset1) + `"]}`, "payload.assets[2]"},
		{`{"body":"a","assets":["abc"]}`, "payload.assets[0]"},
		{`{"body":"a","title":"t"}`, "payload.title"},
		{`{"body":"a","a b":1}`, `payload["a b"]`},
	}
	for _, tc := range invalid {
		_, err := social.NormalizePayload(json.RawMessage(tc.in))
		var fe *events.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("%s: want *events.FieldError, got %T %v", tc.in, err, err)
		}
		if fe.Field != tc.field {
			t.Fatalf("%s: field %q, want %q (%v)", tc.in, fe.Field, tc.field, err)
		}
	}
	// The method agrees with the function.
	a := newAdapter(t, "http://127.0.0.1:1", nil)
	if got, err := a.NormalizePayload(json.RawMessage(`{"body":"x"}`)); err != nil || string(got) != `{"assets":[],"body":"x"}` {
		t.Fatalf("method: %s %v", got, err)
	}
}

func FuzzNormalizePayload(f *testing.F) {
	adaptertest.FuzzNormalizer(f, social.NormalizePayload, func(t *testing.T, out json.RawMessage) {
		var p struct {
			Assets []string `json:"assets"`
			Body   string   `json:"body"`
		}
		if err := json.Unmarshal(out, &p); err != nil || p.Assets == nil || strings.TrimSpace(p.Body) == "" {
			t.Fatalf("output %q has the wrong shape (%v)", out, err)
		}
	},
		`{"body":"hello"}`,
		`{"body":"hello","assets":["`+asset1+`"]}`,
		`{"body":"a\r\nb\u0301","assets":[]}`,
		`{"body":"","assets":["x"]}`,
		`{"body":"x","extra":true}`,
		`{"body":"x","assets":[null]}`,
		`[]`, `null`, `{`, `{"body":"\ud800"}`)
}

func noToken(t *testing.T, err error) { t.Helper(); testharness.NoSecret(t, err, token) }

func callError(t *testing.T, err error) *adapter.CallError {
	t.Helper()
	return testharness.CallErrorOf(t, err, token)
}

func hash(t *testing.T, p []byte) string { t.Helper(); return testharness.Hash(t, p) }

// Write sends its headers exactly as http.Header.Set would have built them
// (one value per canonical key), the attempt and idempotency key only when
// set.
func TestWriteHeaders(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"p_1","url":"https://x/p_1","author_id":"acct_1","body":"hi","assets":[],"visibility":"public","created_at":"2026-07-22T00:00:00Z"}`)
	}))
	defer srv.Close()
	a := newAdapter(t, srv.URL, nil)
	full := writeReq(t, helloPayload)
	bare := full
	bare.IdempotencyKey, bare.AttemptID = "", ""
	for _, req := range []adapter.WriteRequest{full, bare} {
		if _, err := a.Write(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("requests %d", len(got))
	}
	for i, req := range []adapter.WriteRequest{full, bare} {
		want := http.Header{}
		want.Set("Authorization", "Bearer "+token)
		want.Set("Content-Type", "application/json")
		want.Set("Accept", "application/json")
		if req.IdempotencyKey != "" {
			want.Set("Idempotency-Key", req.IdempotencyKey)
		}
		if req.AttemptID != "" {
			want.Set("X-Settle-Attempt", req.AttemptID)
		}
		for k, v := range want {
			if g := got[i].Values(k); len(g) != 1 || g[0] != v[0] {
				t.Errorf("request %d: %s = %q, want %q", i, k, g, v)
			}
		}
		for _, k := range []string{"Idempotency-Key", "X-Settle-Attempt"} {
			if _, ok := want[k]; !ok && got[i].Get(k) != "" {
				t.Errorf("request %d: %s sent though empty", i, k)
			}
		}
	}
}
