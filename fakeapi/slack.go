package fakeapi

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A fake of the Slack Web API methods settle's example route uses, as
// Slack documents them (https://docs.slack.dev/reference/methods/...):
//
//   - auth.test (GET or POST): the token's user_id, bot_id, team_id
//   - chat.postMessage (POST, JSON or form): channel, text, metadata
//     {event_type, event_payload}; answers {ok, channel, ts, message}
//   - conversations.history (GET): channel, oldest, latest, inclusive,
//     limit, cursor, include_all_metadata (metadata is shown only then);
//     newest first, has_more and response_metadata.next_cursor
//
// A failing method answers HTTP 200 {"ok": false, "error": "<code>"}
// (invalid_auth, not_authed, channel_not_found, no_text,
// invalid_metadata_format, ...), except rate limiting: 429 with
// Retry-After. A message's ts is its id and creation time
// ("1712345678.000100", unique per channel). Write faults (Next):
// CommitThenDrop, ResetBeforeCommit, Status(code), RateLimited(d).

// SlackMessage is one message as the fake stores it.
type SlackMessage struct {
	Channel string
	TS      string
	User    string
	BotID   string
	Text    string
	// EditedTS is the time of the last edit ("" when never edited).
	EditedTS string
	Metadata json.RawMessage // {"event_type":..., "event_payload":...} or nil
	// Injected: planted with Inject (not an effect).
	Injected bool
}

// SlackConfig configures the fake Slack API.
type SlackConfig struct {
	// Token is the bot token (random when empty).
	Token string
	// UserID and BotID are the token's bot user and bot (default U0SETTLE,
	// B0SETTLE); TeamID the workspace (default T0SETTLE).
	UserID, BotID, TeamID string
	// Channels are the channel ids that exist (default C0SETTLE).
	Channels []string
	// Now is the server clock (default time.Now).
	Now func() time.Time
	// HistoryLimit caps conversations.history's limit silently (0: 999,
	// Tier 3); HistoryEvery is the least time between two history calls
	// of the token (0: none): an earlier call is answered 429 with
	// Retry-After. Slack's non-Marketplace apps get 15 and 1 minute
	// (WithSlackNonMarketplaceTier).
	HistoryLimit int
	HistoryEvery time.Duration
	// Format rewrites a posted text as Slack stores it: a bare URL
	// becomes a link (http://x -> <http://x>, www.x.org ->
	// <http://www.x.org|www.x.org>) and &, < and > outside links become
	// &amp; &lt; &gt; (an entity already written stays). Slack always
	// does; it is an option so that a test can see both.
	// https://docs.slack.dev/messaging/formatting-message-text
	Format bool
	// EditAfterPost, when set, edits every message posted through
	// chat.postMessage right after it is stored (its text becomes
	// EditAfterPost(text), and it gains "edited"); its metadata stays.
	EditAfterPost func(text string) string
	// ClockOffset is how far the API's clock is ahead of Now (negative:
	// behind): message timestamps, Date and Retry-After are the API's.
	ClockOffset time.Duration
}

// SlackOption changes a SlackConfig.
type SlackOption func(*SlackConfig)

// WithSlackToken sets the bot token.
func WithSlackToken(token string) SlackOption { return func(c *SlackConfig) { c.Token = token } }

// WithSlackClock injects the server clock.
func WithSlackClock(now func() time.Time) SlackOption { return func(c *SlackConfig) { c.Now = now } }

// WithSlackNonMarketplaceTier applies the conversations.history limits of
// an app that is not in the Slack Marketplace: 1 request a minute, at
// most 15 messages a page ("the maximum and default values for the limit
// parameter have both been reduced to 15 objects").
// https://docs.slack.dev/reference/methods/conversations.history
func WithSlackNonMarketplaceTier() SlackOption {
	return func(c *SlackConfig) { c.HistoryLimit, c.HistoryEvery = 15, time.Minute }
}

