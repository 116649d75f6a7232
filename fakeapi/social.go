package fakeapi

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Post is one post as the fake social API stores and serves it. The JSON
// fields are what the API returns; the `json:"-"` fields are bookkeeping a
// test can inspect through SocialAPI.Posts.
type Post struct {
	ID         string    `json:"id"`
	URL        string    `json:"url"`
	AuthorID   string    `json:"author_id"`
	Body       string    `json:"body"`
	Assets     []string  `json:"assets"`
	ParentID   string    `json:"parent_id,omitempty"`
	Visibility string    `json:"visibility"`
	CreatedAt  time.Time `json:"created_at"`

	// VisibleAt is when the post becomes visible to list, get and its page.
	VisibleAt time.Time `json:"-"`
	// IdempotencyKey and AttemptID are the Idempotency-Key and
	// X-Settle-Attempt headers of the POST that created the post ("" for
	// injected posts).
	IdempotencyKey string `json:"-"`
	AttemptID      string `json:"-"`
	// PageNotFound makes the public page 404 although the API has the post
	// (the URL404 fault).
	PageNotFound bool `json:"-"`
	// Injected is true for posts planted with Inject (not an effect).
	Injected bool `json:"-"`
	// Removed: deleted or moderated (Remove): gone from list, get and its
	// page, but still what an honoured Idempotency-Key replays.
	Removed bool `json:"-"`

	seq int64
}

func (p Post) clone() Post {
	p.Assets = slices.Clone(p.Assets)
	if p.Assets == nil {
		p.Assets = []string{}
	}
	return p
}

// listItem is a post as the list endpoint returns it when OmitBodyInList is
// set: no body, no assets.
type listItem struct {
	ID         string    `json:"id"`
	URL        string    `json:"url"`
	AuthorID   string    `json:"author_id"`
	ParentID   string    `json:"parent_id,omitempty"`
	Visibility string    `json:"visibility"`
	CreatedAt  time.Time `json:"created_at"`
}

// SocialConfig configures the fake social API.
type SocialConfig struct {
	// Token is the bearer token every /v1 request must carry. When empty a
	// random token is generated; read it back with SocialAPI.Token.
	Token string
	// Now is the server's clock (created_at, visibility). Default time.Now.
	Now func() time.Time
	// HonorIdempotencyKey: a POST whose Idempotency-Key already created a
	// post gets that post back with 200 and creates nothing.
	HonorIdempotencyKey bool
	// PageSize is the list page size (default 50).
	PageSize int
	// OmitBodyInList: list items lack body and assets.
	OmitBodyInList bool
	// DefaultVisibilityDelay delays the visibility of every created post.
	DefaultVisibilityDelay time.Duration
	// ListAllAuthors makes the list endpoint ignore its account: it lists
	// every author's posts, as a thread's or an issue's comment list does.
	ListAllAuthors bool
	// ListHook, when set, runs for every list request after its page was
	// taken and before it is sent: a slow listing (a test moves its clock
	// there, so that the page is older than its arrival).
	ListHook func(r *http.Request)
}

// SocialOption changes a SocialConfig; any func(*SocialConfig) will do.
type SocialOption func(*SocialConfig)

// WithSocialToken sets the bearer token.
func WithSocialToken(token string) SocialOption { return func(c *SocialConfig) { c.Token = token } }

// WithSocialClock injects the server clock (see ManualClock).
func WithSocialClock(now func() time.Time) SocialOption { return func(c *SocialConfig) { c.Now = now } }

// WithIdempotencyKeys makes the server honour Idempotency-Key.
func WithIdempotencyKeys() SocialOption {
	return func(c *SocialConfig) { c.HonorIdempotencyKey = true }
}

// WithListAllAuthors makes the list endpoint list every author's posts.
func WithListAllAuthors() SocialOption { return func(c *SocialConfig) { c.ListAllAuthors = true } }

// WithSocialListHook sets SocialConfig.ListHook.
func WithSocialListHook(f func(r *http.Request)) SocialOption {
	return func(c *SocialConfig) { c.ListHook = f }
}

// FaultKind names what a Fault does to one POST.
type FaultKind int

