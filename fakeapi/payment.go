package fakeapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/settle-dev/settle/events"
)

// The fake payment API follows Stripe's Idempotency-Key semantics and the
// IETF httpapi Idempotency-Key draft: the key is claimed before
// any work, a key reused with another body is refused with 422, a duplicate
// that arrives while the first request is still executing gets 409, a
// completed key replays the stored status and body byte for byte with
// Idempotent-Replayed: true, and a key is forgotten KeyRetention after its
// first receipt.

// Charge is one charge as the fake stores and serves it.
type Charge struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Customer    string `json:"customer"`
	Description string `json:"description"`
	Status      string `json:"status"`
	// Created is the creation time in Unix seconds.
	Created int64 `json:"created"`

	// IdempotencyKey and AttemptID are the Idempotency-Key and
	// X-Settle-Attempt headers of the POST that created the charge.
	IdempotencyKey string `json:"-"`
	AttemptID      string `json:"-"`
}

// PaymentConfig configures the fake payment API.
type PaymentConfig struct {
	// Token is the bearer token every request must carry (401 without).
	// When empty a random token is generated; read it with PaymentAPI.Token.
	Token string
	// Now is the server's clock. Default time.Now.
	Now func() time.Time
	// KeyRetention is how long an Idempotency-Key is remembered from its
	// first receipt (default 24h).
	KeyRetention time.Duration
}

// PaymentOption changes a PaymentConfig; any func(*PaymentConfig) will do.
type PaymentOption func(*PaymentConfig)

// WithPaymentToken sets the bearer token.
func WithPaymentToken(token string) PaymentOption {
	return func(c *PaymentConfig) { c.Token = token }
}

// WithPaymentClock injects the server clock (see ManualClock).
func WithPaymentClock(now func() time.Time) PaymentOption {
	return func(c *PaymentConfig) { c.Now = now }
}

// WithPaymentKeyRetention sets the Idempotency-Key retention.
func WithPaymentKeyRetention(d time.Duration) PaymentOption {
	return func(c *PaymentConfig) { c.KeyRetention = d }
}

// payKey is one remembered Idempotency-Key.
type payKey struct {
	fingerprint string
	firstSeen   time.Time
	inFlight    bool
	status      int
	body        []byte
}

// PaymentAPI is a fake payment API on a real HTTP server. It counts effects
// (charges created) and fails on purpose (Next). All methods are safe for
// concurrent use.
//
// Faults, consumed one per authenticated POST /v1/charges:
//   - CommitThenDrop: the charge is made and the response stored, then the
//     connection is closed without an answer.
//   - ResetBeforeCommit: nothing is claimed or charged; TCP reset.
//   - Delay(d): the key is claimed and the charge made, then the request
//     stays in flight for d (a duplicate gets 409) before the response is
//     stored and sent. Delay(d).Dropped() drops it instead of answering.
//   - Status(code): answered with code; nothing is claimed or charged.
type PaymentAPI struct {
	fakeServer[Fault]
	cfg PaymentConfig

	mu         sync.Mutex
	seq        int
	charges    []*Charge
	byID       map[string]*Charge
	keys       map[string]*payKey
	effectsKey map[string]int
	writes     int
	reads      int
}

// NewPaymentAPI starts a fake payment API for a test and closes it with
// t.Cleanup.
func NewPaymentAPI(t Cleaner, opts ...PaymentOption) *PaymentAPI {
	return startFor(t, opts, NewPaymentAPIServer)
}

// NewPaymentAPIServer starts a fake payment API outside a test. The caller
// must Close it.
func NewPaymentAPIServer(cfg PaymentConfig) *PaymentAPI {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.KeyRetention <= 0 {
		cfg.KeyRetention = 24 * time.Hour
	}
	p := &PaymentAPI{
		cfg:        cfg,
		byID:       map[string]*Charge{},
		keys:       map[string]*payKey{},
		effectsKey: map[string]int{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/charges", p.handleCreate)
	mux.HandleFunc("GET /v1/charges", p.handleLookup)
	mux.HandleFunc("GET /v1/charges/{id}", p.handleGet)
	p.start(cfg.Token, mux)
	return p
}

// Next queues faults; each authenticated POST consumes one, in order. It
// panics on a fault kind the payment API does not implement.
func (p *PaymentAPI) Next(faults ...Fault) {
	for _, f := range faults {
		switch f.Kind {
		case FaultNone, FaultCommitThenDrop, FaultResetBeforeCommit, FaultDelay, FaultStatus:
		default:
			panic("fakeapi: the payment API does not implement fault " + f.String())
		}
	}
	p.queueFaults(faults...)
}

// Charges is the number of charges created (effects).
func (p *PaymentAPI) Charges() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.charges)
}