// WithSlackFormatting makes the fake rewrite posted texts as Slack does
// (links and entities; see SlackConfig.Format).
func WithSlackFormatting() SlackOption { return func(c *SlackConfig) { c.Format = true } }

// WithSlackEditAfterPost edits every posted message right after it is
// stored (see SlackConfig.EditAfterPost).
func WithSlackEditAfterPost(edit func(text string) string) SlackOption {
	return func(c *SlackConfig) { c.EditAfterPost = edit }
}

// WithSlackClockOffset sets the API clock d ahead of the test's clock
// (negative: behind).
func WithSlackClockOffset(d time.Duration) SlackOption {
	return func(c *SlackConfig) { c.ClockOffset = d }
}

// SlackAPI is the fake. It counts effects (messages posted through
// chat.postMessage). All methods are safe for concurrent use.
type SlackAPI struct {
	fakeServer[Fault]
	cfg SlackConfig

	lastTS   map[string]int64 // channel -> last ts in microseconds
	messages []*SlackMessage
	limited  int       // history calls refused for the rate tier
	lastList time.Time // the last history call served
}

// NewSlackAPI starts a fake Slack API for a test, closed with t.Cleanup.
func NewSlackAPI(t Cleaner, opts ...SlackOption) *SlackAPI {
	return startFor(t, opts, NewSlackAPIServer)
}

// NewSlackAPIServer starts a fake Slack API; the caller must Close it.
func NewSlackAPIServer(cfg SlackConfig) *SlackAPI {
	cfg.Now = offsetClock(cfg.Now, cfg.ClockOffset)
	cfg.UserID, cfg.BotID, cfg.TeamID = cmp.Or(cfg.UserID, "U0SETTLE"), cmp.Or(cfg.BotID, "B0SETTLE"), cmp.Or(cfg.TeamID, "T0SETTLE")
	if len(cfg.Channels) == 0 {
		cfg.Channels = []string{"C0SETTLE"}
	}
	s := &SlackAPI{cfg: cfg, lastTS: map[string]int64{}}
	s.start(cfg.Token, map[string]http.HandlerFunc{
		"/auth.test": s.handleAuthTest, "POST /chat.postMessage": s.handlePost,
		"GET /conversations.history": s.handleHistory,
	}, withDate(cfg.Now))
	return s
}

// Next queues write faults; each chat.postMessage with a valid token
// consumes one. RateLimited(d) answers 429 with Retry-After.
func (s *SlackAPI) Next(f ...Fault) { s.queueFaults(f...) }

// UserID is the token's bot user id (what a route's account is).
func (s *SlackAPI) UserID() string { return s.cfg.UserID }

// Inject plants a message (by anyone) in a channel at the current time;
// it is not an effect. An empty User is the token's bot user.
func (s *SlackAPI) Inject(m SlackMessage) SlackMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.User == "" {
		m.User, m.BotID = s.cfg.UserID, s.cfg.BotID
	}
	m.TS = s.nextTS(m.Channel)
	m.Injected = true
	stored := m
	s.messages = append(s.messages, &stored)
	return stored
}

// Messages returns every stored message in posting order.
func (s *SlackAPI) Messages() []SlackMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneAll(s.messages, func(m SlackMessage) SlackMessage { m.Metadata = slices.Clone(m.Metadata); return m })
}

// EffectsWithMetadata is the number of posted messages whose metadata
// contains sub (an intent id, say).
func (s *SlackAPI) EffectsWithMetadata(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.messages {
		if !m.Injected && strings.Contains(string(m.Metadata), sub) {
			n++
		}
	}
	return n
}

// RateLimitedCalls is the number of conversations.history calls refused
// with 429 for the rate tier.
func (s *SlackAPI) RateLimitedCalls() int { return locked(&s.mu, &s.limited) }

