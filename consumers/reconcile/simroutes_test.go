package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/settle-dev/settle/testharness"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/adapter/httproute"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fakeapi"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/mcp"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/service"
)

// The route language and the MCP path inside the seeded simulation.
//
// Every world drives routes compiled from YAML: each example file of examples/routes as written, pointed at
// its fake (with the provider's habits switched on), and variants
// generated from them so that every pagination kind runs with and without
// a marker, a key and a status query:
//
//	route                  file                         pages        marker  key  status  fake's habits
//	social_post            social.yaml                  cursor       -       -    -       slow listings
//	social_post_keyed      social.yaml (key: 24h)       cursor       -       yes  -
//	booking_change         booking.yaml                 -            -       yes  yes     status per account
//	booking_answer_scoped  booking.yaml (lookup by id)  -            -       yes  yes     the answer's account checked
//	payment_charge         payment.yaml                 -            -       yes  yes
//	github_issue_comment   github_comments.yaml         link header  yes     -    -       App token, private repo, page cap 30, clock -3s, edits, rate-limit 403
//	gh_link_nomarker       github_comments.yaml         link header  -       -    -       page cap 7, clock +2s
//	gh_page_marker         github_comments.yaml         page number  yes     -    -       page cap 4, clock -12s (beyond the skew), edits
//	gh_page_nomarker       github_comments.yaml         page number  -       -    -       page cap 4
//	gh_offset_marker       github_comments.yaml         offset       yes     -    -       page cap 4, clock +12s (beyond the skew), edits
//	gh_offset_nomarker     github_comments.yaml         offset       -       -    -       page cap 4, clock +3s
//	slack_message          slack_message.yaml           cursor       yes     -    -       link and entity rewriting, clock +2s, edits, 429 Retry-After
//	stripe_payment_intent  stripe_payment_intent.yaml   cursor       yes     yes  yes     clock -10s (beyond the skew), search lag, idempotency_error
//	github_mcp_comment     github_mcp.yaml (over MCP)   page number  yes     -    -       github_issue_comment's fake behind an MCP upstream (simmcp_test.go)
//
// (The gh_ variants are github_comments.yaml with its pagination, page
// size and marker changed; their pages ask for 10 items, and only an
// empty page or a Link header without next ends a listing.)
//
// A share of the intents of social_post, booking_change,
// github_issue_comment and slack_message are submitted as an agent
// would: through the MCP server's submit tools, in process, as a caller of
// its own tenant (the request id derived from task and step).
//
// Edits, and API clocks behind by more than the skew, are injected on
// routes with a marker only: without one, a person's edit, or a creation
// time older than the attempt minus the skew, makes a write that no
// search can recognise as ours (the documented limits of such a route).

const (
	mcpTenant = "sim-agents"
	// slowListing is how long a listing that straddles the window's end
	// takes: it starts before the window closes and returns after.
	slowListing = time.Minute
)

// yamlWorld holds the fakes of the YAML routes and the injected
// behaviours' counters.
type yamlWorld struct {
	social, socialKeyed *fakeapi.SocialAPI
	booking             *fakeapi.BookingAPI
	payment             *fakeapi.PaymentAPI
	github              *fakeapi.GitHubAPI
	ghv                 map[string]*fakeapi.GitHubAPI // the gh_ variants
	slack               *fakeapi.SlackAPI
	stripe              *fakeapi.StripeAPI
	// globalFaults: the routes whose fakes take write faults from one
	// queue (their write sends no attempt header): what a write did not
	// take is dropped after the submit.
	globalFaults map[string]interface{ DropFaults() int }

	mcp     *mcp.Server
	session *sdk.ClientSession
	// mcpr is the upstream of the route over MCP (simmcp_test.go).
	mcpr *mcpRouteWorld

	mu       sync.Mutex
	injected map[string]int
	// straddle: account → when an armed intent's post was made and
	// becomes visible; the first listing of the account that covers it
	// in the minutes before it shows is slow.
	// the first listing of the account in the minutes before is slow.
	straddle map[string]straddle
}

func (y *yamlWorld) count(name string, n int) {
	if n == 0 {
		return
	}
	y.mu.Lock()
	y.injected[name] += n
	y.mu.Unlock()
}

type straddle struct{ created, visible time.Time }

// covers reports whether a listing's since and until hold t.
func covers(q url.Values, t time.Time) bool {
	if v, err := time.Parse(time.RFC3339Nano, q.Get("since")); err == nil && t.Before(v) {
		return false
	}
	if v, err := time.Parse(time.RFC3339Nano, q.Get("until")); err == nil && t.After(v) {
		return false
	}
	return true
}