// ChargesForKey is the number of charges created by POSTs that carried
// Idempotency-Key key (more than one only when the key expired in between).
func (p *PaymentAPI) ChargesForKey(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.effectsKey[key]
}

// ChargeList returns a copy of every charge, in creation order.
func (p *PaymentAPI) ChargeList() []Charge {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Charge, len(p.charges))
	for i, c := range p.charges {
		out[i] = *c
	}
	return out
}

// Writes is the number of POST /v1/charges requests received, whatever
// happened to them.
func (p *PaymentAPI) Writes() int { return locked(&p.mu, &p.writes) }

// Reads is the number of GET requests received.
func (p *PaymentAPI) Reads() int { return locked(&p.mu, &p.reads) }

// --- HTTP ---

type chargeBody struct {
	Amount      *json.Number `json:"amount"`
	Currency    *string      `json:"currency"`
	Customer    *string      `json:"customer"`
	Description *string      `json:"description"`
}

// parseCharge validates a charge body. The message is a fixed text that
// echoes nothing from the request.
func parseCharge(raw []byte) (Charge, string) {
	var body chargeBody
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		return Charge{}, "the body is not a valid charge object"
	}
	if dec.More() {
		return Charge{}, "trailing data after the charge object"
	}
	if body.Amount == nil {
		return Charge{}, "amount is required"
	}
	amount, err := strconv.ParseInt(body.Amount.String(), 10, 64)
	if err != nil || amount <= 0 {
		return Charge{}, "amount must be a positive integer in the currency's smallest unit"
	}
	if body.Currency == nil || !isLowerISO4217(*body.Currency) {
		return Charge{}, "currency must be three lowercase letters"
	}
	if body.Customer == nil || *body.Customer == "" {
		return Charge{}, "customer is required"
	}
	c := Charge{Object: "charge", Amount: amount, Currency: *body.Currency, Customer: *body.Customer, Status: "succeeded"}
	if body.Description != nil {
		c.Description = *body.Description
	}
	return c, ""
}

func isLowerISO4217(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return true
}

// claim claims the idempotency key and makes the charge, in one step; a
// key already known is answered on w as the API does (ok false).
func (p *PaymentAPI) claim(w http.ResponseWriter, r *http.Request, key, fp string, charge Charge) (*payKey, Charge, bool) {
	p.mu.Lock()
	now := p.cfg.Now()
	if k := p.keys[key]; k != nil && !now.Before(k.firstSeen.Add(p.cfg.KeyRetention)) {
		delete(p.keys, key)
	}
	if k := p.keys[key]; k != nil {
		var status int
		var body []byte
		switch {
		case k.fingerprint != fp:
			status = http.StatusUnprocessableEntity
		case k.inFlight:
			status = http.StatusConflict
		default:
			status, body = k.status, k.body
		}
		p.mu.Unlock()
		switch status {
		case http.StatusUnprocessableEntity:
			paymentError(w, status, "idempotency_error", "idempotency_key_reused",
				"this Idempotency-Key was used with a different request body")
		case http.StatusConflict:
			paymentError(w, status, "idempotency_error", "idempotency_key_in_use",
				"a request with this Idempotency-Key is still being processed; retry later")
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(status)
			_, _ = w.Write(body)
		}
		return nil, charge, false
	}
	k := &payKey{fingerprint: fp, firstSeen: now, inFlight: true}
	p.keys[key] = k
	p.seq++
	charge.ID = "ch_" + strconv.Itoa(p.seq)
	charge.Created = now.Unix()
	charge.IdempotencyKey = key
	charge.AttemptID = r.Header.Get("X-Settle-Attempt")
	stored := charge
	p.charges = append(p.charges, &stored)
	p.byID[stored.ID] = &stored
	p.effectsKey[key]++
	p.mu.Unlock()
	return k, charge, true
}

