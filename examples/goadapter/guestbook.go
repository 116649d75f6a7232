package goadapter

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// maxPages bounds how many listing pages one Search reads.
const maxPages = 20

// Guestbook signs a guestbook: one post per entry, {"body": text}.
type Guestbook struct {
	base, auth string
	client     *http.Client
}

var (
	_ adapter.Adapter           = (*Guestbook)(nil)
	_ adapter.PayloadNormalizer = (*Guestbook)(nil)
)

// New returns a Guestbook on the API at base with a bearer token.
func New(base, token string) (*Guestbook, error) {
	u, err := adapter.CheckBaseURL(base, "pass the token")
	if err != nil {
		return nil, errors.Errorf("goadapter: %w", &events.FieldError{Field: "base", Reason: err.Error()})
	}
	if token == "" {
		return nil, errors.Errorf("goadapter: %w", &events.FieldError{Field: "token", Reason: "is required"})
	}
	return &Guestbook{base: strings.TrimRight(u.String(), "/"), auth: "Bearer " + token,
		client: adapter.NewHTTPClient(10 * time.Second)}, nil
}

// Capabilities: no idempotency key; a listing that names each post's
// author, so a search can prove that no entry landed.
func (g *Guestbook) Capabilities() adapter.Capabilities {
	return adapter.Capabilities{Search: true, SearchAuthoritative: true}
}

// entry is the payload: the text of the entry.
type entry struct {
	Body string `json:"body"`
}

// NormalizePayload accepts {"body": non-empty text} and returns its
// canonical form.
func (g *Guestbook) NormalizePayload(raw json.RawMessage) (json.RawMessage, error) {
	var e entry
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, adapter.PayloadError("payload", "must be a JSON object")
	}
	if strings.TrimSpace(e.Body) == "" {
		return nil, adapter.PayloadError("payload.body", "is required")
	}
	return canonical(e.Body)
}

func canonical(body string) (json.RawMessage, error) {
	b, err := json.Marshal(entry{Body: body})
	if err != nil {
		return nil, err
	}
	return adapter.CanonicalizePayload(b)
}

// post is a post as the API returns it.
type post struct {
	ID         string    `json:"id"`
	URL        string    `json:"url"`
	AuthorID   string    `json:"author_id"`
	Visibility string    `json:"visibility"`
	Body       string    `json:"body"`
	CreatedAt  time.Time `json:"created_at"`
}

func (p post) record() (adapter.Record, error) {
	pl, err := canonical(p.Body)
	return adapter.Record{ExternalID: p.ID, LiveURL: p.URL, AuthorID: p.AuthorID, Visibility: p.Visibility, CreatedAt: p.CreatedAt, Payload: pl}, err
}

// Write posts one entry: one request, never retried here.
func (g *Guestbook) Write(ctx context.Context, req adapter.WriteRequest) (adapter.WriteResult, error) {
	var e entry
	if err := json.Unmarshal(req.Payload, &e); err != nil || req.Account == "" {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_write", "the write needs an account and a payload")
	}
	body, err := json.Marshal(map[string]string{"account": req.Account, "body": e.Body})
	if err != nil {
		return adapter.WriteResult{}, adapter.InvalidRequest("invalid_write", "the payload cannot be encoded")
	}
	var p post
	status, err := g.call(ctx, http.MethodPost, g.base+"/v1/posts", body, &p)
	if err != nil {
		return adapter.WriteResult{}, err
	}
	return adapter.WriteResult{ExternalID: p.ID, LiveURL: p.URL, StatusCode: status}, nil
}

// Search lists the account's posts created in [From, To].
func (g *Guestbook) Search(ctx context.Context, q adapter.SearchQuery) ([]adapter.Record, error) {
	var out []adapter.Record
	cursor := ""
	for range maxPages {
		v := url.Values{"cursor": {cursor}}
		if !q.From.IsZero() {
			v.Set("since", q.From.UTC().Format(time.RFC3339Nano))
		}
		if !q.To.IsZero() {
			v.Set("until", q.To.UTC().Format(time.RFC3339Nano))
		}
		var page struct {
			Items      *[]post `json:"items"`
			NextCursor string  `json:"next_cursor"`
		}
		if _, err := g.call(ctx, http.MethodGet, g.base+"/v1/accounts/"+url.PathEscape(q.Account)+"/posts?"+v.Encode(), nil, &page); err != nil {
			return nil, err
		}
		if page.Items == nil {
			return nil, adapter.Unparseable(http.StatusOK, "the listing")
		}
		for _, p := range *page.Items {
			r, err := p.record()
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
	return out, errors.Errorf("goadapter: %d pages: %w", maxPages, adapter.ErrListingIncomplete)
}

// Get reads one post back.
func (g *Guestbook) Get(ctx context.Context, externalID string) (adapter.Record, error) {
	var p post
	if _, err := g.call(ctx, http.MethodGet, g.base+"/v1/posts/"+url.PathEscape(externalID), nil, &p); err != nil {
		return adapter.Record{}, err
	}
	return p.record()
}

// Probe reads a live URL without the token and returns its status.
func (g *Guestbook) Probe(ctx context.Context, liveURL string) (int, error) {
	req, err := adapter.NewRequest(ctx, http.MethodGet, liveURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := adapter.Do(ctx, g.client, req)
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// call sends one request with the token and decodes a 2xx answer into
// out. A 404 is adapter.ErrNotFound; other statuses are classified by the
// default status policy.
func (g *Guestbook) call(ctx context.Context, method, u string, body []byte, out any) (int, error) {
	req, err := adapter.NewRequest(ctx, method, u, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", g.auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := adapter.Do(ctx, g.client, req)
	if err != nil {
		return 0, err
	}
	if method == http.MethodGet && resp.StatusCode == http.StatusNotFound {
		return resp.StatusCode, adapter.ErrNotFound
	}
	if err := adapter.DefaultStatusPolicy().Classify(resp.StatusCode); err != nil {
		return resp.StatusCode, err
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return resp.StatusCode, adapter.Unparseable(resp.StatusCode, "the answer")
	}
	return resp.StatusCode, nil
}
