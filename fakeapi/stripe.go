package fakeapi

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A fake of the Stripe API's PaymentIntents, as Stripe documents it:
//
//   - GET /v1/account: the secret key's account (acct_...)
//   - POST /v1/payment_intents (form: amount, currency, customer,
//     description, payment_method, confirm, metadata[key]); with
//     confirm=true and a payment method it succeeds
//   - GET /v1/payment_intents/{id}
//   - GET /v1/payment_intents/search?query=&limit=&page=: the exact
//     clauses metadata['key']:'value', status:, customer:, currency:'v'
//     and amount:N joined by AND; a search_result (data, has_more,
//     next_page). Search is not read-after-write: an object is
//     searchable SearchLag after its creation.
//   - Idempotency-Key on POST: the first answer is saved and replayed
//     (Idempotent-Replayed: true); other parameters under the key are a
//     400 idempotency_error; keys are pruned KeyRetention (24 h) after
//     first use.
//   - API versions: the Stripe-Version header, else the account's
//     default (APIVersion), echoed in the answer. From 2023-08-16,
//     confirming needs a return_url unless off_session=true or
//     automatic_payment_methods[allow_redirects]=never (400 otherwise).
//
// https://docs.stripe.com/api/payment_intents,
// https://docs.stripe.com/search#search-query-language,
// https://docs.stripe.com/api/idempotent_requests,
// https://docs.stripe.com/changelog/2023-08-16/automatic-payment-methods.
// Errors are {"error": {"type", "code", "message", "param"}}. The secret
// key comes as Bearer (or Basic, as the user); anything else is 401.
// Write faults (Next): CommitThenDrop, ResetBeforeCommit, Status(code),
// Delay(d), KeyReused.

// PaymentIntent is one PaymentIntent as the fake stores it.
type PaymentIntent struct {
	ID            string
	Amount        int64
	Currency      string
	Customer      string
	Description   string
	PaymentMethod string
	Status        string
	Created       time.Time
	Metadata      map[string]string
	// IdempotencyKey is the key of the request that created it.
	IdempotencyKey string
	// Injected: planted with Inject (not an effect).
	Injected bool
}

// StripeConfig configures the fake Stripe API.
type StripeConfig struct {
	// Token is the secret key (random when empty).
	Token string
	// AccountID is the key's account (default acct_1SettleTest).
	AccountID string
	// Now is the server clock (default time.Now).
	Now func() time.Time
	// SearchLag is how long after creation an object becomes searchable.
	SearchLag time.Duration
	// KeyRetention is how long an idempotency key is kept (default 24h).
	KeyRetention time.Duration
	// APIVersion is the account's default API version (default
	// 2024-06-20), used by requests without a Stripe-Version header.
	APIVersion string
	// ClockOffset is how far the API's clock is ahead of Now (negative:
	// behind): created, Date and search lag are the API's.
	ClockOffset time.Duration
}

// stripeAPMVersion is the first API version with automatic payment
// methods on by default.
const stripeAPMVersion = "2023-08-16"

// StripeOption changes a StripeConfig.
type StripeOption func(*StripeConfig)

// WithStripeToken sets the secret key.
func WithStripeToken(token string) StripeOption { return func(c *StripeConfig) { c.Token = token } }

// WithStripeClock injects the server clock.
func WithStripeClock(now func() time.Time) StripeOption { return func(c *StripeConfig) { c.Now = now } }

// WithStripeClockOffset sets the API clock d ahead of the test's clock
// (negative: behind).
func WithStripeClockOffset(d time.Duration) StripeOption {
	return func(c *StripeConfig) { c.ClockOffset = d }
}

// WithStripeSearchLag delays searchability.
func WithStripeSearchLag(d time.Duration) StripeOption {
	return func(c *StripeConfig) { c.SearchLag = d }
}

// StripeAPI is the fake. It counts effects (PaymentIntents created
// through POST; replays create none). All methods are safe for concurrent
// use.
type StripeAPI struct {
	fakeServer[Fault]
	cfg StripeConfig

	seq      int
	intents  []*PaymentIntent
	keys     keyStore
	replays  int
	versions []string // the API version of each POST
}

// withVersion answers with the API version the request was made with
// (its Stripe-Version header, or the account's default).
func (s *StripeAPI) withVersion(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Stripe-Version", s.version(r))
		h.ServeHTTP(w, r)
	})
}

func (s *StripeAPI) version(r *http.Request) string {
	if v := r.Header.Get("Stripe-Version"); v != "" {
		return v
	}
	return s.cfg.APIVersion
}

// Versions are the API versions the POSTs were made with, in order.
func (s *StripeAPI) Versions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.versions)
}

