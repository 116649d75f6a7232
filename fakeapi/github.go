package fakeapi

import (
	"cmp"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A fake of the GitHub REST API's issue comments, as GitHub documents
// them (https://docs.github.com/en/rest/issues/comments, .../users and
// .../using-the-rest-api/using-pagination-in-the-rest-api):
//
//   - GET /user: the authenticated user (login, id)
//   - POST /repos/{owner}/{repo}/issues/{issue_number}/comments {"body"}:
//     201 with the comment; 404 for an unknown issue, 422 without a body
//   - GET /repos/{owner}/{repo}/issues/comments (the repository's) and
//     .../issues/{issue_number}/comments (one issue's): ascending by id,
//     or sort=created|updated and direction=asc|desc; since= filters on
//     updated_at; per_page (default 30, at most 100) and page; the Link
//     header (rel="next", "last", "first", "prev")
//   - GET /repos/{owner}/{repo}/issues/comments/{comment_id}
//
// and, without credentials, an issue's HTML page (a comment's html_url
// with a #issuecomment-<id> fragment): 404 when the repository is
// private. Credentials are "Authorization: Bearer <token>" or "token
// <token>"; anything else is 401. Write faults (Next): CommitThenDrop,
// ResetBeforeCommit, Status(code), RateLimited(d).

// GitHubComment is one issue comment as the fake stores it.
type GitHubComment struct {
	ID        int64
	Issue     int
	Body      string
	UserID    int64
	UserLogin string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Injected: planted with Inject (not an effect).
	Injected bool
}

// GitHubConfig configures the fake GitHub API.
type GitHubConfig struct {
	// Token is the credential every API request must carry (random when
	// empty; read it back with Token).
	Token string
	// Login and UserID are the token's user (default settle-bot, 4242).
	Login  string
	UserID int64
	// Owner and Repo name the one repository served (default octo-org,
	// hello-world); Issues is how many issues exist, numbered from 1
	// (default 100).
	Owner, Repo string
	Issues      int
	// Private makes the repository private: its HTML pages answer 404
	// without credentials.
	Private bool
	// PageCap is the largest page a list serves, whatever per_page asks:
	// GitHub caps it at 100 silently (the default).
	PageCap int
	// Installation makes the token a GitHub App installation token (as
	// GitHub Actions' GITHUB_TOKEN is): Login and UserID are then the
	// app's bot user, and GET /user answers 403 "Resource not accessible
	// by integration"; GraphQL's viewer still names the bot.
	Installation bool
	// ClockOffset is how far the API's clock is ahead of Now (negative:
	// behind): created_at, updated_at, Date and rate-limit resets are
	// the API's.
	ClockOffset time.Duration
	// EditAfterCreate, when set, edits every comment created through POST
	// right after it is stored, as a person fixing a typo would: its body
	// becomes EditAfterCreate(body) and updated_at moves on.
	EditAfterCreate func(body string) string
	// PullRequests are the numbers that are pull requests. A comment on
	// one is shown as GitHub-compatible servers show it: its html_url is
	// the pull request's page, pull_request_url names it, and issue_url
	// is empty (the parent a route reads from issue_url is then empty).
	PullRequests []int
	// Now is the server clock (default time.Now).
	Now func() time.Time
}

// GitHubOption changes a GitHubConfig.
type GitHubOption func(*GitHubConfig)

// WithGitHubToken sets the token.
func WithGitHubToken(token string) GitHubOption { return func(c *GitHubConfig) { c.Token = token } }

// WithGitHubClock injects the server clock.
func WithGitHubClock(now func() time.Time) GitHubOption { return func(c *GitHubConfig) { c.Now = now } }

// WithGitHubPageCap caps every list page at n items silently (GitHub's
// cap is 100).
func WithGitHubPageCap(n int) GitHubOption { return func(c *GitHubConfig) { c.PageCap = n } }

// WithGitHubInstallationToken makes the token an installation token of a
// GitHub App whose bot user is login and id (GitHub Actions' GITHUB_TOKEN
// acts as github-actions[bot], id 41898282): GET /user answers 403.
func WithGitHubInstallationToken(login string, id int64) GitHubOption {
	return func(c *GitHubConfig) { c.Installation, c.Login, c.UserID = true, login, id }
}

// WithGitHubClockOffset sets the API clock d ahead of the test's clock
// (negative: behind).
func WithGitHubClockOffset(d time.Duration) GitHubOption {
	return func(c *GitHubConfig) { c.ClockOffset = d }
}

// WithGitHubEditAfterCreate edits every comment created through POST
// right after it is stored (see GitHubConfig.EditAfterCreate).
func WithGitHubEditAfterCreate(edit func(body string) string) GitHubOption {
	return func(c *GitHubConfig) { c.EditAfterCreate = edit }
}

// WithGitHubPullRequests makes the numbers pull requests (see
// GitHubConfig.PullRequests).
func WithGitHubPullRequests(n ...int) GitHubOption {
	return func(c *GitHubConfig) { c.PullRequests = append(c.PullRequests, n...) }
}

// WithGitHubPrivateRepo makes the repository private.
func WithGitHubPrivateRepo() GitHubOption { return func(c *GitHubConfig) { c.Private = true } }

// GitHubAPI is the fake. It counts effects (comments created through
// POST). All methods are safe for concurrent use.
type GitHubAPI struct {
	fakeServer[Fault]
	cfg GitHubConfig

	nextID      int64
	comments    []*GitHubComment
	limitReads  int           // the next limitReads reads are rate-limited
	limitFor    time.Duration // ... until now+limitFor
	pageCalls   int
	cappedPages int
	// pageFaults are consumed by page requests, in order (FailPages).
	pageFaults []ReadFault
	// pulls are the numbers that are pull requests.
	pulls map[int]bool
}

// MarkPullRequests makes the numbers pull requests from now on (see
// GitHubConfig.PullRequests).
func (s *GitHubAPI) MarkPullRequests(n ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pulls == nil {
		s.pulls = map[int]bool{}
	}
	for _, k := range n {
		s.pulls[k] = true
	}
}

// NewGitHubAPI starts a fake GitHub API for a test, closed with t.Cleanup.
func NewGitHubAPI(t Cleaner, opts ...GitHubOption) *GitHubAPI {
	return startFor(t, opts, NewGitHubAPIServer)
}

// NewGitHubAPIServer starts a fake GitHub API; the caller must Close it.
func NewGitHubAPIServer(cfg GitHubConfig) *GitHubAPI {
	cfg.Now = offsetClock(cfg.Now, cfg.ClockOffset)
	if cfg.Login == "" {
		cfg.Login, cfg.UserID = "settle-bot", 4242
	}
	if cfg.Owner == "" {
		cfg.Owner, cfg.Repo = "octo-org", "hello-world"
	}
	if cfg.Issues <= 0 {
		cfg.Issues = 100
	}
	if cfg.PageCap <= 0 {
		cfg.PageCap = 100
	}
	s := &GitHubAPI{cfg: cfg, nextID: 1000}
	s.MarkPullRequests(cfg.PullRequests...)
	s.start(cfg.Token, map[string]http.HandlerFunc{
		"GET /user": s.handleUser, "POST /graphql": s.handleGraphQL, "/repos/": s.handleRepos,
		"GET /" + cfg.Owner + "/" + cfg.Repo + "/issues/{number}": s.handlePage,
		"GET /" + cfg.Owner + "/" + cfg.Repo + "/pulls/{number}":  s.handlePage,
	}, withDate(cfg.Now))
	return s
}

// Next queues write faults; each authorized POST consumes one.
// RateLimited(d) answers GitHub's primary rate-limit refusal.
func (s *GitHubAPI) Next(f ...Fault) { s.queueFaults(f...) }

// LimitReads makes the next n authorized API reads answer GitHub's
// primary rate-limit refusal (403, x-ratelimit-remaining 0,
// x-ratelimit-reset d from now).
func (s *GitHubAPI) LimitReads(n int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limitReads, s.limitFor = n, d
}

// takeReadLimit consumes one rate-limited read, if any is due: the wait.
func (s *GitHubAPI) takeReadLimit() (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limitReads <= 0 {
		return 0, false
	}
	s.limitReads--
	return s.limitFor, true
}

// rateLimited answers GitHub's primary rate-limit refusal: 403 with the
// rate-limit headers, remaining 0, reset in Unix seconds (rounded up) d
// from now.
// https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api
func (s *GitHubAPI) rateLimited(w http.ResponseWriter, d time.Duration) {
	reset := s.cfg.Now().Add(d + time.Second - 1).Unix()
	h := w.Header()
	h.Set("X-Ratelimit-Limit", "5000")
	h.Set("X-Ratelimit-Remaining", "0")
	h.Set("X-Ratelimit-Used", "5000")
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(reset, 10))
	h.Set("X-Ratelimit-Resource", "core")
	ghError(w, http.StatusForbidden, "API rate limit exceeded for user ID "+strconv.FormatInt(s.cfg.UserID, 10)+".")
}