// Fault kinds. See the constructor of the same name for each.
const (
	FaultNone FaultKind = iota
	FaultCommitThenDrop
	FaultResetBeforeCommit
	FaultDelay
	FaultStatus
	FaultVisibilityDelay
	FaultDuplicate
	FaultWrongAuthor
	FaultWrongParent
	FaultMissingAsset
	FaultURL404
	FaultDraft
	FaultRespelled
	FaultRateLimited
	FaultKeyReused
)

// faultNames are the shared kinds' names, in the order declared.
var faultNames = []string{"none", "commit_then_drop", "reset_before_commit", "delay", "status", "visibility_delay",
	"duplicate", "wrong_author", "wrong_parent", "missing_asset", "url_404", "draft", "respelled", "rate_limited", "key_reused"}

func (k FaultKind) String() string {
	if k >= 0 && int(k) < len(faultNames) {
		return faultNames[k]
	}
	return "fault(" + strconv.Itoa(int(k)) + ")"
}

// Fault is what the next POST will suffer. Kind selects the behaviour;
// Duration, Code and ID are its parameter. Drop, on a kind that commits,
// closes the connection without a response after the commit (and after the
// delay, for FaultDelay): "draft + response dropped" is Draft().Dropped().
type Fault struct {
	Kind     FaultKind
	Duration time.Duration // FaultDelay, FaultVisibilityDelay
	Code     int           // FaultStatus
	ID       string        // FaultWrongAuthor, FaultWrongParent
	Drop     bool
}

// Dropped returns f with Drop set.
func (f Fault) Dropped() Fault { f.Drop = true; return f }

func (f Fault) String() string {
	s := f.Kind.String()
	switch f.Kind {
	case FaultDelay, FaultVisibilityDelay, FaultRateLimited:
		s += "(" + f.Duration.String() + ")"
	case FaultStatus:
		s += "(" + strconv.Itoa(f.Code) + ")"
	case FaultWrongAuthor, FaultWrongParent:
		s += "(" + f.ID + ")"
	}
	if f.Drop {
		s += "+drop"
	}
	return s
}

// CommitThenDrop creates the post, then closes the connection without any
// response: server-side success, the client sees EOF or a reset.
func CommitThenDrop() Fault { return Fault{Kind: FaultCommitThenDrop} }

// ResetBeforeCommit reads the request, creates nothing and resets the
// connection (TCP RST): server-side failure, the client sees a reset.
func ResetBeforeCommit() Fault { return Fault{Kind: FaultResetBeforeCommit} }

// Delay creates the post, then waits d before responding. The wait ends
// early when the client goes away or the server is closed.
func Delay(d time.Duration) Fault { return Fault{Kind: FaultDelay, Duration: d} }

// Status answers with code and a small JSON error body; creates nothing.
func Status(code int) Fault { return Fault{Kind: FaultStatus, Code: code} }

// RateLimited answers the request with the API's documented rate-limit
// refusal, asking to wait d, and executes nothing (GitHub: 403 with
// x-ratelimit-remaining 0 and x-ratelimit-reset; Slack: 429 with
// Retry-After). Only the GitHub and Slack fakes implement it.
func RateLimited(d time.Duration) Fault { return Fault{Kind: FaultRateLimited, Duration: d} }

// KeyReused: the request is carried out (the effect is made) and answered
// with the API's "idempotency key already used with other parameters"
// error, as an API answers a request whose key an earlier request of
// this intent already used (the Stripe fake: 400 idempotency_error).
func KeyReused() Fault { return Fault{Kind: FaultKeyReused} }

// VisibilityDelay creates the post invisible to list, get and its page
// until the clock reaches created_at+d.
func VisibilityDelay(d time.Duration) Fault { return Fault{Kind: FaultVisibilityDelay, Duration: d} }

// Duplicate creates two identical posts (two effects) and answers with the
// first.
func Duplicate() Fault { return Fault{Kind: FaultDuplicate} }

// WrongAuthor stores the post with author_id set to id.
func WrongAuthor(id string) Fault { return Fault{Kind: FaultWrongAuthor, ID: id} }

// WrongParent stores the post with parent_id set to id.
func WrongParent(id string) Fault { return Fault{Kind: FaultWrongParent, ID: id} }

// MissingAsset stores the post without its assets.
func MissingAsset() Fault { return Fault{Kind: FaultMissingAsset} }

