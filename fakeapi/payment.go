package fakeapi

import (
	"encoding/json"
	"net/http"
	"strconv"
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
func WithPaymentToken(token string) PaymentOption { return func(c *PaymentConfig) { c.Token = token } }

// WithPaymentClock injects the server clock (see ManualClock).
func WithPaymentClock(now func() time.Time) PaymentOption {
	return func(c *PaymentConfig) { c.Now = now }
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

	seq     int
	charges []*Charge
	byID    map[string]*Charge
	keys    keyStore
}

// NewPaymentAPI starts a fake payment API for a test, closed with t.Cleanup.
func NewPaymentAPI(t Cleaner, opts ...PaymentOption) *PaymentAPI {
	return startFor(t, opts, NewPaymentAPIServer)
}

// NewPaymentAPIServer starts a fake payment API; the caller must Close it.
func NewPaymentAPIServer(cfg PaymentConfig) *PaymentAPI {
	cfg.Now = offsetClock(cfg.Now, 0)
	if cfg.KeyRetention <= 0 {
		cfg.KeyRetention = 24 * time.Hour
	}
	p := &PaymentAPI{cfg: cfg, byID: map[string]*Charge{}, keys: keyStore{}}
	p.start(cfg.Token, map[string]http.HandlerFunc{
		"POST /v1/charges": p.handleCreate, "GET /v1/charges": p.handleLookup,
		"GET /v1/charges/{id}": p.handleGet,
	})
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
func (p *PaymentAPI) Charges() int { return p.Effects() }

// ChargesForKey is the number of charges created by POSTs that carried
// Idempotency-Key key (more than one only when the key expired in between).
func (p *PaymentAPI) ChargesForKey(key string) int { return p.EffectsForKey(key) }

// ChargeList returns a copy of every charge, in creation order.
func (p *PaymentAPI) ChargeList() []Charge {
	p.mu.Lock()
	defer p.mu.Unlock()
	return cloneAll(p.charges, func(c Charge) Charge { return c })
}

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
	if msg := decodeStrict(raw, &body, "charge object"); msg != "" {
		return Charge{}, msg
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
// key already known is answered on w as the API does (nil).
func (p *PaymentAPI) claim(w http.ResponseWriter, r *http.Request, key, fp string, charge Charge) (*idemKey, Charge) {
	p.mu.Lock()
	now := p.cfg.Now()
	if k := p.keys.get(key, now, p.cfg.KeyRetention); k != nil {
		status, body, running, same := k.status, k.body, k.running, k.fingerprint == fp
		p.mu.Unlock()
		switch {
		case !same:
			paymentError(w, http.StatusUnprocessableEntity, "idempotency_error", "idempotency_key_reused",
				"this Idempotency-Key was used with a different request body")
		case running:
			paymentError(w, http.StatusConflict, "idempotency_error", "idempotency_key_in_use",
				"a request with this Idempotency-Key is still being processed; retry later")
		default:
			writeBody(w, status, body, true)
		}
		return nil, charge
	}
	k := &idemKey{fingerprint: fp, firstSeen: now, running: true}
	p.keys[key] = k
	p.seq++
	charge.ID = "ch_" + strconv.Itoa(p.seq)
	charge.Created = now.Unix()
	charge.IdempotencyKey = key
	charge.AttemptID = r.Header.Get("X-Settle-Attempt")
	stored := charge
	p.charges = append(p.charges, &stored)
	p.byID[stored.ID] = &stored
	p.effectLocked(key)
	p.mu.Unlock()
	return k, charge
}

func paymentError(w http.ResponseWriter, code int, typ, errCode, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]string{"type": typ, "code": errCode, "message": msg}})
}

// accept counts a request (in *n) and checks its bearer token, answering
// 401 when it is missing or wrong.
func (p *PaymentAPI) accept(w http.ResponseWriter, r *http.Request, n *int) bool {
	bump(&p.mu, n)
	if !p.authorized(r) {
		paymentError(w, http.StatusUnauthorized, "authentication_error", "unauthorized", "missing or invalid bearer token")
		return false
	}
	return true
}

func (p *PaymentAPI) handleCreate(w http.ResponseWriter, r *http.Request) {
	if !p.accept(w, r, &p.writes) {
		return
	}
	raw, readErr := readBody(w, r)
	f := p.popFault()
	if refusedBeforeCommit(w, f.Kind, f.Code, func(code int) {
		paymentError(w, code, "api_error", "injected", "injected failure: "+http.StatusText(code))
	}) {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	invalid := func(code, msg string) { paymentError(w, http.StatusBadRequest, "invalid_request_error", code, msg) }
	// Validation failures are not stored under the key (Stripe stores a
	// result only once the endpoint started executing).
	charge, msg := parseCharge(raw)
	fp, err := events.PayloadSHA256(raw)
	switch {
	case readErr != nil:
		invalid("bad_request", "cannot read the request body")
	case key == "":
		invalid("idempotency_key_required", "the Idempotency-Key header is required")
	case len(key) > 255:
		invalid("invalid_idempotency_key", "the Idempotency-Key header is longer than 255 bytes")
	case msg != "":
		invalid("invalid_request", msg)
	case err != nil:
		invalid("invalid_request", "the body cannot be canonicalised")
	default:
		p.create(w, r, f, key, fp, charge)
	}
}

// create claims the key, makes the charge and answers it under fault f.
func (p *PaymentAPI) create(w http.ResponseWriter, r *http.Request, f Fault, key, fp string, charge Charge) {
	k, charge := p.claim(w, r, key, fp, charge)
	if k == nil {
		return
	}
	body, _ := json.Marshal(charge)
	body = append(body, '\n')
	if f.Kind == FaultDelay && f.Duration > 0 {
		// Still in flight: the work goes on even when the client leaves.
		p.sleep(f.Duration, nil)
	}
	p.mu.Lock()
	k.running, k.status, k.body = false, http.StatusCreated, body
	p.mu.Unlock()
	if !droppedAfterCommit(w, f) {
		writeBody(w, http.StatusCreated, body, false)
	}
}

// handleLookup is the status lookup: GET /v1/charges?idempotency_key=K
// answers the latest charge created with key K, or 404. Charges remember
// their key, so the lookup outlives the key's retention.
func (p *PaymentAPI) handleLookup(w http.ResponseWriter, r *http.Request) {
	if !p.accept(w, r, &p.reads) {
		return
	}
	key := r.URL.Query().Get("idempotency_key")
	if key == "" {
		paymentError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", "idempotency_key is required")
		return
	}
	p.answerCharge(w, "no charge for this idempotency key", func() *Charge {
		for i := len(p.charges) - 1; i >= 0; i-- {
			if p.charges[i].IdempotencyKey == key {
				return p.charges[i]
			}
		}
		return nil
	})
}

func (p *PaymentAPI) handleGet(w http.ResponseWriter, r *http.Request) {
	if p.accept(w, r, &p.reads) {
		p.answerCharge(w, "no such charge", func() *Charge { return p.byID[r.PathValue("id")] })
	}
}

// answerCharge answers the charge find returns (called with p.mu held),
// or 404 with notFound.
func (p *PaymentAPI) answerCharge(w http.ResponseWriter, notFound string, find func() *Charge) {
	p.mu.Lock()
	c := find()
	var out Charge
	if c != nil {
		out = *c
	}
	p.mu.Unlock()
	if c == nil {
		paymentError(w, http.StatusNotFound, "invalid_request_error", "resource_missing", notFound)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