// yamlRoute names a sim route: its file, its API habits and how it is
// submitted.
type yamlRoute struct {
	account func(s *sim) string
	payload func(in *simIntent) json.RawMessage
	parent  func(k int) string
	// offsets: the fake's clock offset within or beyond the skew.
	offset time.Duration
	mcp    bool
	// mcpRoute: the route calls an upstream MCP server's tools.
	mcpRoute bool
}

// path is how the world's line counts the route's intents.
func (yr yamlRoute) path() string {
	if yr.mcpRoute {
		return "mcp-route"
	}
	return "yaml"
}

// ghVariant is a route generated from github_comments.yaml.
type ghVariant struct {
	name   string
	pages  string // link, page, offset
	marker bool
	cap    int
	offset time.Duration
}

var ghVariants = []ghVariant{
	{name: "gh_link_nomarker", pages: "link", cap: 7, offset: 2 * time.Second},
	{name: "gh_page_marker", pages: "page", marker: true, cap: 4, offset: -12 * time.Second},
	{name: "gh_page_nomarker", pages: "page", cap: 4},
	{name: "gh_offset_marker", pages: "offset", marker: true, cap: 4, offset: 12 * time.Second},
	{name: "gh_offset_nomarker", pages: "offset", cap: 4, offset: 3 * time.Second},
	// GitHub's clock 11 minutes ahead, beyond every allowance: its
	// since= (updated_at) keeps our comment, and settle keeps it too
	// because the marker names the intent, whatever created_at says.
	{name: "gh_link_marker_clock_ahead", pages: "link", marker: true, cap: 7, offset: 11 * time.Minute},
}

// edits turns github_comments.yaml into the variant.
func (v ghVariant) edits() []string {
	var e []string
	switch v.pages {
	case "page", "offset":
		e = append(e, "&per_page={{page_size}}", "&per_page={{page_size}}&"+v.pages+"={{"+v.pages+"}}",
			"      next_link: true\n", "      end: empty_page\n")
	}
	e = append(e, "page_size: 100      # GitHub's largest page", "page_size: 10", "max_pages: 50", "max_pages: 200")
	if !v.marker {
		e = append(e, `    correlation:
      marker: "\n\n<!-- settle:{{intent_id}} -->"
      read: $.body
`, "", `body: "{{payload.body}}{{marker}}"`, `body: "{{payload.body}}"`)
	}
	return e
}

// variantBehaviours: a lost response, a lost request and a look-alike
// made by hand before the intent on every variant; an edit on those
// with a marker.
func variantBehaviours() []behaviour {
	var out []behaviour
	for _, v := range ghVariants {
		name := v.name
		api := func(s *sim) *fakeapi.GitHubAPI { return s.y.ghv[name] }
		out = append(out,
			behaviour{name: "v_" + name + "_response_lost", route: name, weight: 2, want: confirmedOnly(),
				arm: func(s *sim, in *simIntent) { api(s).Next(fakeapi.CommitThenDrop()) }},
			behaviour{name: "v_" + name + "_request_lost", route: name, weight: 1, want: confirmedOnly(),
				arm: func(s *sim, in *simIntent) { api(s).Next(fakeapi.ResetBeforeCommit()) }},
			behaviour{name: "v_" + name + "_lookalike_by_hand_response_lost", route: name, weight: 1, want: confirmedOnly(),
				arm: func(s *sim, in *simIntent) {
					api(s).Inject(fakeapi.GitHubComment{Issue: 1 + in.k%20, Body: in.body, CreatedAt: s.clock.Now().Add(v.offset - 20*time.Second)})
					api(s).Next(fakeapi.CommitThenDrop())
				}})
		if v.marker {
			out = append(out, behaviour{name: "v_" + name + "_edited_response_lost", route: name, weight: 1,
				want: []outcome{{fsm.Confirmed, ""}, {fsm.ManualAction, events.ReasonWrittenModified}},
				arm:  func(s *sim, in *simIntent) { in.body += " [edit]"; api(s).Next(fakeapi.CommitThenDrop()) }})
		}
	}
	return out
}

var yamlRoutes = func() map[string]yamlRoute {
	m := map[string]yamlRoute{}
	for k, v := range baseRoutes {
		m[k] = v
	}
	for _, v := range ghVariants {
		name := v.name
		m[name] = yamlRoute{account: func(s *sim) string { return s.y.ghv[name].UserID() }, payload: bodyPayload, parent: issueOf, offset: v.offset}
	}
	return m
}()