// URL404 stores the post normally but its public page answers 404.
func URL404() Fault { return Fault{Kind: FaultURL404} }

// Draft stores the post with visibility "draft" (its page answers 404).
func Draft() Fault { return Fault{Kind: FaultDraft} }

// Respelled stores the post normally and answers with it spelled as other
// servers write JSON: every '/' escaped as "\/" and every character past
// ASCII as a \u escape (PHP's json_encode), '+' '<' '>' '&' '\” as \u
// escapes and times with their offset written out, "…\u002B00:00"
// (.NET's System.Text.Json and DateTimeOffset), the keys in another order,
// white space around every token, and a member settle does not know. The
// same post to any JSON reader.
func Respelled() Fault { return Fault{Kind: FaultRespelled} }

// WriteRecord is what the fake saw of one POST /v1/posts.
type WriteRecord struct {
	IdempotencyKey string
	AttemptID      string
	Fault          Fault
	// Status is the HTTP status the server answered (under a Delay fault, the
	// one it answers after the delay, which a client that timed out never
	// reads); 0 when the connection was dropped or reset instead.
	Status int
	// PostIDs are the posts this POST created.
	PostIDs []string
	// Replay is true when an honoured Idempotency-Key returned an earlier post.
	Replay bool
}

// SocialAPI is a fake social-network posting API on a real HTTP server. It
// counts effects (posts created through POST) and fails on purpose (Next).
// All methods are safe for concurrent use.
type SocialAPI struct {
	fakeServer[Fault]
	cfg SocialConfig

	seq         int64
	posts       []*Post
	byID        map[string]*Post
	firstForKey map[string]string // idempotency key -> first post id
	writeLog    []WriteRecord
	// listFaults and pageFaults are consumed by list calls and page
	// probes, in order (see FailLists, FailPages).
	listFaults []ReadFault
	pageFaults []ReadFault
}

// ReadFault is what the next list call (or live-page probe) suffers.
type ReadFault int

const (
	// ReadOK serves the read normally (a placeholder in a sequence).
	ReadOK ReadFault = iota
	// ReadError500 answers 500.
	ReadError500
	// ReadNoItems answers 200 with a body that lacks the items array.
	ReadNoItems
	// ReadReset resets the connection.
	ReadReset
)

// FailLists queues faults for the next list calls, in order.
func (s *SocialAPI) FailLists(f ...ReadFault) { s.queueReadFaults(&s.listFaults, f) }

// FailPages queues faults for the next live-page probes, in order.
func (s *SocialAPI) FailPages(f ...ReadFault) { s.queueReadFaults(&s.pageFaults, f) }

func (f *fakeServer[F]) queueReadFaults(q *[]ReadFault, faults []ReadFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*q = append(*q, faults...)
}

// failedRead takes the next fault of q and answers the read with it;
// false when there is none.
func (f *fakeServer[F]) failedRead(w http.ResponseWriter, q *[]ReadFault) bool {
	f.mu.Lock()
	rf := popQueue(q)
	f.mu.Unlock()
	switch rf {
	case ReadError500:
		writeError(w, http.StatusInternalServerError, "internal", "the server failed")
	case ReadNoItems:
		writeJSON(w, http.StatusOK, map[string]any{"data": []any{}})
	case ReadReset:
		resetConn(w)
	default:
		return false
	}
	return true
}

// Remove deletes a post (as a moderator or its author would): it is gone
// from list, get and its page. It stays counted as an effect.
func (s *SocialAPI) Remove(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.byID[id]
	if !ok || p.Removed {
		return false
	}
	p.Removed = true
	return true
}

// NewSocialAPI starts a fake social API for a test, closed with t.Cleanup.
func NewSocialAPI(t Cleaner, opts ...SocialOption) *SocialAPI {
	return startFor(t, opts, NewSocialAPIServer)
}