// RepoURL is the API URL of the served repository (a route's base_url).
func (s *GitHubAPI) RepoURL() string {
	return s.URL() + "/repos/" + s.cfg.Owner + "/" + s.cfg.Repo
}

// UserID is the token's user id, as text (what a route's account is).
func (s *GitHubAPI) UserID() string { return strconv.FormatInt(s.cfg.UserID, 10) }

// Inject plants a comment as if posted outside the API under test (by
// anyone); it is not an effect. Zero ID, times and user are filled in.
func (s *GitHubAPI) Inject(c GitHubComment) GitHubComment {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.ID == 0 {
		s.nextID++
		c.ID = s.nextID
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.cfg.Now().UTC()
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = c.CreatedAt
	}
	if c.UserLogin == "" {
		c.UserID, c.UserLogin = s.cfg.UserID, s.cfg.Login
	}
	c.Injected = true
	stored := c
	s.comments = append(s.comments, &stored)
	return stored
}

// Edit changes a comment's body and its updated_at to now.
func (s *GitHubAPI) Edit(id int64, body string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.comments {
		if c.ID == id {
			c.Body, c.UpdatedAt = body, s.cfg.Now().UTC()
			return true
		}
	}
	return false
}

// Comments returns every stored comment in creation order.
func (s *GitHubAPI) Comments() []GitHubComment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneAll(s.comments, func(c GitHubComment) GitHubComment { return c })
}