// NewStripeAPI starts a fake Stripe API for a test, closed with t.Cleanup.
func NewStripeAPI(t Cleaner, opts ...StripeOption) *StripeAPI {
	return startFor(t, opts, NewStripeAPIServer)
}

// NewStripeAPIServer starts a fake Stripe API; the caller must Close it.
func NewStripeAPIServer(cfg StripeConfig) *StripeAPI {
	cfg.Now = offsetClock(cfg.Now, cfg.ClockOffset)
	cfg.APIVersion, cfg.AccountID = cmp.Or(cfg.APIVersion, "2024-06-20"), cmp.Or(cfg.AccountID, "acct_1SettleTest")
	if cfg.KeyRetention <= 0 {
		cfg.KeyRetention = 24 * time.Hour
	}
	s := &StripeAPI{cfg: cfg, keys: keyStore{}}
	s.start(cfg.Token, map[string]http.HandlerFunc{
		"GET /v1/account": s.handleAccount, "POST /v1/payment_intents": s.handleCreate,
		"GET /v1/payment_intents/search": s.handleSearch, "GET /v1/payment_intents/{id}": s.handleGet,
	}, withDate(cfg.Now), s.withVersion)
	return s
}

// Next queues write faults; each authorized POST consumes one.
func (s *StripeAPI) Next(f ...Fault) { s.queueFaults(f...) }

// AccountID is the secret key's account (what a route's account is).
func (s *StripeAPI) AccountID() string { return s.cfg.AccountID }

// Inject plants a PaymentIntent (made outside the route under test); it
// is not an effect. A zero ID, Status and Created are filled in.
func (s *StripeAPI) Inject(pi PaymentIntent) PaymentIntent {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	if pi.ID == "" {
		pi.ID = "pi_" + strconv.Itoa(s.seq) + "Injected"
	}
	if pi.Status == "" {
		pi.Status = "succeeded"
	}
	if pi.Created.IsZero() {
		pi.Created = s.cfg.Now().UTC()
	}
	pi.Injected = true
	stored := pi
	stored.Metadata = cloneMap(pi.Metadata)
	s.intents = append(s.intents, &stored)
	return stored
}

func cloneMap(m map[string]string) map[string]string {
	out := map[string]string{}
	maps.Copy(out, m)
	return out
}

// PaymentIntents returns every stored PaymentIntent in creation order.
func (s *StripeAPI) PaymentIntents() []PaymentIntent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneAll(s.intents, func(p PaymentIntent) PaymentIntent { p.Metadata = cloneMap(p.Metadata); return p })
}

// Replays is the number of POSTs answered from a saved result.
func (s *StripeAPI) Replays() int { return locked(&s.mu, &s.replays) }

// --- HTTP ---

func stripeError(w http.ResponseWriter, code int, typ, errCode, param, msg string) {
	e := map[string]any{"type": typ, "message": msg}
	if errCode != "" {
		e["code"] = errCode
	}
	if param != "" {
		e["param"] = param
	}
	writeJSON(w, code, map[string]any{"error": e})
}

// accept checks a request's secret key (Bearer, or Basic with the key
// as the user), answering 401 when it is missing or wrong.
func (s *StripeAPI) accept(w http.ResponseWriter, r *http.Request) bool {
	if user, _, ok := r.BasicAuth(); bearerOK(r, s.token) || ok && user == s.token {
		return true
	}
	stripeError(w, http.StatusUnauthorized, "invalid_request_error", "", "", "Invalid API Key provided")
	return false
}

func (s *StripeAPI) handleAccount(w http.ResponseWriter, r *http.Request) {
	if !s.accept(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": s.cfg.AccountID, "object": "account", "country": "JP", "default_currency": "jpy",
		"charges_enabled": true, "payouts_enabled": true})
}

// json renders a PaymentIntent as the API does (client_secret included,
// as Stripe returns it to the secret key). Call with s.mu held.
func (s *StripeAPI) json(p *PaymentIntent) map[string]any {
	orNull := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	received := int64(0)
	if p.Status == "succeeded" {
		received = p.Amount
	}
	md := map[string]any{}
	for k, v := range p.Metadata {
		md[k] = v
	}
	return map[string]any{
		"id": p.ID, "object": "payment_intent", "amount": p.Amount, "amount_received": received, "currency": p.Currency,
		"customer": orNull(p.Customer), "description": orNull(p.Description), "payment_method": orNull(p.PaymentMethod), "status": p.Status,
		"created": p.Created.Unix(), "metadata": md, "livemode": false, "capture_method": "automatic",
		"client_secret": p.ID + "_secret_" + strconv.Itoa(len(p.ID)) + "fake",
	}
}