// NewSocialAPIServer starts a fake social API; the caller must Close it.
func NewSocialAPIServer(cfg SocialConfig) *SocialAPI {
	cfg.Now = offsetClock(cfg.Now, 0)
	if cfg.PageSize <= 0 {
		cfg.PageSize = 50
	}
	s := &SocialAPI{cfg: cfg, byID: map[string]*Post{}, firstForKey: map[string]string{}}
	s.start(cfg.Token, map[string]http.HandlerFunc{
		"POST /v1/posts": s.handleCreate, "GET /v1/posts/{id}": s.handleGet,
		"GET /v1/accounts/{account}/posts": s.handleList, "GET /p/{id}": s.handlePage,
	})
	return s
}

// Next queues faults; each POST that passes authentication consumes one, in
// order. A POST with no queued fault behaves normally.
func (s *SocialAPI) Next(f ...Fault) { s.queueFaults(f...) }

// NextFor queues faults that only the POSTs of intentID consume (by their
// X-Settle-Attempt header), in order, before any fault queued with Next.
func (s *SocialAPI) NextFor(intentID string, f ...Fault) { s.queueFaultsFor(intentID, f...) }

// Inject plants a post directly, as if someone else had posted it; it is not
// an effect. Empty ID, URL, Visibility, CreatedAt and VisibleAt are filled in
// (VisibleAt defaults to CreatedAt). It returns the stored post.
func (s *SocialAPI) Inject(p Post) Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	p.seq = s.seq
	if p.ID == "" {
		p.ID = "p_" + strconv.FormatInt(p.seq, 10)
	}
	if p.URL == "" {
		p.URL = s.srv.URL + "/p/" + p.ID
	}
	if p.Visibility == "" {
		p.Visibility = "public"
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = s.cfg.Now().UTC()
	}
	if p.VisibleAt.IsZero() {
		p.VisibleAt = p.CreatedAt
	}
	p.Injected = true
	p = p.clone()
	stored := p
	s.posts = append(s.posts, &stored)
	s.byID[stored.ID] = &stored
	return stored.clone()
}

// Posts returns a copy of every stored post, in creation order.
func (s *SocialAPI) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneAll(s.posts, Post.clone)
}

// WriteLog returns what the server saw of each POST, in arrival order
// (requests refused with 401 included, with a zero Fault). An entry is
// complete once its client has observed the outcome; before that it may
// hold only the headers.
func (s *SocialAPI) WriteLog() []WriteRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.writeLog)
	for i := range out {
		out[i].PostIDs = slices.Clone(out[i].PostIDs)
	}
	return out
}

// --- HTTP ---

type createRequest struct {
	Account  string   `json:"account"`
	Body     *string  `json:"body"`
	Assets   []string `json:"assets"`
	ParentID string   `json:"parent_id"`
}

// writeError answers with a JSON error. Messages are fixed strings: nothing
// from the request (and never the token) is echoed.
func writeError(w http.ResponseWriter, code int, errCode, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]string{"code": errCode, "message": msg}})
}

// record stores rec at index i of the write log. It is called before the
// client gets its answer (or loses it), so the log is final by the time the
// client has observed the outcome.
func (s *SocialAPI) record(i int, rec WriteRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeLog[i] = rec
}

func (s *SocialAPI) handleCreate(w http.ResponseWriter, r *http.Request) {
	rec := WriteRecord{IdempotencyKey: r.Header.Get("Idempotency-Key"), AttemptID: r.Header.Get("X-Settle-Attempt")}
	s.mu.Lock()
	s.writes++
	idx := len(s.writeLog)
	s.writeLog = append(s.writeLog, rec)
	s.mu.Unlock()
	refuse := func(code int, errCode, msg string) {
		rec.Status = code
		s.record(idx, rec)
		writeError(w, code, errCode, msg)
	}
	if !s.authorized(r) {
		refuse(http.StatusUnauthorized, "unauthorized", "missing or invalid bearer token")
		return
	}
	raw, readErr := readBody(w, r)
	f := s.popFaultFor(r)
	rec.Fault = f
	if f.Kind == FaultResetBeforeCommit {
		s.record(idx, rec)
		resetConn(w)
		return
	}
	req, msg := parseCreate(raw)
	switch {
	case f.Kind == FaultStatus:
		refuse(f.Code, "injected", "injected failure: "+http.StatusText(f.Code))
	case readErr != nil:
		refuse(http.StatusBadRequest, "bad_request", "cannot read the request body")
	case msg != "":
		refuse(http.StatusBadRequest, "invalid_request", msg)
	default:
		resp, code := s.commit(req, &rec, f)
		drop := f.Kind == FaultCommitThenDrop || f.Drop
		if !drop {
			rec.Status = code
		}
		s.record(idx, rec)
		if f.Kind == FaultDelay && f.Duration > 0 {
			s.sleep(f.Duration, r.Context().Done())
		}
		switch {
		case droppedAfterCommit(w, f):
		case f.Kind == FaultRespelled:
			writeRespelled(w, code, resp)
		default:
			writeJSON(w, code, resp)
		}
	}
}