// EffectsContaining is the number of comments created through POST whose
// body contains sub (an intent's marker, say).
func (s *GitHubAPI) EffectsContaining(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.comments {
		if !c.Injected && strings.Contains(c.Body, sub) {
			n++
		}
	}
	return n
}

// FailPages queues faults for the next requests of the HTML pages (the
// web site, not the API), in order.
func (s *GitHubAPI) FailPages(f ...ReadFault) { s.queueReadFaults(&s.pageFaults, f) }

// CappedPages is the number of list pages served full at the page cap
// while the request asked for more (a silent cap a listing must see
// through).
func (s *GitHubAPI) CappedPages() int { return locked(&s.mu, &s.cappedPages) }

// PageCalls is the number of HTML page requests served.
func (s *GitHubAPI) PageCalls() int { return locked(&s.mu, &s.pageCalls) }

// --- HTTP ---

func ghError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest"})
}

func (s *GitHubAPI) authorized(r *http.Request) bool {
	if bearerOK(r, s.token) {
		return true
	}
	h := r.Header.Get("Authorization")
	return len(h) > 6 && strings.EqualFold(h[:6], "token ") && h[6:] == s.token
}

func (s *GitHubAPI) userType() string {
	if s.cfg.Installation {
		return "Bot"
	}
	return "User"
}

func (s *GitHubAPI) user() map[string]any {
	return map[string]any{"login": s.cfg.Login, "id": s.cfg.UserID, "node_id": "U_" + strconv.FormatInt(s.cfg.UserID, 10), "type": s.userType(),
		"url": s.URL() + "/users/" + s.cfg.Login, "html_url": s.URL() + "/" + s.cfg.Login}
}

// handleUser answers the token's user; an installation token has none
// (403, as GitHub answers GitHub Apps and Actions' GITHUB_TOKEN).
func (s *GitHubAPI) handleUser(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		ghError(w, http.StatusUnauthorized, "Requires authentication")
		return
	}
	if s.cfg.Installation {
		ghError(w, http.StatusForbidden, "Resource not accessible by integration")
		return
	}
	writeJSON(w, http.StatusOK, s.user())
}