var baseRoutes = map[string]yamlRoute{
	"social_post":       {account: func(*sim) string { return "" }, payload: bodyPayload, mcp: true},
	"social_post_keyed": {account: func(*sim) string { return "" }, payload: bodyPayload},
	"booking_change":    {account: func(*sim) string { return "" }, payload: bookingPayload, mcp: true},
	// The status lookup by the bare request id (the API's answer names
	// its account, which the route checks).
	"booking_answer_scoped": {account: func(*sim) string { return "" }, payload: bookingPayload},
	"payment_charge":        {account: func(*sim) string { return "" }, payload: chargePayload},
	"github_issue_comment": {account: func(s *sim) string { return s.y.github.UserID() }, payload: bodyPayload,
		parent: issueOf, offset: -3 * time.Second, mcp: true},
	"slack_message": {account: func(s *sim) string { return s.y.slack.UserID() }, payload: textPayload,
		offset: 2 * time.Second, mcp: true},
	"stripe_payment_intent": {account: func(s *sim) string { return s.y.stripe.AccountID() }, payload: stripePayload, offset: -10 * time.Second},
	// github_mcp.yaml over the upstream in front of github_issue_comment's fake.
	mcpRouteName: {account: func(s *sim) string { return s.y.github.UserID() }, payload: bodyPayload,
		parent: issueOf, offset: -3 * time.Second, mcpRoute: true},
}

func issueOf(k int) string { return strconv.Itoa(1 + k%20) }

// The payloads carry the intent's tag ([sim-<seed>-<k>]): the fakes
// attribute each object to the intent whose tag it carries, whatever the
// API's rewriting or a person's edit did around it.
func bodyPayload(in *simIntent) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"body": in.body})
	return b
}

func textPayload(in *simIntent) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"text": in.body})
	return b
}

func bookingPayload(in *simIntent) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"booking_id":%q,"expected_version":1,"change":{"seat":"%dC"}}`, in.booking, in.k%40))
}

func chargePayload(in *simIntent) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"amount":%d,"currency":"jpy","customer":"c_%d","description":%q}`, 100+in.k, in.k%40, in.tag))
}