func parseCreate(raw []byte) (createRequest, string) {
	var req createRequest
	if msg := decodeStrict(raw, &req, "post object"); msg != "" {
		return req, msg
	}
	if req.Account == "" {
		return req, "account is required"
	}
	if req.Body == nil {
		return req, "body is required"
	}
	for i, a := range req.Assets {
		if !isSHA256Hex(a) {
			return req, fmt.Sprintf("assets[%d] is not a lowercase hex sha256", i)
		}
	}
	return req, ""
}

func isSHA256Hex(s string) bool { return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == "" }

// commit stores the post(s) a POST creates (or finds the replayed one) and
// returns the response body and status.
func (s *SocialAPI) commit(req createRequest, rec *WriteRecord, f Fault) (Post, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := rec.IdempotencyKey
	if s.cfg.HonorIdempotencyKey && key != "" {
		if id, ok := s.firstForKey[key]; ok {
			rec.Replay = true
			return s.byID[id].clone(), http.StatusOK
		}
	}
	now := s.cfg.Now().UTC()
	p := Post{
		AuthorID:       req.Account,
		Body:           *req.Body,
		Assets:         slices.Clone(req.Assets),
		ParentID:       req.ParentID,
		Visibility:     "public",
		CreatedAt:      now,
		VisibleAt:      now.Add(s.cfg.DefaultVisibilityDelay),
		IdempotencyKey: key,
		AttemptID:      rec.AttemptID,
	}
	switch f.Kind {
	case FaultVisibilityDelay:
		p.VisibleAt = now.Add(f.Duration)
	case FaultWrongAuthor:
		p.AuthorID = f.ID
	case FaultWrongParent:
		p.ParentID = f.ID
	case FaultMissingAsset:
		p.Assets = nil
	case FaultURL404:
		p.PageNotFound = true
	case FaultDraft:
		p.Visibility = "draft"
	}
	n := 1
	if f.Kind == FaultDuplicate {
		n = 2
	}
	var first Post
	for i := 0; i < n; i++ {
		s.seq++
		c := p.clone()
		c.seq = s.seq
		c.ID = "p_" + strconv.FormatInt(c.seq, 10)
		c.URL = s.srv.URL + "/p/" + c.ID
		s.posts = append(s.posts, &c)
		s.byID[c.ID] = &c
		s.effectLocked(key)
		if _, ok := s.firstForKey[key]; !ok && key != "" {
			s.firstForKey[key] = c.ID
		}
		rec.PostIDs = append(rec.PostIDs, c.ID)
		if i == 0 {
			first = c.clone()
		}
	}
	return first, http.StatusCreated
}

func (p *Post) visible(now time.Time) bool { return !p.Removed && !now.Before(p.VisibleAt) }

// acceptRead counts a read and checks its bearer token, answering 401
// when it is missing or wrong.
func (s *SocialAPI) acceptRead(w http.ResponseWriter, r *http.Request) bool {
	bump(&s.mu, &s.reads)
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "unauthorized", "missing or invalid bearer token")
		return false
	}
	return true
}