// ratelimited answers Slack's rate-limit refusal: HTTP 429 with
// Retry-After in whole seconds (rounded up).
// https://docs.slack.dev/apis/web-api/rate-limits
func ratelimited(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": "ratelimited"})
}

// nextTS is a new ts in channel: the clock in microseconds, strictly
// after the channel's last. Call with s.mu held.
func (s *SlackAPI) nextTS(channel string) string {
	us := s.cfg.Now().UnixMicro()
	if us <= s.lastTS[channel] {
		us = s.lastTS[channel] + 1
	}
	s.lastTS[channel] = us
	return formatTS(us)
}

func formatTS(us int64) string {
	return strconv.FormatInt(us/1e6, 10) + "." + fmt.Sprintf("%06d", us%1e6)
}

// parseTS reads a Slack timestamp ("1712345678.000100", or whole
// seconds) as microseconds.
func parseTS(v string) (int64, bool) {
	r, ok := new(big.Rat).SetString(v)
	if !ok || r.Sign() < 0 {
		return 0, false
	}
	r.Mul(r, big.NewRat(1e6, 1))
	if !r.IsInt() {
		q := new(big.Int).Quo(r.Num(), r.Denom())
		return q.Int64(), true
	}
	return r.Num().Int64(), true
}

func slackFail(w http.ResponseWriter, code string) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": code})
}

// auth checks the token: Authorization: Bearer, or a token argument.
func (s *SlackAPI) auth(r *http.Request, form url.Values) string {
	if r.Header.Get("Authorization") != "" {
		if bearerOK(r, s.token) {
			return ""
		}
		return "invalid_auth"
	}
	switch form.Get("token") {
	case "":
		return "not_authed"
	case s.token:
		return ""
	}
	return "invalid_auth"
}

func (s *SlackAPI) handleAuthTest(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	if e := s.auth(r, r.Form); e != "" {
		slackFail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "url": "https://settle-test.slack.com/", "team": "settle test",
		"user": "settle", "team_id": s.cfg.TeamID, "user_id": s.cfg.UserID, "bot_id": s.cfg.BotID, "is_enterprise_install": false})
}

// message renders a stored message as Slack does. Call with s.mu held.
func (s *SlackAPI) message(m *SlackMessage, metadata bool) map[string]any {
	out := map[string]any{"type": "message", "user": m.User, "text": m.Text, "ts": m.TS, "team": s.cfg.TeamID}
	if m.BotID != "" {
		out["bot_id"] = m.BotID
		out["app_id"] = "A0SETTLE"
	}
	if m.EditedTS != "" {
		out["edited"] = map[string]any{"user": m.User, "ts": m.EditedTS}
	}
	if metadata && m.Metadata != nil {
		out["metadata"] = json.RawMessage(m.Metadata)
	}
	return out
}

type slackPost struct {
	Channel  string          `json:"channel"`
	Text     string          `json:"text"`
	Metadata json.RawMessage `json:"metadata"`
}

func (s *SlackAPI) handlePost(w http.ResponseWriter, r *http.Request) {
	bump(&s.mu, &s.writes)
	raw, err := readBody(w, r)
	if err != nil {
		slackFail(w, "invalid_form_data")
		return
	}
	req, form, ok := decodeSlackPost(r, raw)
	if !ok {
		slackFail(w, "invalid_json")
		return
	}
	if e := s.auth(r, form); e != "" {
		slackFail(w, e)
		return
	}
	f := s.popFault()
	switch {
	case refusedBeforeCommit(w, f.Kind, f.Code, func(code int) {
		if code == http.StatusTooManyRequests {
			ratelimited(w, time.Second)
		} else {
			writeJSON(w, code, map[string]any{"ok": false, "error": "fatal_error"})
		}
	}):
	case f.Kind == FaultRateLimited:
		ratelimited(w, f.Duration)
	case !slices.Contains(s.cfg.Channels, req.Channel):
		slackFail(w, "channel_not_found")
	case req.Text == "":
		slackFail(w, "no_text")
	case req.Metadata != nil && !validSlackMetadata(req.Metadata):
		slackFail(w, "invalid_metadata_format")
	default:
		s.post(w, req, f)
	}
}

