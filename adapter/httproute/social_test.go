package httproute_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/adapter/social"
	"github.com/settle-dev/settle/fakeapi"
)

func socialPair(t *testing.T, api *fakeapi.SocialAPI, omitsBody bool) (*httproute.Adapter, *social.Adapter) {
	t.Helper()
	var gen *httproute.Adapter
	if omitsBody {
		data := bytes.Replace(readExample(t, "social.yaml"), []byte("omits_body: false"), []byte("omits_body: true"), 1)
		gen = buildYAML(t, data, exampleEnv(api.URL()))
	} else {
		gen = loadExample(t, "social.yaml", api.URL())
	}
	hand, err := social.New(social.Config{BaseURL: api.URL(), Token: secretToken, OmitsBody: omitsBody})
	if err != nil {
		t.Fatal(err)
	}
	return gen, hand
}

// content is what a post holds, without what differs between two writes
// of the same content (id, url, time, key, attempt).
type content struct {
	AuthorID, Body, ParentID, Visibility string
	Assets                               []string
}

func postContent(p fakeapi.Post) content {
	return content{AuthorID: p.AuthorID, Body: p.Body, ParentID: p.ParentID, Visibility: p.Visibility, Assets: p.Assets}
}

// TestSocialParity drives the example route file and the hand-written
// adapter/social against the same fake: the same posts are created, and
// Search, Get and Probe return identical records (identical payload
// hashes).
func TestSocialParity(t *testing.T) {
	for _, omits := range []bool{false, true} {
		name := "full_listing"
		if omits {
			name = "listing_omits_body"
		}
		t.Run(name, func(t *testing.T) {
			opts := []fakeapi.SocialOption{fakeapi.WithSocialToken(secretToken), fakeapi.WithSocialPageSize(2)}
			if omits {
				opts = append(opts, fakeapi.WithOmitBodyInList())
			}
			api := fakeapi.NewSocialAPI(t, opts...)
			gen, hand := socialPair(t, api, omits)
			if g, h := gen.Capabilities(), hand.Capabilities(); g != h {
				t.Fatalf("capabilities: generic %+v, hand-written %+v", g, h)
			}

			cases := []struct {
				payload string
				parent  string
			}{
				{`{"body":"hello world"}`, ""},
				{`{"body":"with assets","assets":["` + asset1 + `","` + asset2 + `"]}`, ""},
				{`{"assets":[],"body":"a reply"}`, "p_parent"},
				{`{"body":"Cafe\u0301 ünïcode"}`, ""},
				{`{"body":"five"}`, "p_other"},
			}
			start := time.Now().Add(-time.Minute)
			var intents []json.RawMessage
			for i, c := range cases {
				canonG, errG := gen.NormalizePayload(json.RawMessage(c.payload))
				canonH, errH := hand.NormalizePayload(json.RawMessage(c.payload))
				if errG != nil || errH != nil || !bytes.Equal(canonG, canonH) {
					t.Fatalf("normalize %s: generic %s %v, hand-written %s %v", c.payload, canonG, errG, canonH, errH)
				}
				intents = append(intents, canonG)
				for j, a := range []adapter.Adapter{gen, hand} {
					req := writeReq(i*2+j, "acct-1", c.parent, canonG)
					res, err := a.Write(bg, req)
					if err != nil {
						t.Fatalf("write %d by %v: %v", i, a, err)
					}
					if res.ExternalID == "" || res.LiveURL != api.URL()+"/p/"+res.ExternalID || res.StatusCode != http.StatusCreated {
						t.Fatalf("write %d by %v: %+v", i, a, res)
					}
				}
			}
			posts := api.Posts()
			if len(posts) != 2*len(cases) {
				t.Fatalf("%d posts, want %d", len(posts), 2*len(cases))
			}
			for i := 0; i < len(posts); i += 2 {
				if g, h := postContent(posts[i]), postContent(posts[i+1]); !reflect.DeepEqual(g, h) {
					t.Fatalf("post %d: generic wrote %+v, hand-written %+v", i/2, g, h)
				}
			}
			for i, w := range api.WriteLog() {
				if w.IdempotencyKey == "" || w.AttemptID == "" {
					t.Fatalf("write %d carried no key or attempt header: %+v", i, w)
				}
			}

			q := adapter.SearchQuery{Account: "acct-1", From: start, To: time.Now().Add(time.Minute)}
			listCalls := api.ListCalls()
			recsG, errG := gen.Search(bg, q)
			pagesG := api.ListCalls() - listCalls
			recsH, errH := hand.Search(bg, q)
			if errG != nil || errH != nil {
				t.Fatalf("search: generic %v, hand-written %v", errG, errH)
			}
			if pagesG != 5 {
				t.Fatalf("generic search read %d pages of 2, want 5", pagesG)
			}
			if !reflect.DeepEqual(recsG, recsH) {
				t.Fatalf("search differs:\n generic      %+v\n hand-written %+v", recsG, recsH)
			}
			if len(recsG) != len(posts) {
				t.Fatalf("search found %d of %d posts", len(recsG), len(posts))
			}
			if omits {
				for _, r := range recsG {
					if !r.Partial || r.Payload != nil {
						t.Fatalf("a listing without bodies gave a full record: %+v", r)
					}
				}
			}
			// Windows, accounts and the empty listing agree too.
			for _, q := range []adapter.SearchQuery{
				{Account: "acct-1"},
				{Account: "acct-1", From: time.Now().Add(time.Hour)},
				{Account: "nobody"},
				{Account: "acct/with space"},
			} {
				g, e1 := gen.Search(bg, q)
				h, e2 := hand.Search(bg, q)
				if e1 != nil || e2 != nil || !reflect.DeepEqual(g, h) {
					t.Fatalf("search %+v: generic %v %v, hand-written %v %v", q, g, e1, h, e2)
				}
			}

			for _, p := range posts {
				g, e1 := gen.Get(bg, p.ID)
				h, e2 := hand.Get(bg, p.ID)
				if e1 != nil || e2 != nil || !reflect.DeepEqual(g, h) {
					t.Fatalf("get %s: generic %+v %v, hand-written %+v %v", p.ID, g, e1, h, e2)
				}
				// The readback hashes like the intent it came from.
				if want := hashOf(t, intents[slices.IndexFunc(posts, func(x fakeapi.Post) bool { return x.ID == p.ID })/2]); hashOf(t, g.Payload) != want {
					t.Fatalf("get %s: payload %s does not hash like its intent", p.ID, g.Payload)
				}
				cg, e1 := gen.Probe(bg, p.URL)
				ch, e2 := hand.Probe(bg, p.URL)
				if e1 != nil || e2 != nil || cg != ch || cg != http.StatusOK {
					t.Fatalf("probe %s: generic %d %v, hand-written %d %v", p.URL, cg, e1, ch, e2)
				}
			}
			if _, err := gen.Get(bg, "p_404"); !errors.Is(err, adapter.ErrNotFound) {
				t.Fatalf("get of a missing post: %v, want ErrNotFound", err)
			}
			cg, _ := gen.Probe(bg, api.URL()+"/p/p_404")
			ch, _ := hand.Probe(bg, api.URL()+"/p/p_404")
			if cg != http.StatusNotFound || ch != cg {
				t.Fatalf("probe of a missing page: generic %d, hand-written %d", cg, ch)
			}
			// Near matches: same text, other assets.
			if !gen.Resembles(intents[1], json.RawMessage(`{"assets":[],"body":"with assets"}`)) ||
				gen.Resembles(intents[1], json.RawMessage(`{"assets":[],"body":"other text"}`)) {
				t.Fatal("Resembles does not follow payload.near_match")
			}
		})
	}
}