func (s *SocialAPI) handleGet(w http.ResponseWriter, r *http.Request) {
	if !s.acceptRead(w, r) {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	p, ok := s.byID[id]
	var out Post
	if ok && p.visible(s.cfg.Now()) {
		out = p.clone()
	} else {
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such post")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

type listResponse struct {
	Items      []any  `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Cursors are "<created_at unix nanos>.<seq>" of the last item returned; the
// next page starts strictly after it in (created_at desc, seq desc) order,
// so posts created between pages do not shift it.
func parseCursor(c string) (int64, int64, bool) {
	a, b, ok := strings.Cut(c, ".")
	if !ok {
		return 0, 0, false
	}
	ns, err1 := strconv.ParseInt(a, 10, 64)
	seq, err2 := strconv.ParseInt(b, 10, 64)
	return ns, seq, err1 == nil && err2 == nil
}

func (s *SocialAPI) handleList(w http.ResponseWriter, r *http.Request) {
	bump(&s.mu, &s.listCalls)
	if !s.acceptRead(w, r) || s.failedRead(w, &s.listFaults) {
		return
	}
	account := r.PathValue("account")
	lq, refusal := parseSocialList(r.URL.Query())
	if refusal != "" {
		writeError(w, http.StatusBadRequest, "invalid_request", refusal)
		return
	}

	s.mu.Lock()
	now := s.cfg.Now()
	var match []Post
	for _, p := range s.posts {
		mine := p.AuthorID == account || s.cfg.ListAllAuthors
		inWindow := (lq.since.IsZero() || !p.CreatedAt.Before(lq.since)) && (lq.until.IsZero() || !p.CreatedAt.After(lq.until))
		if mine && p.visible(now) && inWindow {
			match = append(match, p.clone())
		}
	}
	s.mu.Unlock()
	resp := lq.page(match, s.cfg.PageSize, s.cfg.OmitBodyInList)
	if s.cfg.ListHook != nil {
		s.cfg.ListHook(r)
	}
	writeJSON(w, http.StatusOK, resp)
}

// socialList is a listing's query: its window and where it resumes.
type socialList struct {
	since, until  time.Time
	curNS, curSeq int64
	hasCursor     bool
}

// parseSocialList reads a listing's query, or says why it is refused.
func parseSocialList(q url.Values) (socialList, string) {
	var lq socialList
	for i, at := range []*time.Time{&lq.since, &lq.until} {
		name := []string{"since", "until"}[i]
		var err error
		if v := q.Get(name); v != "" {
			if *at, err = time.Parse(time.RFC3339Nano, v); err != nil {
				return lq, name + " is not an RFC 3339 time"
			}
		}
	}
	if v := q.Get("cursor"); v != "" {
		var ok bool
		if lq.curNS, lq.curSeq, ok = parseCursor(v); !ok {
			return lq, "cursor is invalid"
		}
		lq.hasCursor = true
	}
	return lq, ""
}

// page is the page of match (the posts in the window) the query asks for:
// newest first, from the cursor, at most pageSize posts, bodies left out
// when omit.
func (lq socialList) page(match []Post, pageSize int, omit bool) listResponse {
	// Newest first; equal created_at by creation order, newest first.
	slices.SortFunc(match, func(a, b Post) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.seq, a.seq)
	})
	if lq.hasCursor {
		i := slices.IndexFunc(match, func(p Post) bool {
			ns := p.CreatedAt.UnixNano()
			return ns < lq.curNS || ns == lq.curNS && p.seq < lq.curSeq
		})
		if i < 0 {
			i = len(match)
		}
		match = match[i:]
	}
	resp := listResponse{Items: []any{}}
	if len(match) > pageSize {
		last := match[pageSize-1]
		resp.NextCursor = strconv.FormatInt(last.CreatedAt.UnixNano(), 10) + "." + strconv.FormatInt(last.seq, 10)
		match = match[:pageSize]
	}
	for _, p := range match {
		if omit {
			resp.Items = append(resp.Items, listItem{ID: p.ID, URL: p.URL, AuthorID: p.AuthorID, ParentID: p.ParentID, Visibility: p.Visibility, CreatedAt: p.CreatedAt})
		} else {
			resp.Items = append(resp.Items, p)
		}
	}
	return resp
}

func (s *SocialAPI) handlePage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.failedRead(w, &s.pageFaults) {
		return
	}
	s.mu.Lock()
	p, ok := s.byID[id]
	var body string
	if ok {
		ok = p.visible(s.cfg.Now()) && p.Visibility == "public" && !p.PageNotFound
		body = p.Body
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "<!doctype html><title>Not found</title><p>This post is not available.</p>\n")
		return
	}
	_, _ = fmt.Fprintf(w, "<!doctype html><title>Post %s</title><article>%s</article>\n", html.EscapeString(id), html.EscapeString(body))
}