// handleGraphQL answers the GraphQL API's viewer query — the token's
// user or bot, for every kind of token: {"query": "{ viewer { login
// databaseId } }"} gives {"data": {"viewer": {"login", "databaseId"}}}.
// Any other query is a GraphQL error (HTTP 200 with "errors").
// https://docs.github.com/en/graphql/reference/queries#viewer
func (s *GitHubAPI) handleGraphQL(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		ghError(w, http.StatusUnauthorized, "This endpoint requires you to be authenticated.")
		return
	}
	var req struct {
		Query string `json:"query"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		ghError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if !strings.Contains(req.Query, "viewer") {
		writeJSON(w, http.StatusOK, map[string]any{"errors": []map[string]any{{"message": "this fake answers the viewer query only"}}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"viewer": map[string]any{
		"login": s.cfg.Login, "databaseId": s.cfg.UserID, "__typename": s.userType()}}})
}

// json renders a comment as the API does. Call with s.mu held.
func (s *GitHubAPI) json(c *GitHubComment) map[string]any {
	repo := s.cfg.Owner + "/" + s.cfg.Repo
	id := strconv.FormatInt(c.ID, 10)
	page, issueURL, pullURL := "/issues/", s.URL()+"/repos/"+repo+"/issues/"+strconv.Itoa(c.Issue), ""
	if s.pulls[c.Issue] {
		page, issueURL, pullURL = "/pulls/", "", s.URL()+"/repos/"+repo+"/pulls/"+strconv.Itoa(c.Issue)
	}
	return map[string]any{
		"id":               c.ID,
		"node_id":          "IC_" + id,
		"url":              s.URL() + "/repos/" + repo + "/issues/comments/" + id,
		"html_url":         s.URL() + "/" + repo + page + strconv.Itoa(c.Issue) + "#issuecomment-" + id,
		"issue_url":        issueURL,
		"pull_request_url": pullURL,
		"body":             c.Body,
		"user": map[string]any{"login": c.UserLogin, "id": c.UserID, "node_id": "U_" + strconv.FormatInt(c.UserID, 10), "type": s.typeOf(c),
			"url": s.URL() + "/users/" + c.UserLogin},
		"created_at":         c.CreatedAt.UTC().Format(time.RFC3339),
		"updated_at":         c.UpdatedAt.UTC().Format(time.RFC3339),
		"author_association": "MEMBER",
	}
}

// typeOf is the user type of a comment's author.
func (s *GitHubAPI) typeOf(c *GitHubComment) string {
	if c.UserID == s.cfg.UserID {
		return s.userType()
	}
	return "User"
}

// handleRepos routes /repos/{owner}/{repo}/issues/... (the patterns
// issues/comments/{id} and issues/{number}/comments overlap, which
// ServeMux refuses).
func (s *GitHubAPI) handleRepos(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/repos/"), "/")
	if len(parts) < 4 || parts[0] != s.cfg.Owner || parts[1] != s.cfg.Repo || parts[2] != "issues" {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	if r.Method == http.MethodPost {
		bump(&s.mu, &s.writes)
	}
	if !s.authorized(r) {
		ghError(w, http.StatusUnauthorized, "Requires authentication")
		return
	}
	rest := parts[3:]
	if r.Method == http.MethodGet {
		if d, ok := s.takeReadLimit(); ok {
			s.rateLimited(w, d)
			return
		}
	}
	switch {
	case r.Method == http.MethodGet && len(rest) == 1 && rest[0] == "comments":
		s.handleList(w, r, 0)
	case r.Method == http.MethodGet && len(rest) == 2 && rest[0] == "comments":
		s.handleGet(w, rest[1])
	case len(rest) == 2 && rest[1] == "comments":
		n, err := strconv.Atoi(rest[0])
		if err != nil || n < 1 || n > s.cfg.Issues {
			ghError(w, http.StatusNotFound, "Not Found")
			return
		}
		switch r.Method {
		case http.MethodGet:
			s.handleList(w, r, n)
		case http.MethodPost:
			s.handleCreate(w, r, n)
		default:
			ghError(w, http.StatusNotFound, "Not Found")
		}
	default:
		ghError(w, http.StatusNotFound, "Not Found")
	}
}

func (s *GitHubAPI) handleCreate(w http.ResponseWriter, r *http.Request, issue int) {
	raw, readErr := readBody(w, r)
	f := s.popFault()
	if refusedBeforeCommit(w, f.Kind, f.Code, func(code int) { ghError(w, code, http.StatusText(code)) }) {
		return
	}
	if f.Kind == FaultRateLimited {
		s.rateLimited(w, f.Duration)
		return
	}
	var req struct {
		Body *string `json:"body"`
	}
	if readErr != nil || json.Unmarshal(raw, &req) != nil {
		ghError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if req.Body == nil || *req.Body == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
			"errors": []map[string]string{{"resource": "IssueComment", "code": "missing_field", "field": "body"}}})
		return
	}
	s.mu.Lock()
	s.nextID++
	now := s.cfg.Now().UTC()
	c := &GitHubComment{ID: s.nextID, Issue: issue, Body: *req.Body, UserID: s.cfg.UserID, UserLogin: s.cfg.Login, CreatedAt: now, UpdatedAt: now}
	s.comments = append(s.comments, c)
	s.effectLocked("")
	out := s.json(c)
	if s.cfg.EditAfterCreate != nil {
		// The edit lands after the answer was made: the response holds
		// the comment as posted, every later read the edited one.
		c.Body, c.UpdatedAt = s.cfg.EditAfterCreate(c.Body), now.Add(time.Second)
	}
	s.mu.Unlock()
	if droppedAfterCommit(w, f) {
		return
	}
	w.Header().Set("Location", out["url"].(string))
	writeJSON(w, http.StatusCreated, out)
}

func (s *GitHubAPI) handleGet(w http.ResponseWriter, idText string) {
	id, err := strconv.ParseInt(idText, 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.comments {
		if err == nil && c.ID == id {
			writeJSON(w, http.StatusOK, s.json(c))
			return
		}
	}
	ghError(w, http.StatusNotFound, "Not Found")
}

// handleList serves one page of a repository's (its issue number given as 0) or an issue's
// comments, with the Link header.
func (s *GitHubAPI) handleList(w http.ResponseWriter, r *http.Request, issue int) {
	lq, ok := parseGHList(r.URL.Query(), s.cfg.PageCap)
	if !ok {
		ghError(w, http.StatusUnprocessableEntity, lq.refusal)
		return
	}
	perPage, page := lq.perPage, lq.page

	s.mu.Lock()
	s.listCalls++
	var sel []*GitHubComment
	for _, c := range s.comments {
		if (issue == 0 || c.Issue == issue) && (lq.since.IsZero() || !c.UpdatedAt.Before(lq.since)) {
			sel = append(sel, c)
		}
	}
	slices.SortStableFunc(sel, func(a, b *GitHubComment) int {
		k := cmp.Compare(a.ID, b.ID)
		switch lq.sortBy {
		case "created":
			k = cmp.Or(a.CreatedAt.Compare(b.CreatedAt), k)
		case "updated":
			k = cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), k)
		}
		if lq.desc {
			k = -k
		}
		return k
	})
	last := max(1, (len(sel)+perPage-1)/perPage)
	out := []any{}
	from, to := (page-1)*perPage, page*perPage
	if lq.offset >= 0 {
		from, to, last = lq.offset, lq.offset+perPage, page
	}
	for i := from; i < len(sel) && i < to; i++ {
		out = append(out, s.json(sel[i]))
	}
	if lq.asked > perPage && len(out) == perPage {
		s.cappedPages++
	}
	s.mu.Unlock()
	setPageLinks(w, r, page, last)
	writeJSON(w, http.StatusOK, out)
}

// ghList is a listing's query: the page asked for and how to order it.
type ghList struct {
	perPage, page, asked int
	// offset (not GitHub's: other servers page by item offset) starts
	// the page at that item instead of a page number; -1 when not asked.
	offset  int
	since   time.Time
	sortBy  string
	desc    bool
	refusal string // why the query is refused
}

// parseGHList reads a listing's query as GitHub does; a page is at most
// pageCap items.
func parseGHList(q url.Values, pageCap int) (ghList, bool) {
	lq := ghList{perPage: min(30, pageCap), page: 1, offset: -1, refusal: "Validation Failed"}
	for _, p := range []struct {
		name  string
		least int
		to    *int
	}{{"per_page", 1, &lq.asked}, {"page", 1, &lq.page}, {"offset", 0, &lq.offset}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < p.least {
				return lq, false
			}
			*p.to = n
		}
	}
	if lq.asked > 0 {
		lq.perPage = min(lq.asked, pageCap)
	}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			lq.refusal = "Validation Failed: since is not an ISO 8601 timestamp"
			return lq, false
		}
		lq.since = t
	}
	lq.sortBy, lq.desc = q.Get("sort"), q.Get("direction") == "desc"
	if lq.sortBy != "" && lq.sortBy != "created" && lq.sortBy != "updated" {
		return lq, false
	}
	return lq, true
}

// setPageLinks sets the Link header of page of a listing whose last page
// is last, as GitHub does.
func setPageLinks(w http.ResponseWriter, r *http.Request, page, last int) {
	link := func(p int) string {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path}
		v := r.URL.Query()
		v.Set("page", strconv.Itoa(p))
		u.RawQuery = v.Encode()
		return "<" + u.String() + ">"
	}
	var links []string
	if page < last {
		links = append(links, link(page+1)+`; rel="next"`, link(last)+`; rel="last"`)
	}
	if page > 1 {
		links = append(links, link(1)+`; rel="first"`, link(page-1)+`; rel="prev"`)
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
}

// handlePage serves an issue's HTML page to anyone (no credentials are
// needed, none are looked at): 404 when the repository is private.
func (s *GitHubAPI) handlePage(w http.ResponseWriter, r *http.Request) {
	bump(&s.mu, &s.pageCalls)
	if s.failedRead(w, &s.pageFaults) {
		return
	}
	n, err := strconv.Atoi(r.PathValue("number"))
	if s.cfg.Private || err != nil || n < 1 || n > s.cfg.Issues {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, "<!doctype html><title>"+html.EscapeString(s.cfg.Owner+"/"+s.cfg.Repo)+" issue "+strconv.Itoa(n)+"</title>")
}