// TestSocialFaults: every fault of the fake is classified by the generic
// adapter exactly as by the hand-written one.
func TestSocialFaults(t *testing.T) {
	api := fakeapi.NewSocialAPI(t, fakeapi.WithSocialToken(secretToken))
	gen, hand := socialPair(t, api, false)
	payload, _ := gen.NormalizePayload(json.RawMessage(`{"body":"fault"}`))
	cases := []struct {
		name  string
		fault fakeapi.Fault
		class adapter.Class
	}{
		{"commit_then_drop", fakeapi.CommitThenDrop(), adapter.Unknown},
		{"reset_before_commit", fakeapi.ResetBeforeCommit(), adapter.Unknown},
		{"draft_dropped", fakeapi.Draft().Dropped(), adapter.Unknown},
		{"422", fakeapi.Status(422), adapter.Rejected},
		{"400", fakeapi.Status(400), adapter.Rejected},
		{"429", fakeapi.Status(429), adapter.Rejected},
		{"409", fakeapi.Status(409), adapter.Unknown},
		{"408", fakeapi.Status(408), adapter.Unknown},
		{"500", fakeapi.Status(500), adapter.Unknown},
		{"502", fakeapi.Status(502), adapter.Unknown},
		{"501", fakeapi.Status(501), adapter.Rejected},
		{"302", fakeapi.Status(302), adapter.Unknown},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			api.Next(c.fault)
			_, errG := gen.Write(bg, writeReq(100+i, "acct-f", "", payload))
			api.Next(c.fault)
			_, errH := hand.Write(bg, writeReq(200+i, "acct-f", "", payload))
			sameClass(t, c.name, errG, errH)
			if ce := callError(t, errG); ce.Class != c.class {
				t.Fatalf("class %s, want %s", ce.Class, c.class)
			}
		})
	}

	t.Run("timeout_after_send", func(t *testing.T) {
		var errs [2]error
		for j, a := range []adapter.Adapter{gen, hand} {
			api.Next(fakeapi.Delay(5 * time.Second))
			ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
			_, errs[j] = a.Write(ctx, writeReq(300+j, "acct-f", "", payload))
			cancel()
		}
		sameClass(t, "timeout", errs[0], errs[1])
		if ce := callError(t, errs[0]); ce.Class != adapter.Unknown {
			t.Fatalf("a timeout after sending is %s", ce.Class)
		}
	})

	t.Run("invalid_before_send", func(t *testing.T) {
		writes := api.Writes()
		for _, req := range []adapter.WriteRequest{
			writeReq(400, "", "", payload),                                        // no account
			writeReq(401, "acct", "", json.RawMessage(`{"body":""}`)),             // empty body
			writeReq(402, "acct", "", json.RawMessage(`{"body":"x","y":1}`)),      // unknown field
			writeReq(403, "acct", "", json.RawMessage(`{"body":"x","assets":1}`)), // not an array
		} {
			_, errG := gen.Write(bg, req)
			_, errH := hand.Write(bg, req)
			g, h := callError(t, errG), callError(t, errH)
			if g.Class != adapter.NotSent || h.Class != adapter.NotSent || g.Code != h.Code {
				t.Fatalf("invalid write %+v: generic %+v, hand-written %+v", req, *g, *h)
			}
		}
		if api.Writes() != writes {
			t.Fatal("an invalid write reached the API")
		}
	})

	t.Run("not_sent", func(t *testing.T) {
		dead := fakeapi.NewSocialAPIServer(fakeapi.SocialConfig{Token: secretToken})
		dead.Close()
		g, h := socialPair(t, dead, false)
		_, errG := g.Write(bg, writeReq(500, "acct", "", payload))
		_, errH := h.Write(bg, writeReq(501, "acct", "", payload))
		sameClass(t, "closed server", errG, errH)
		if ce := callError(t, errG); ce.Class != adapter.NotSent || !ce.Retryable {
			t.Fatalf("a refused connection is %+v", *ce)
		}
	})
}