func paymentError(w http.ResponseWriter, code int, typ, errCode, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]string{"type": typ, "code": errCode, "message": msg}})
}

func (p *PaymentAPI) handleCreate(w http.ResponseWriter, r *http.Request) {
	bump(&p.mu, &p.writes)
	if !p.authorized(r) {
		paymentError(w, http.StatusUnauthorized, "authentication_error", "unauthorized", "missing or invalid bearer token")
		return
	}
	raw, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	f := p.popFault()
	switch f.Kind {
	case FaultResetBeforeCommit:
		resetConn(w)
		return
	case FaultStatus:
		paymentError(w, f.Code, "api_error", "injected", "injected failure: "+http.StatusText(f.Code))
		return
	}
	if readErr != nil {
		paymentError(w, http.StatusBadRequest, "invalid_request_error", "bad_request", "cannot read the request body")
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		paymentError(w, http.StatusBadRequest, "invalid_request_error", "idempotency_key_required", "the Idempotency-Key header is required")
		return
	}
	if len(key) > 255 {
		paymentError(w, http.StatusBadRequest, "invalid_request_error", "invalid_idempotency_key", "the Idempotency-Key header is longer than 255 bytes")
		return
	}
	// Validation failures are not stored under the key (Stripe stores a
	// result only once the endpoint started executing).
	charge, msg := parseCharge(raw)
	if msg != "" {
		paymentError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", msg)
		return
	}
	fp, err := events.PayloadSHA256(raw)
	if err != nil {
		paymentError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", "the body cannot be canonicalised")
		return
	}

	k, charge, ok := p.claim(w, r, key, fp, charge)
	if !ok {
		return
	}

	body, err := json.Marshal(charge)
	if err != nil {
		panic("fakeapi: cannot marshal a charge: " + err.Error())
	}
	body = append(body, '\n')

	if f.Kind == FaultDelay && f.Duration > 0 {
		// Still in flight: the work goes on even when the client leaves.
		p.sleep(f.Duration, nil)
	}
	p.mu.Lock()
	k.inFlight, k.status, k.body = false, http.StatusCreated, body
	p.mu.Unlock()

	if f.Kind == FaultCommitThenDrop || f.Drop {
		dropConn(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}

// handleLookup is the status lookup: GET /v1/charges?idempotency_key=K
// answers the latest charge created with key K, or 404. Charges remember
// their key, so the lookup outlives the key's retention.
func (p *PaymentAPI) handleLookup(w http.ResponseWriter, r *http.Request) {
	bump(&p.mu, &p.reads)
	if !p.authorized(r) {
		paymentError(w, http.StatusUnauthorized, "authentication_error", "unauthorized", "missing or invalid bearer token")
		return
	}
	key := r.URL.Query().Get("idempotency_key")
	if key == "" {
		paymentError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", "idempotency_key is required")
		return
	}
	p.mu.Lock()
	var found *Charge
	for i := len(p.charges) - 1; i >= 0; i-- {
		if p.charges[i].IdempotencyKey == key {
			found = p.charges[i]
			break
		}
	}
	var out Charge
	if found != nil {
		out = *found
	}
	p.mu.Unlock()
	if found == nil {
		paymentError(w, http.StatusNotFound, "invalid_request_error", "resource_missing", "no charge for this idempotency key")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (p *PaymentAPI) handleGet(w http.ResponseWriter, r *http.Request) {
	bump(&p.mu, &p.reads)
	if !p.authorized(r) {
		paymentError(w, http.StatusUnauthorized, "authentication_error", "unauthorized", "missing or invalid bearer token")
		return
	}
	p.mu.Lock()
	c, ok := p.byID[r.PathValue("id")]
	var out Charge
	if ok {
		out = *c
	}
	p.mu.Unlock()
	if !ok {
		paymentError(w, http.StatusNotFound, "invalid_request_error", "resource_missing", "no such charge")
		return
	}
	writeJSON(w, http.StatusOK, out)
}