var metadataKey = regexp.MustCompile(`^metadata\[([A-Za-z0-9_-]{1,40})\]$`)

func (s *StripeAPI) handleCreate(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.writes++
	s.versions = append(s.versions, s.version(r))
	s.mu.Unlock()
	if !s.accept(w, r) {
		return
	}
	raw, err := readBody(w, r)
	form, perr := url.ParseQuery(string(raw))
	if err != nil || perr != nil {
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "Invalid request body")
		return
	}
	f := s.popFault()
	if refusedBeforeCommit(w, f.Kind, f.Code, func(code int) { stripeError(w, code, "api_error", "", "", "injected failure") }) {
		return
	}

	key := r.Header.Get("Idempotency-Key")
	sum := sha256.Sum256([]byte(canonicalForm(form)))
	params := hex.EncodeToString(sum[:])
	now := s.cfg.Now()
	if s.replayed(w, key, params, now) {
		return
	}
	// Validation failures are not saved under the key.
	p, ok := s.parseCreate(w, r, form)
	if !ok {
		return
	}

	s.mu.Lock()
	s.seq++
	p.ID, p.Created, p.IdempotencyKey = "pi_"+strconv.Itoa(s.seq)+"Fake", now.UTC(), key
	s.intents = append(s.intents, p)
	s.effectLocked(key)
	body, _ := json.Marshal(s.json(p))
	body = append(body, '\n')
	if key != "" {
		s.keys[key] = &idemKey{fingerprint: params, firstSeen: now, status: http.StatusOK, body: body}
	}
	s.mu.Unlock()

	if f.Kind == FaultDelay && f.Duration > 0 {
		s.sleep(f.Duration, r.Context().Done())
	}
	switch {
	case droppedAfterCommit(w, f):
	case f.Kind == FaultKeyReused:
		stripeError(w, http.StatusBadRequest, "idempotency_error", "", "", stripeKeyReused)
	default:
		writeBody(w, http.StatusOK, body, false)
	}
}

const stripeKeyReused = "Keys for idempotent requests can only be used with the same parameters they were first used with."

// replayed answers a request whose idempotency key is known (inside its
// retention) as Stripe does: the saved answer, or an idempotency error.
func (s *StripeAPI) replayed(w http.ResponseWriter, key, params string, now time.Time) bool {
	if key == "" {
		return false
	}
	s.mu.Lock()
	k := s.keys.get(key, now, s.cfg.KeyRetention)
	if k == nil {
		s.mu.Unlock()
		return false
	}
	status, body := k.status, k.body
	if k.fingerprint == params {
		s.replays++
	}
	s.mu.Unlock()
	if k.fingerprint != params {
		stripeError(w, http.StatusBadRequest, "idempotency_error", "", "", stripeKeyReused)
	} else {
		writeBody(w, status, body, true)
	}
	return true
}

// parseCreate checks a create's form as Stripe does and returns the
// payment intent it asks for (no id yet); a refusal is answered on w.
func (s *StripeAPI) parseCreate(w http.ResponseWriter, r *http.Request, form url.Values) (*PaymentIntent, bool) {
	amount, aerr := strconv.ParseInt(form.Get("amount"), 10, 64)
	currency := form.Get("currency")
	switch {
	case form.Get("amount") == "":
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_missing", "amount", "Missing required param: amount.")
		return nil, false
	case aerr != nil || amount < 1:
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_invalid_integer", "amount", "Invalid positive integer")
		return nil, false
	case len(currency) != 3 || strings.ToLower(currency) != currency:
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_invalid_string", "currency", "Invalid currency")
		return nil, false
	case form.Get("off_session") == "true" && form.Get("confirm") != "true":
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "", "off_session", "You may only specify `off_session` when `confirm` is true.")
		return nil, false
	case form.Get("confirm") == "true" && s.needsReturnURL(r, form):
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "", "return_url",
			"A `return_url` must be specified because this Payment Intent is configured to automatically accept the payment methods enabled in the Dashboard, "+
				"some of which may require a full page redirect to succeed. If you do not want to accept redirect-based payment methods, "+
				"set `automatic_payment_methods[enabled]` to `true` and `automatic_payment_methods[allow_redirects]` to `never` when creating Setup Intents and Payment Intents.")
		return nil, false
	}
	md := map[string]string{}
	for k, v := range form {
		if strings.HasPrefix(k, "metadata") {
			m := metadataKey.FindStringSubmatch(k)
			if m == nil || len(v[0]) > 500 {
				stripeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_unknown", k, "Invalid metadata")
				return nil, false
			}
			md[m[1]] = v[0]
		}
	}
	p := &PaymentIntent{Amount: amount, Currency: currency, Customer: form.Get("customer"),
		Description: form.Get("description"), PaymentMethod: form.Get("payment_method"), Status: "requires_payment_method",
		Metadata: md}
	if p.PaymentMethod != "" {
		p.Status = "requires_confirmation"
		if form.Get("confirm") == "true" {
			p.Status = "succeeded"
		}
	}
	return p, true
}