func stripePayload(in *simIntent) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"amount":%d,"currency":"jpy","customer":"cus_K%d","payment_method":"pm_card_visa","description":%q}`, 100+in.k, in.k%40, in.tag))
}

// Behaviours of the YAML routes. The names say what is injected; the
// world line counts each (injected={...}).
var routeBehaviours = append([]behaviour{
	// social.yaml: cursor pages, no marker, no key.
	{name: "y_social_ok", route: "social_post", weight: 2, want: confirmedOnly()},
	{name: "y_social_response_lost", route: "social_post", weight: 3, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.y.social.NextFor(in.id, fakeapi.CommitThenDrop()) }},
	{name: "y_social_request_lost", route: "social_post", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.y.social.NextFor(in.id, fakeapi.ResetBeforeCommit()) }},
	{name: "y_social_throttled", route: "social_post", weight: 1, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.y.social.NextFor(in.id, fakeapi.Status(429)) }},
	// The post becomes visible 20 s before the window closes, and the
	// account's listing that starts in the minutes before takes 25 s: it
	// started inside the window and returns after it closed, without the
	// post. Only a listing started after the close proves absence.
	{name: "y_social_slow_listing_at_window_end", route: "social_post", weight: 3,
		want: []outcome{{fsm.Confirmed, ""}, {fsm.ManualAction, events.ReasonWrittenUnverified}},
		arm: func(s *sim, in *simIntent) {
			d := 30*time.Minute - 20*time.Second
			s.y.social.NextFor(in.id, fakeapi.VisibilityDelay(d).Dropped())
			s.y.mu.Lock()
			s.y.straddle[in.account] = straddle{created: s.clock.Now(), visible: s.clock.Now().Add(d)}
			s.y.mu.Unlock()
		}},

	// social.yaml with the key honoured (24h).
	{name: "y_social_keyed_response_lost", route: "social_post_keyed", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.y.socialKeyed.NextFor(in.id, fakeapi.CommitThenDrop()) }},
	{name: "y_social_keyed_request_lost", route: "social_post_keyed", weight: 1, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.y.socialKeyed.NextFor(in.id, fakeapi.ResetBeforeCommit()) }},

	// booking.yaml: key and a status query scoped by account; a retry
	// needs approval (a lost request ends awaiting it).
	{name: "y_booking_ok", route: "booking_change", weight: 2, want: confirmedOnly()},
	{name: "y_booking_response_lost", route: "booking_change", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.y.booking.NextFor(in.id, fakeapi.CommitThenDrop()) }},
	{name: "y_booking_request_lost", route: "booking_change", weight: 1, want: []outcome{{fsm.AwaitingApproval, ""}},
		arm: func(s *sim, in *simIntent) { s.y.booking.NextFor(in.id, fakeapi.ResetBeforeCommit()) }},
	// Another account applies the same change to the same booking under
	// the same request id, then this intent's request is lost: the status
	// lookup must not take the other account's change for ours (its
	// payload hashes like ours).
	{name: "y_booking_request_id_collision", route: "booking_change", weight: 2, want: []outcome{{fsm.AwaitingApproval, ""}},
		arm: func(s *sim, in *simIntent) {
			s.otherAccountBooks(in)
			s.y.booking.NextFor(in.id, fakeapi.ResetBeforeCommit())
			s.y.count("request_id_collision", 1)
		}},

	// booking.yaml looking requests up by id alone: the answer's account
	// must be the intent's.
	{name: "y_booking_answer_scoped_response_lost", route: "booking_answer_scoped", weight: 1, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.y.booking.NextFor(in.id, fakeapi.CommitThenDrop()) }},
	{name: "y_booking_answer_scoped_request_id_collision", route: "booking_answer_scoped", weight: 2, want: []outcome{{fsm.ManualAction, ""}, {fsm.AwaitingApproval, ""}},
		arm: func(s *sim, in *simIntent) {
			s.otherAccountBooks(in)
			s.y.booking.NextFor(in.id, fakeapi.ResetBeforeCommit())
			s.y.count("request_id_collision", 1)
		}},

	// payment.yaml: key, lookup by key.
	{name: "y_payment_ok", route: "payment_charge", weight: 1, want: confirmedOnly()},
	{name: "y_payment_response_lost", route: "payment_charge", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.y.payment.Next(fakeapi.CommitThenDrop()) }},
	// payment.yaml's retry needs approval.
	{name: "y_payment_request_lost", route: "payment_charge", weight: 1, want: []outcome{{fsm.AwaitingApproval, ""}},
		arm: func(s *sim, in *simIntent) { s.y.payment.Next(fakeapi.ResetBeforeCommit()) }},

	// github_comments.yaml as shipped.
	{name: "y_github_ok", route: "github_issue_comment", weight: 2, want: confirmedOnly()},
	{name: "y_github_response_lost", route: "github_issue_comment", weight: 3, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.y.github.Next(fakeapi.CommitThenDrop()) }},
	{name: "y_github_request_lost", route: "github_issue_comment", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.y.github.Next(fakeapi.ResetBeforeCommit()) }},
	{name: "y_github_edited_response_lost", route: "github_issue_comment", weight: 3,
		want: []outcome{{fsm.Confirmed, ""}, {fsm.ManualAction, events.ReasonWrittenModified}},
		arm:  func(s *sim, in *simIntent) { in.body += " [edit]"; s.y.github.Next(fakeapi.CommitThenDrop()) }},
	{name: "y_github_rate_limited", route: "github_issue_comment", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) {
			s.y.github.Next(fakeapi.RateLimited(time.Duration(5+s.rng.IntN(60)) * time.Second))
			s.y.count("rate_limit_retry_after", 1)
		}},
	{name: "y_github_read_rate_limited_response_lost", route: "github_issue_comment", weight: 1, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) {
			s.y.github.LimitReads(1, 20*time.Second)
			s.y.github.Next(fakeapi.CommitThenDrop())
			s.y.count("rate_limit_retry_after", 1)
		}},
	// The web site (not the API) fails for a while: a route whose
	// readback declares no url check never asks it.
	{name: "y_github_site_down_response_lost", route: "github_issue_comment", weight: 1, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) {
			f := make([]fakeapi.ReadFault, 40)
			for k := range f {
				f[k] = fakeapi.ReadError500
			}
			s.y.github.FailPages(f...)
			s.y.github.Next(fakeapi.CommitThenDrop())
		}},
	{name: "y_github_lookalike_by_hand_response_lost", route: "github_issue_comment", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) {
			s.y.github.Inject(fakeapi.GitHubComment{Issue: 1 + in.k%20, Body: in.body, CreatedAt: s.clock.Now().Add(-3*time.Second - 20*time.Second)})
			s.y.github.Next(fakeapi.CommitThenDrop())
		}},

	// slack_message.yaml: Slack rewrites links and entities.
	{name: "y_slack_ok", route: "slack_message", weight: 1, want: confirmedOnly()},
	{name: "y_slack_link_rewritten_response_lost", route: "slack_message", weight: 3, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) {
			in.body += fmt.Sprintf(" see https://example.com/notes?run=%d&seed=%d & www.example.org.", in.k, s.seed)
			s.y.slack.Next(fakeapi.CommitThenDrop())
			s.y.count("link_rewriting", 1)
		}},
	{name: "y_slack_request_lost", route: "slack_message", weight: 1, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.y.slack.Next(fakeapi.ResetBeforeCommit()) }},
	{name: "y_slack_edited_response_lost", route: "slack_message", weight: 2,
		want: []outcome{{fsm.Confirmed, ""}, {fsm.ManualAction, events.ReasonWrittenModified}},
		arm:  func(s *sim, in *simIntent) { in.body += " [edit]"; s.y.slack.Next(fakeapi.CommitThenDrop()) }},
	{name: "y_slack_rate_limited", route: "slack_message", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) {
			s.y.slack.Next(fakeapi.RateLimited(time.Duration(1+s.rng.IntN(30)) * time.Second))
			s.y.count("rate_limit_retry_after", 1)
		}},

	// stripe_payment_intent.yaml: the API clock 10 s behind.
	{name: "y_stripe_ok", route: "stripe_payment_intent", weight: 1, want: confirmedOnly()},
	{name: "y_stripe_response_lost", route: "stripe_payment_intent", weight: 2, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.y.stripe.Next(fakeapi.CommitThenDrop()) }},
	{name: "y_stripe_request_lost", route: "stripe_payment_intent", weight: 1, want: confirmedOnly(),
		arm: func(s *sim, in *simIntent) { s.y.stripe.Next(fakeapi.ResetBeforeCommit()) }},
	// The payment is made and the answer is Stripe's 400
	// idempotency_error: evidence of an earlier request with the key,
	// never a rejection.
	{name: "y_stripe_key_reused", route: "stripe_payment_intent", weight: 2,
		want: []outcome{{fsm.Confirmed, ""}, {fsm.ManualAction, events.ReasonKeyReused}},
		arm: func(s *sim, in *simIntent) {
			s.y.stripe.Next(fakeapi.KeyReused())
			s.y.count("key_reuse_error", 1)
		}},
}, append(variantBehaviours(), mcpRouteBehaviours()...)...)

// exampleFile reads an example route file and applies edits (pairs of
// old, new; each must apply).
func (s *sim) exampleFile(name string, edits ...string) []byte {
	return testharness.RouteFile(s.t, name, edits...)
}

// compile compiles the only route of a route file as route name, on the
// sim's clock; a wait inside a listing (a rate limit) moves the clock.
func (s *sim) compile(name string, data []byte, env map[string]string, client *http.Client) adapter.Route {
	return testharness.CompileRoute(s.t, data, env, func(c *httproute.RouteConfig) {
		c.Name, c.Now, c.Client = name, s.clock.Now, client
		c.Sleep = func(ctx context.Context, d time.Duration) error { s.clock.Advance(d); return ctx.Err() }
	})
}

// newYAMLWorld starts the fakes of the YAML routes and compiles the
// routes.
func (s *sim) newYAMLWorld(client *http.Client) []adapter.Route {
	t := s.t
	y := &yamlWorld{injected: map[string]int{}, straddle: map[string]straddle{}}
	s.y = y
	now := s.clock.Now
	edit := func(kind string) func(string) string {
		return func(body string) string {
			if !strings.Contains(body, "[edit]") {
				return body
			}
			y.count("edit_after_write:"+kind, 1)
			return strings.Replace(body, "[edit]", "[edit: a person fixed a typo]", 1)
		}
	}
	y.social = fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(now), fakeapi.WithSocialListHook(func(r *http.Request) {
		acct := r.PathValue("account")
		y.mu.Lock()
		st, ok := y.straddle[acct]
		at, n := st.visible, now()
		slow := ok && n.Before(at) && !n.Before(at.Add(-6*time.Minute)) && covers(r.URL.Query(), st.created)
		if slow || (ok && !n.Before(at)) {
			delete(y.straddle, acct)
		}
		if slow {
			y.injected["slow_listing_straddles_window_end"]++
		}
		y.mu.Unlock()
		if slow {
			// The page was taken before the post became visible; it
			// arrives after the window closed.
			s.clock.Set(at.Add(slowListing))
		}
	}))
	y.socialKeyed = fakeapi.NewSocialAPI(t, fakeapi.WithSocialClock(now), fakeapi.WithIdempotencyKeys())
	y.booking = fakeapi.NewBookingAPI(t, fakeapi.WithBookingClock(now), fakeapi.WithBookingReflectionDelay(5*time.Second))
	y.payment = fakeapi.NewPaymentAPI(t, fakeapi.WithPaymentClock(now))
	y.github = fakeapi.NewGitHubAPI(t, fakeapi.WithGitHubClock(now), fakeapi.WithGitHubInstallationToken("github-actions[bot]", 41898282),
		fakeapi.WithGitHubPrivateRepo(), fakeapi.WithGitHubPageCap(30), fakeapi.WithGitHubClockOffset(yamlRoutes["github_issue_comment"].offset),
		fakeapi.WithGitHubEditAfterCreate(edit("github")))
	y.ghv = map[string]*fakeapi.GitHubAPI{}
	for _, v := range ghVariants {
		opts := []fakeapi.GitHubOption{fakeapi.WithGitHubClock(now), fakeapi.WithGitHubPageCap(v.cap), fakeapi.WithGitHubClockOffset(v.offset)}
		if v.marker {
			opts = append(opts, fakeapi.WithGitHubEditAfterCreate(edit("github")))
		}
		y.ghv[v.name] = fakeapi.NewGitHubAPI(t, opts...)
	}
	y.slack = fakeapi.NewSlackAPI(t, fakeapi.WithSlackClock(now), fakeapi.WithSlackFormatting(),
		fakeapi.WithSlackClockOffset(yamlRoutes["slack_message"].offset), fakeapi.WithSlackEditAfterPost(edit("slack")))
	y.stripe = fakeapi.NewStripeAPI(t, fakeapi.WithStripeClock(now), fakeapi.WithStripeSearchLag(30*time.Second),
		fakeapi.WithStripeClockOffset(yamlRoutes["stripe_payment_intent"].offset))
	y.globalFaults = map[string]interface{ DropFaults() int }{
		"payment_charge": y.payment, "github_issue_comment": y.github, "slack_message": y.slack, "stripe_payment_intent": y.stripe,
	}
	for name, api := range y.ghv {
		y.globalFaults[name] = api
	}

	gh := func(api *fakeapi.GitHubAPI) map[string]string {
		return map[string]string{"GITHUB_API_URL": api.URL(), "GITHUB_REPOSITORY": "octo-org/hello-world", "GITHUB_TOKEN": api.Token()}
	}
	socialEnv := func(api *fakeapi.SocialAPI) map[string]string {
		return map[string]string{"SOCIAL_BASE_URL": api.URL(), "SOCIAL_TOKEN": api.Token()}
	}
	routes := []adapter.Route{
		s.compile("social_post", s.exampleFile("social.yaml"), socialEnv(y.social), client),
		s.compile("social_post_keyed", s.exampleFile("social.yaml", "      idempotency_key: false\n", "      idempotency_key: true\n      key_retention: 24h\n"),
			socialEnv(y.socialKeyed), client),
		s.compile("booking_change", s.exampleFile("booking.yaml"), map[string]string{"BOOKING_BASE_URL": y.booking.URL(), "BOOKING_TOKEN": y.booking.Token()}, client),
		s.compile("booking_answer_scoped", s.exampleFile("booking.yaml", "?account={{account}}", ""),
			map[string]string{"BOOKING_BASE_URL": y.booking.URL(), "BOOKING_TOKEN": y.booking.Token()}, client),
		s.compile("payment_charge", s.exampleFile("payment.yaml"), map[string]string{"PAYMENT_BASE_URL": y.payment.URL(), "PAYMENT_TOKEN": y.payment.Token()}, client),
		s.compile("github_issue_comment", s.exampleFile("github_comments.yaml"), gh(y.github), client),
		s.compile("slack_message", s.exampleFile("slack_message.yaml"), map[string]string{"SLACK_API_URL": y.slack.URL(), "SLACK_BOT_TOKEN": y.slack.Token()}, client),
		s.compile("stripe_payment_intent", s.exampleFile("stripe_payment_intent.yaml"),
			map[string]string{"STRIPE_API_URL": y.stripe.URL(), "STRIPE_SECRET_KEY": y.stripe.Token()}, client),
	}
	for _, v := range ghVariants {
		routes = append(routes, s.compile(v.name, s.exampleFile("github_comments.yaml", v.edits()...), gh(y.ghv[v.name]), client))
	}
	routes = append(routes, s.newMCPRoute(client))
	y.globalFaults[mcpRouteName] = y.mcpr
	return routes
}

// noViews stands in for the projected views, which a submit never reads
// (only status, pending and figures do, and the simulation asks none).
type noViews struct{}

var errNoViews = fmt.Errorf("the simulation runs no projector")

func (noViews) List(context.Context, projector.Filter) (projector.Page, error) {
	return projector.Page{}, errNoViews
}
func (noViews) ByRequest(context.Context, string, string, string) ([]projector.IntentView, error) {
	return nil, errNoViews
}
func (noViews) CountByState(context.Context) (map[fsm.State]int, error) { return nil, errNoViews }
func (noViews) CountByRouteState(context.Context) (map[string]map[fsm.State]int, error) {
	return nil, errNoViews
}
func (noViews) Flow(context.Context, projector.FlowFilter) (*projector.Flow, error) {
	return nil, errNoViews
}
func (noViews) OldestUnknownAge(context.Context, time.Time) (time.Duration, bool, error) {
	return 0, false, errNoViews
}
func (noViews) Checkpoint(context.Context) (uint64, error) { return 0, errNoViews }
func (noViews) CatchUp(context.Context) error              { return errNoViews }

// startMCP serves the YAML routes that agents use as MCP tools, through
// a service over the first writer, and connects one agent (its own
// tenant, submit and read scopes) in process.
func (s *sim) startMCP(routes []adapter.Route) {
	t := s.t
	sc := service.DefaultConfig()
	sc.Intents, sc.Views, sc.Now = s.writers[0], noViews{}, s.clock.Now
	svc, err := service.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	var tools []adapter.Route
	for _, r := range routes {
		if yamlRoutes[r.Name].mcp {
			tools = append(tools, r)
		}
	}
	mc := mcp.DefaultConfig()
	mc.Service, mc.Routes, mc.Logger = svc, tools, quietLogger()
	if s.y.mcp, err = mcp.New(mc); err != nil {
		t.Fatal(err)
	}
	caller := service.Caller{Name: "sim-agent", Tenant: mcpTenant, Scopes: []string{service.ScopeSubmit, service.ScopeRead}}
	ct, st := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ss, err := s.y.mcp.For(caller).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "sim-agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	s.y.session = cs
}

// viaMCP submits the intent through the route's submit tool, as the
// agent's task and step; both answers of a step sent twice at once are
// checked.
func (s *sim) viaMCP(in *simIntent, twice bool) {
	args := map[string]any{"task_id": in.task, "step_id": "post", "account": in.account, "payload": in.payload(), "wait_seconds": 0}
	if in.parent != "" {
		args["parent_external_id"] = in.parent
	}
	call := func() (*sdk.CallToolResult, error) {
		return s.y.session.CallTool(context.Background(), &sdk.CallToolParams{Name: "submit_" + in.route, Arguments: args})
	}
	n := 1
	if twice {
		n = 2
	}
	res := make([]*sdk.CallToolResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range res {
		wg.Add(1)
		go func() { defer wg.Done(); res[k], errs[k] = call() }()
	}
	wg.Wait()
	for k := range res {
		if errs[k] != nil {
			s.t.Fatalf("seed %d: mcp submit %s (%s): %v", s.seed, in.id, in.b.name, errs[k])
		}
		var a mcp.Answer
		b, _ := json.Marshal(res[k].StructuredContent)
		_ = json.Unmarshal(b, &a)
		if res[k].IsError && !strings.Contains(string(b), "in flight") && !strings.Contains(string(b), "in_flight") && !strings.Contains(string(b), "conflict") {
			s.t.Fatalf("seed %d: mcp submit %s (%s) refused: %s", s.seed, in.id, in.b.name, b)
		}
		if !res[k].IsError && a.IntentID != in.id {
			s.t.Fatalf("seed %d: mcp submit answered intent %q, want %s: %s", s.seed, a.IntentID, in.id, b)
		}
	}
}

// prepareYAML fills in what an intent of a YAML route needs: its
// account, parent, booking and (for an agent's) task.
func (s *sim) prepareYAML(in *simIntent, viaMCP bool) {
	yr := yamlRoutes[in.route]
	if a := yr.account(s); a != "" {
		in.account = a
	}
	if yr.parent != nil {
		in.parent = yr.parent(in.k)
	}
	in.tag = fmt.Sprintf("[sim-%d-%d]", s.seed, in.k)
	in.body = fmt.Sprintf("simulated write %d of seed %d %s", in.k, s.seed, in.tag)
	in.yaml = true
	if in.route == "booking_change" || in.route == "booking_answer_scoped" {
		in.booking = fmt.Sprintf("Y-%d", in.k)
		s.y.booking.Seed(in.booking, 1, nil)
	}
	switch {
	case yr.offset == 0:
	case yr.offset < -simSkew || yr.offset > simSkew:
		s.y.count("api_clock_beyond_skew", 1)
	default:
		s.y.count("api_clock_within_skew", 1)
	}
	if viaMCP {
		in.task = fmt.Sprintf("task-%d-%d", s.seed, in.k)
		in.requestID = events.ToolKey(in.task, "post", "")
		in.tenant = mcpTenant
	}
}

// otherAccountBooks makes another account's change of the intent's
// booking, with the intent's request id and payload, through the API.
func (s *sim) otherAccountBooks(in *simIntent) {
	body := fmt.Sprintf(`{"account":"acct_other","request_id":%q,"expected_version":1,"change":{"seat":"%dC"}}`, in.requestID, in.k%40)
	req, err := http.NewRequest(http.MethodPut, s.y.booking.URL()+"/v1/bookings/"+in.booking, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.y.booking.Token())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "other-"+in.id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("the other account's change: HTTP %d", resp.StatusCode)
	}
}

// yamlEffects counts the objects the intent made at its route's fake and
// returns their external ids (ok=false: not a YAML route).
func (s *sim) yamlEffects(in *simIntent) (int, map[string]bool, bool) {
	created := map[string]bool{}
	y := s.y
	key := events.IdempotencyKey(in.id)
	gh := y.ghv[in.route]
	if in.route == "github_issue_comment" || in.route == mcpRouteName {
		gh = y.github
	}
	switch {
	case gh != nil:
		n := 0
		for _, c := range gh.Comments() {
			if !c.Injected && strings.Contains(c.Body, in.tag) {
				n++
				created[strconv.FormatInt(c.ID, 10)] = true
			}
		}
		return n, created, true
	case in.route == "social_post", in.route == "social_post_keyed":
		api := map[string]*fakeapi.SocialAPI{"social_post": y.social, "social_post_keyed": y.socialKeyed}[in.route]
		n := 0
		for _, w := range api.WriteLog() {
			if strings.HasPrefix(w.AttemptID, in.id+".a") && len(w.PostIDs) > 0 && !w.Replay {
				n++
				for _, id := range w.PostIDs {
					created[id] = true
				}
			}
		}
		return n, created, true
	case in.route == "booking_change", in.route == "booking_answer_scoped":
		// Another account may have used the request id: this intent's
		// changes are those its attempts sent.
		n := 0
		for _, rq := range y.booking.Requests(in.requestID) {
			if rq.State == fakeapi.BookingCompleted && !rq.External && strings.HasPrefix(rq.AttemptID, in.id+".a") {
				n++
				created[fmt.Sprintf("%s@v%d", rq.BookingID, rq.AppliedVersion)] = true
			}
		}
		return n, created, true
	case in.route == "payment_charge":
		for _, c := range y.payment.ChargeList() {
			if c.IdempotencyKey == key {
				created[c.ID] = true
			}
		}
		return y.payment.ChargesForKey(key), created, true
	case in.route == "slack_message":
		n := 0
		for _, m := range y.slack.Messages() {
			if !m.Injected && strings.Contains(m.Text, in.tag) {
				n++
				created[m.TS] = true
			}
		}
		return n, created, true
	case in.route == "stripe_payment_intent":
		for _, p := range y.stripe.PaymentIntents() {
			if !p.Injected && p.IdempotencyKey == key {
				created[p.ID] = true
			}
		}
		return y.stripe.EffectsForKey(key), created, true
	}
	return 0, nil, false
}

// yamlChecks asserts what the fakes saw of the YAML routes as a whole: a
// route that declares no url check (GitHub's: a private repository's
// pages answer 404 to a visitor) never has a page probed.
func (s *sim) yamlChecks() {
	for name, api := range s.y.ghv {
		if n := api.PageCalls(); n > 0 {
			s.t.Errorf("seed %d: %s declares no url check, yet %d pages were probed", s.seed, name, n)
		}
	}
	if n := s.y.github.PageCalls(); n > 0 {
		s.t.Errorf("seed %d: github_issue_comment declares no url check, yet %d pages were probed", s.seed, n)
	}
}

// yamlCounts adds what the fakes observed to the injected counts: pages
// capped silently, refusals for the rate limit.
func (s *sim) yamlCounts() map[string]int {
	y := s.y
	y.mu.Lock()
	defer y.mu.Unlock()
	out := map[string]int{}
	for k, v := range y.injected {
		out[k] = v
	}
	out["page_cap_silent"] = y.github.CappedPages()
	for _, api := range y.ghv {
		out["page_cap_silent"] += api.CappedPages()
	}
	return out
}