// post stores a message and answers it under fault f.
func (s *SlackAPI) post(w http.ResponseWriter, req slackPost, f Fault) {
	s.mu.Lock()
	text := req.Text
	if s.cfg.Format {
		text = slackFormat(text)
	}
	m := &SlackMessage{Channel: req.Channel, TS: s.nextTS(req.Channel), User: s.cfg.UserID, BotID: s.cfg.BotID, Text: text, Metadata: slices.Clone(req.Metadata)}
	s.messages = append(s.messages, m)
	s.effectLocked("")
	out := map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS, "message": s.message(m, true)}
	if s.cfg.EditAfterPost != nil {
		// Edited after the answer was made: every later read sees it.
		m.Text, m.EditedTS = s.cfg.EditAfterPost(m.Text), formatTS(s.cfg.Now().Add(time.Second).UnixMicro())
	}
	s.mu.Unlock()
	if !droppedAfterCommit(w, f) {
		writeJSON(w, http.StatusOK, out)
	}
}

// decodeSlackPost reads a chat.postMessage request, JSON or a form; ok is
// false for JSON that does not decode.
func decodeSlackPost(r *http.Request, raw []byte) (slackPost, url.Values, bool) {
	var req slackPost
	form := url.Values{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if json.Unmarshal(raw, &req) != nil {
			return req, form, false
		}
		return req, form, true
	}
	form, _ = url.ParseQuery(string(raw))
	req.Channel, req.Text = form.Get("channel"), form.Get("text")
	if m := form.Get("metadata"); m != "" {
		req.Metadata = json.RawMessage(m)
	}
	return req, form, true
}

// validSlackMetadata: md is message metadata as Slack takes it, an event
// type and an object payload.
func validSlackMetadata(md json.RawMessage) bool {
	var m struct {
		EventType    string          `json:"event_type"`
		EventPayload json.RawMessage `json:"event_payload"`
	}
	return json.Unmarshal(md, &m) == nil && m.EventType != "" && len(m.EventPayload) > 0 && m.EventPayload[0] == '{'
}

func (s *SlackAPI) handleHistory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if e := s.auth(r, q); e != "" {
		slackFail(w, e)
		return
	}
	hq, refusal := s.parseHistory(q)
	if refusal != "" {
		slackFail(w, refusal)
		return
	}

	s.mu.Lock()
	now := s.cfg.Now()
	if s.cfg.HistoryEvery > 0 && !s.lastList.IsZero() && now.Sub(s.lastList) < s.cfg.HistoryEvery {
		s.limited++
		wait := s.cfg.HistoryEvery - now.Sub(s.lastList)
		s.mu.Unlock()
		ratelimited(w, wait)
		return
	}
	s.lastList = now
	s.listCalls++
	var sel []*SlackMessage
	for _, m := range s.messages {
		if m.Channel == hq.channel && hq.selects(m) {
			sel = append(sel, m)
		}
	}
	slices.SortFunc(sel, func(a, b *SlackMessage) int { // newest first
		x, _ := parseTS(a.TS)
		y, _ := parseTS(b.TS)
		return cmp.Compare(y, x)
	})
	limit := hq.limit
	out := map[string]any{"ok": true, "has_more": len(sel) > limit, "pin_count": 0}
	msgs := []any{}
	for i := 0; i < len(sel) && i < limit; i++ {
		msgs = append(msgs, s.message(sel[i], hq.withMeta))
	}
	out["messages"] = msgs
	next := ""
	if len(sel) > limit {
		us, _ := parseTS(sel[limit-1].TS)
		next = base64.StdEncoding.EncodeToString([]byte("next_ts:" + strconv.FormatInt(us, 10)))
	}
	out["response_metadata"] = map[string]any{"next_cursor": next}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// slackHistory is a conversations.history query.