// needsReturnURL: confirming this PaymentIntent needs a return_url — on
// API versions with automatic payment methods on by default, unless it
// names its payment method types, turns them off, refuses redirects or is
// off session.
func (s *StripeAPI) needsReturnURL(r *http.Request, form url.Values) bool {
	if s.version(r) < stripeAPMVersion || form.Get("return_url") != "" || form.Get("off_session") == "true" {
		return false
	}
	if form.Has("payment_method_types[]") || form.Has("payment_method_types[0]") || form.Get("automatic_payment_methods[enabled]") == "false" {
		return false
	}
	return form.Get("automatic_payment_methods[allow_redirects]") != "never"
}

// canonicalForm renders form values sorted by key, for comparing the
// parameters of two requests under one key.
func canonicalForm(v url.Values) string {
	keys := slices.Sorted(maps.Keys(v))
	var b strings.Builder
	for _, k := range keys {
		for _, x := range v[k] {
			b.WriteString(url.QueryEscape(k) + "=" + url.QueryEscape(x) + "&")
		}
	}
	return b.String()
}

func (s *StripeAPI) handleGet(w http.ResponseWriter, r *http.Request) {
	if !s.accept(w, r) {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.intents {
		if p.ID == id {
			writeJSON(w, http.StatusOK, s.json(p))
			return
		}
	}
	stripeError(w, http.StatusNotFound, "invalid_request_error", "resource_missing", "intent", "No such payment_intent")
}

var searchClause = regexp.MustCompile(`^(?:metadata\['([^']{1,40})'\]|(status|customer|currency)):'([^']*)'$|^(amount):([0-9]+)$`)

type stripeClause struct{ field, key, value string }

func parseStripeQuery(q string) ([]stripeClause, bool) {
	var out []stripeClause
	for _, part := range strings.Split(q, " AND ") {
		m := searchClause.FindStringSubmatch(strings.TrimSpace(part))
		switch {
		case m == nil:
			return nil, false
		case m[1] != "":
			out = append(out, stripeClause{"metadata", m[1], m[3]})
		case m[2] != "":
			out = append(out, stripeClause{m[2], "", m[3]})
		default:
			out = append(out, stripeClause{m[4], "", m[5]})
		}
	}
	return out, len(out) > 0
}

func (c stripeClause) match(p *PaymentIntent) bool {
	switch c.field {
	case "metadata":
		v, ok := p.Metadata[c.key]
		return ok && v == c.value
	case "status":
		return p.Status == c.value
	case "customer":
		return p.Customer == c.value
	case "currency":
		return p.Currency == c.value
	case "amount":
		return strconv.FormatInt(p.Amount, 10) == c.value
	}
	return false
}

func (s *StripeAPI) handleSearch(w http.ResponseWriter, r *http.Request) {
	if !s.accept(w, r) {
		return
	}
	q := r.URL.Query()
	clauses, ok := parseStripeQuery(q.Get("query"))
	if !ok {
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_invalid_string", "query", "Invalid search query")
		return
	}
	limit := 10
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			stripeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_invalid_integer", "limit", "Invalid limit")
			return
		}
		limit = n
	}
	start := 0
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(v, "page_"))
		if !strings.HasPrefix(v, "page_") || err != nil || n < 0 {
			stripeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_invalid_string", "page", "Invalid page")
			return
		}
		start = n
	}
	now := s.cfg.Now()
	s.mu.Lock()
	var sel []*PaymentIntent
	for i := len(s.intents) - 1; i >= 0; i-- { // newest first
		p := s.intents[i]
		if now.Sub(p.Created) < s.cfg.SearchLag {
			continue
		}
		all := true
		for _, c := range clauses {
			all = all && c.match(p)
		}
		if all {
			sel = append(sel, p)
		}
	}
	data := []any{}
	for i := start; i < len(sel) && i < start+limit; i++ {
		data = append(data, s.json(sel[i]))
	}
	s.mu.Unlock()
	var next any
	more := start+limit < len(sel)
	if more {
		next = "page_" + strconv.Itoa(start+limit)
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "search_result", "url": "/v1/payment_intents/search",
		"has_more": more, "next_page": next, "data": data})
}