type slackHistory struct {
	channel        string
	oldest, latest int64 // the window, in microseconds
	inclusive      bool
	limit          int
	before         int64 // the cursor: the ts to continue below (exclusive)
	withMeta       bool
}

// selects: m is in the query's window, below its cursor.
func (hq *slackHistory) selects(m *SlackMessage) bool {
	us, _ := parseTS(m.TS)
	in := us > hq.oldest && us < hq.latest
	if hq.inclusive {
		in = us >= hq.oldest && us <= hq.latest
	}
	return in && us < hq.before
}

// parseHistory reads a conversations.history query as Slack does, or
// returns the error Slack answers.
func (s *SlackAPI) parseHistory(q url.Values) (*slackHistory, string) {
	hq := &slackHistory{channel: q.Get("channel"), oldest: 0, latest: int64(1) << 62, limit: 100, before: int64(1) << 62}
	if !slices.Contains(s.cfg.Channels, hq.channel) {
		return nil, "channel_not_found"
	}
	for i, at := range []*int64{&hq.oldest, &hq.latest} {
		name := []string{"oldest", "latest"}[i]
		var ok bool
		if v := q.Get(name); v != "" {
			if *at, ok = parseTS(v); !ok {
				return nil, "invalid_ts_" + name
			}
		}
	}
	hq.inclusive = q.Get("inclusive") == "true" || q.Get("inclusive") == "1"
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, "invalid_limit"
		}
		hq.limit = min(n, 999)
	}
	if s.cfg.HistoryLimit > 0 {
		hq.limit = min(hq.limit, s.cfg.HistoryLimit) // silently
	}
	// The cursor is opaque to clients.
	if c := q.Get("cursor"); c != "" {
		b, err := base64.StdEncoding.DecodeString(c)
		rest, ok := strings.CutPrefix(string(b), "next_ts:")
		us, perr := strconv.ParseInt(rest, 10, 64)
		if err != nil || !ok || perr != nil {
			return nil, "invalid_cursor"
		}
		hq.before = us
	}
	hq.withMeta = q.Get("include_all_metadata") == "true" || q.Get("include_all_metadata") == "1"
	return hq, ""
}

// slackLink finds what Slack turns into a link in a posted text: a URL
// with a scheme, or a bare www. host.
var slackLink = regexp.MustCompile(`(?:https?://|mailto:)[^\s<>|]+|\bwww\.[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+[^\s<>|]*`)

// slackFormat rewrites a text as Slack stores it: links wrapped in <...>
// (a bare www. host as <http://host|host>; punctuation that ends a
// sentence is not part of the link) and &, <, > escaped outside them.
func slackFormat(text string) string {
	var b strings.Builder
	last := 0
	for _, m := range slackLink.FindAllStringIndex(text, -1) {
		b.WriteString(slackEscape(text[last:m[0]]))
		u := text[m[0]:m[1]]
		link := strings.TrimRight(u, ".,;:!?)'\"")
		if strings.HasPrefix(link, "www.") {
			b.WriteString("<http://" + slackEscape(link) + "|" + slackEscape(link) + ">")
		} else {
			b.WriteString("<" + slackEscape(link) + ">")
		}
		b.WriteString(slackEscape(u[len(link):]))
		last = m[1]
	}
	b.WriteString(slackEscape(text[last:]))
	return b.String()
}

// slackEscape writes &, < and > as Slack's entities; an entity already
// written (&amp; &lt; &gt;) stays as it is.
func slackEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '&' && (strings.HasPrefix(s[i:], "&amp;") || strings.HasPrefix(s[i:], "&lt;") || strings.HasPrefix(s[i:], "&gt;")):
			b.WriteByte(c)
		case c == '&':
			b.WriteString("&amp;")
		case c == '<':
			b.WriteString("&lt;")
		case c == '>':
			b.WriteString("&gt;")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
