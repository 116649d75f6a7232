package fakeapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/events"
)

// The fake booking API models a service that changes a booking: a
// PUT carries a business request id, an Idempotency-Key and the version the
// change was approved against; the service deduplicates by key for
// KeyRetention from the key's first receipt (key check and update are one
// atomic step), refuses a stale version with 409 instead of overwriting,
// may keep a change "processing" for a while, and answers a status query by
// request id that lags ReflectionDelay behind the truth.

// Booking change states, as the status query reports them.
const (
	BookingCompleted  = "completed"
	BookingProcessing = "processing"
	BookingFailed     = "failed"
)

// Booking is one booking as the fake stores and serves it. Numbers inside
// Data are json.Number.
type Booking struct {
	ID               string         `json:"booking_id"`
	Version          int            `json:"version"`
	Data             map[string]any `json:"data"`
	UpdatedByRequest string         `json:"updated_by_request"`
	UpdatedAt        time.Time      `json:"updated_at"`
}

func (b Booking) clone() Booking {
	b.Data = cloneJSONMap(b.Data)
	return b
}

// BookingRequest is what the fake knows of one change request (a test view;
// the status query serves a lagged subset of it).
type BookingRequest struct {
	// Account is the account the PUT named ("" when it named none): the
	// status query scoped by account finds only that account's requests.
	Account        string
	RequestID      string
	IdempotencyKey string
	AttemptID      string
	BookingID      string
	// State is completed, processing or failed.
	State string
	// ExpectedVersion is nil for an unconditional change.
	ExpectedVersion *int
	// AppliedVersion is the version the change produced (0 unless completed).
	AppliedVersion int
	Change         map[string]any
	// Code says why a change failed: version_conflict or change_failed.
	Code           string
	PartialEffects []string
	ReceivedAt     time.Time
	// FinishedAt is when the change completed or failed (zero while
	// processing).
	FinishedAt time.Time
	// External is true for changes made with ChangeBy (not effects).
	External bool
}

func (r BookingRequest) clone() BookingRequest {
	r.Change = cloneJSONMap(r.Change)
	r.PartialEffects = slices.Clone(r.PartialEffects)
	if r.ExpectedVersion != nil {
		v := *r.ExpectedVersion
		r.ExpectedVersion = &v
	}
	return r
}

// BookingConfig configures the fake booking API.
type BookingConfig struct {
	// Token is the bearer token every request must carry (401 without).
	// When empty a random token is generated; read it with BookingAPI.Token.
	Token string
	// Now is the server's clock. Default time.Now.
	Now func() time.Time
	// ReflectionDelay: the status query shows the state of every request
	// as it was ReflectionDelay ago, so a request received (or a change
	// completed) less than ReflectionDelay ago is not yet visible there.
	ReflectionDelay time.Duration
	// KeyRetention is how long an Idempotency-Key is remembered from its
	// first receipt (default 24h). Past it the key is forgotten and a
	// re-send is a new request.
	KeyRetention time.Duration
	// ProcessingFor is how long an accepted change stays "processing"
	// (answered 202) before it completes; 0 completes it at once.
	ProcessingFor time.Duration
}

// BookingOption changes a BookingConfig; any func(*BookingConfig) will do.
type BookingOption func(*BookingConfig)

// WithBookingToken sets the bearer token.
func WithBookingToken(token string) BookingOption { return func(c *BookingConfig) { c.Token = token } }

// WithBookingClock injects the server clock (see ManualClock).
func WithBookingClock(now func() time.Time) BookingOption {
	return func(c *BookingConfig) { c.Now = now }
}

// WithBookingReflectionDelay sets how far the status query lags.
func WithBookingReflectionDelay(d time.Duration) BookingOption {
	return func(c *BookingConfig) { c.ReflectionDelay = d }
}

// WithBookingKeyRetention sets the Idempotency-Key retention.
func WithBookingKeyRetention(d time.Duration) BookingOption {
	return func(c *BookingConfig) { c.KeyRetention = d }
}

// WithBookingProcessingFor keeps every accepted change processing for d.
func WithBookingProcessingFor(d time.Duration) BookingOption {
	return func(c *BookingConfig) { c.ProcessingFor = d }
}

// Booking-only fault kinds (the shared kinds are declared with Fault).
const (
	FaultFailDefinite FaultKind = 100 + iota
	FaultNeverComplete
	FaultHoldForLateArrival
)

// ChangeFault is a fault about what happens to a booking change, as opposed
// to the transport faults (CommitThenDrop, ResetBeforeCommit, Delay, Status)
// that both BookingAPI.Next and SocialAPI.Next accept.
type ChangeFault struct {
	Kind FaultKind
	// Code is the HTTP status a FaultFailDefinite change is answered with.
	Code int
	// Partial are the effects a FaultFailDefinite change leaves behind.
	Partial []string
	// Drop closes the connection without a response (after the change was
	// processed; at once for FaultHoldForLateArrival).
	Drop bool
}

// Dropped returns f with Drop set.
func (f ChangeFault) Dropped() ChangeFault { f.Drop = true; return f }

func (f ChangeFault) String() string {
	var s string
	switch f.Kind {
	case FaultFailDefinite:
		s = "fail_definite(" + strconv.Itoa(f.Code)
		if len(f.Partial) > 0 {
			s += ", partial=" + strings.Join(f.Partial, ",")
		}
		s += ")"
	case FaultNeverComplete:
		s = "never_complete"
	case FaultHoldForLateArrival:
		s = "hold_for_late_arrival"
	default:
		s = f.Kind.String()
	}
	if f.Drop {
		s += "+drop"
	}
	return s
}

// FailDefinite makes the next change fail definitively: the key is
// recorded, the booking is not changed, the request's state becomes failed
// with code "change_failed" and partial (may be nil) recorded as effects that
// exist despite the failure. The PUT is answered with code (400..599) and
// {"error":"change_failed","request_id","partial_effects"} - or 202 first
// when ProcessingFor > 0, the failure happening when processing ends.
func FailDefinite(code int, partial []string) ChangeFault {
	return ChangeFault{Kind: FaultFailDefinite, Code: code, Partial: slices.Clone(partial)}
}

// NeverComplete accepts the next change (202) and keeps it processing
// forever.
func NeverComplete() ChangeFault { return ChangeFault{Kind: FaultNeverComplete} }

// HoldForLateArrival accepts the next PUT on the wire but holds it before
// the service looks at it: no key is recorded, nothing is applied, until the
// test calls ReleaseHeld - an earlier attempt arriving late, after a retry.
// The client waits for an answer until ReleaseHeld (it then gets the
// outcome), until it gives up, or until Close; with Dropped the connection
// is closed at once. Either way the held request stays queued.
func HoldForLateArrival() ChangeFault { return ChangeFault{Kind: FaultHoldForLateArrival} }

// BookingFault is what BookingAPI.Next accepts: a Fault (CommitThenDrop,
// ResetBeforeCommit, Delay, Status) or a ChangeFault (FailDefinite,
// NeverComplete, HoldForLateArrival).
type BookingFault interface {
	bookingFault() bookingFaultSpec
}

type bookingFaultSpec struct {
	kind    FaultKind
	dur     time.Duration
	code    int
	partial []string
	drop    bool
	name    string
}

func (f Fault) bookingFault() bookingFaultSpec {
	return bookingFaultSpec{kind: f.Kind, dur: f.Duration, code: f.Code, drop: f.Drop, name: f.String()}
}

func (f ChangeFault) bookingFault() bookingFaultSpec {
	return bookingFaultSpec{kind: f.Kind, code: f.Code, partial: slices.Clone(f.Partial), drop: f.Drop, name: f.String()}
}

// bkChange is one received change request.
type bkChange struct {
	BookingRequest
	completeAt time.Time
	never      bool
	fail       bool // FailDefinite: fail when processing ends
	failStatus int  // HTTP status a failed change is answered with
}

// bkPut is a parsed, not yet processed PUT.
type bkPut struct {
	account     string
	bookingID   string
	key         string
	attemptID   string
	fingerprint string
	requestID   string
	expected    *int
	change      map[string]any
	fault       bookingFaultSpec
}

type bkReply struct {
	status int
	body   any
	replay bool
}

type bkHeld struct {
	put  bkPut
	done chan bkReply // buffered: ReleaseHeld never blocks on it
}

// BookingAPI is a fake booking API on a real HTTP server. It counts effects
// (changes applied through PUT) and fails on purpose (Next). All methods are
// safe for concurrent use. Every method and request first completes the
// processing changes that are due by the injected clock.
type BookingAPI struct {
	fakeServer[bookingFaultSpec]
	cfg BookingConfig

	bookings   map[string]*Booking
	keys       keyStore
	requests   map[string][]*bkChange // request id -> changes, in arrival order
	pending    []*bkChange            // processing, in arrival order
	effectsReq map[string]int
	held       []*bkHeld
}

// NewBookingAPI starts a fake booking API for a test, closed with t.Cleanup.
func NewBookingAPI(t Cleaner, opts ...BookingOption) *BookingAPI {
	return startFor(t, opts, NewBookingAPIServer)
}

// NewBookingAPIServer starts a fake booking API; the caller must Close it.
func NewBookingAPIServer(cfg BookingConfig) *BookingAPI {
	cfg.Now = offsetClock(cfg.Now, 0)
	if cfg.KeyRetention <= 0 {
		cfg.KeyRetention = 24 * time.Hour
	}
	b := &BookingAPI{cfg: cfg, bookings: map[string]*Booking{}, keys: keyStore{},
		requests: map[string][]*bkChange{}, effectsReq: map[string]int{}}
	b.start(cfg.Token, map[string]http.HandlerFunc{
		"PUT /v1/bookings/{id}": b.handlePut, "GET /v1/bookings/{id}": b.handleGet,
		"GET /v1/requests/{request_id}": b.handleStatus,
	})
	return b
}

// NextFor queues faults that only the PUTs of intentID consume (by their
// X-Settle-Attempt header), in order, before any fault queued with Next.
// It panics like Next.
func (b *BookingAPI) NextFor(intentID string, faults ...BookingFault) {
	b.queueFaultsFor(intentID, checkBookingFaults(faults)...)
}

// Next queues faults; each authenticated PUT consumes one, in order. It
// panics on a fault kind the booking API does not implement, or on a
// FailDefinite code outside 400..599.
func (b *BookingAPI) Next(faults ...BookingFault) {
	b.queueFaults(checkBookingFaults(faults)...)
}

func checkBookingFaults(faults []BookingFault) []bookingFaultSpec {
	specs := make([]bookingFaultSpec, 0, len(faults))
	for _, f := range faults {
		s := f.bookingFault()
		switch s.kind {
		case FaultNone, FaultCommitThenDrop, FaultResetBeforeCommit, FaultDelay, FaultStatus,
			FaultNeverComplete, FaultHoldForLateArrival:
		case FaultFailDefinite:
			if s.code < 400 || s.code > 599 {
				panic("fakeapi: FailDefinite code must be 400..599, got " + strconv.Itoa(s.code))
			}
		default:
			panic("fakeapi: the booking API does not implement fault " + s.name)
		}
		specs = append(specs, s)
	}
	return specs
}

// Seed creates or replaces a booking at version (not an effect).
func (b *BookingAPI) Seed(bookingID string, version int, data map[string]any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(b.cfg.Now())
	b.bookings[bookingID] = &Booking{
		ID:        bookingID,
		Version:   version,
		Data:      cloneJSONMap(data),
		UpdatedAt: b.cfg.Now().UTC(),
	}
}

// ChangeBy makes someone else change a booking: change is merged into its
// data (a null value deletes the field), its version goes up by one and
// updated_by_request becomes requestID. It is not an effect. The change is
// recorded under requestID (unless empty) for the status query. It returns
// the new version and panics when the booking does not exist.
func (b *BookingAPI) ChangeBy(bookingID, requestID string, change map[string]any) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Now().UTC()
	b.advanceLocked(now)
	bk := b.bookings[bookingID]
	if bk == nil {
		panic("fakeapi: ChangeBy: no booking " + strconv.Quote(bookingID))
	}
	ch := cloneJSONMap(change)
	mergeChange(bk, ch)
	bk.Version++
	bk.UpdatedByRequest = requestID
	bk.UpdatedAt = now
	if requestID != "" {
		b.requests[requestID] = append(b.requests[requestID], &bkChange{BookingRequest: BookingRequest{
			RequestID: requestID, BookingID: bookingID, State: BookingCompleted, AppliedVersion: bk.Version,
			Change: ch, ReceivedAt: now, FinishedAt: now, External: true,
		}})
	}
	return bk.Version
}

// Booking returns a copy of a booking.
func (b *BookingAPI) Booking(id string) (Booking, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(b.cfg.Now())
	bk, ok := b.bookings[id]
	if !ok {
		return Booking{}, false
	}
	return bk.clone(), true
}

// Request returns the truth (not the lagged status view) about a request
// id: its latest completed change, else its latest processing one, else
// its latest failed one.
func (b *BookingAPI) Request(requestID string) (BookingRequest, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(b.cfg.Now())
	c := pickChange(b.requests[requestID], func(c *bkChange) (string, bool) { return c.State, true })
	if c == nil {
		return BookingRequest{}, false
	}
	return c.BookingRequest.clone(), true
}

// Requests returns the truth about every change recorded under a request
// id (of any account, ChangeBy's included), in the order received.
func (b *BookingAPI) Requests(requestID string) []BookingRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(b.cfg.Now())
	out := make([]BookingRequest, 0, len(b.requests[requestID]))
	for _, c := range b.requests[requestID] {
		out = append(out, c.BookingRequest.clone())
	}
	return out
}

// Effects is the number of changes applied through PUT (ChangeBy and Seed
// are not effects; a failed change is not one, whatever its partial
// effects).
func (b *BookingAPI) Effects() int { return b.EffectsForRequest("") }

// EffectsForRequest is the number of changes applied through PUT that
// carried request_id requestID ("": any).
func (b *BookingAPI) EffectsForRequest(requestID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(b.cfg.Now())
	if requestID == "" {
		return b.effects
	}
	return b.effectsReq[requestID]
}

// ReleaseHeld lets every held PUT reach the service now, in arrival order,
// as if it had just arrived (same key rules, version check and effects as
// any PUT). A client still waiting gets the outcome. It returns how many
// were released; their effects are visible when it returns.
func (b *BookingAPI) ReleaseHeld() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	held := b.held
	b.held = nil
	now := b.cfg.Now().UTC()
	for _, h := range held {
		h.done <- b.processLocked(h.put, now)
	}
	return len(held)
}

// --- state ---

// advanceLocked completes or fails the processing changes due by now, in
// arrival order, each at its own due time.
func (b *BookingAPI) advanceLocked(now time.Time) {
	keep := b.pending[:0]
	for _, c := range b.pending {
		if !c.never && !now.Before(c.completeAt) {
			b.finishLocked(c, c.completeAt)
			continue
		}
		keep = append(keep, c)
	}
	clear(b.pending[len(keep):])
	b.pending = keep
}

// finishLocked ends a change at time at: it fails (FailDefinite, or a
// version that moved meanwhile) or is applied.
func (b *BookingAPI) finishLocked(c *bkChange, at time.Time) {
	c.FinishedAt = at
	if c.fail {
		c.State, c.Code = BookingFailed, "change_failed"
		return
	}
	bk := b.bookings[c.BookingID]
	if c.ExpectedVersion != nil && *c.ExpectedVersion != bk.Version {
		c.State, c.Code, c.failStatus = BookingFailed, "version_conflict", http.StatusConflict
		return
	}
	mergeChange(bk, cloneJSONMap(c.Change))
	bk.Version++
	bk.UpdatedByRequest = c.RequestID
	bk.UpdatedAt = at
	c.State = BookingCompleted
	c.AppliedVersion = bk.Version
	b.effectLocked("")
	b.effectsReq[c.RequestID]++
}

// processLocked is the service's handling of one PUT: key check and update
// are one atomic step.
func (b *BookingAPI) processLocked(p bkPut, now time.Time) bkReply {
	b.advanceLocked(now)
	if k := b.keys.get(p.key, now, b.cfg.KeyRetention); k != nil {
		if k.fingerprint != p.fingerprint {
			return bkReply{status: http.StatusUnprocessableEntity, body: map[string]any{
				"error": "idempotency_key_reused", "message": "this Idempotency-Key was used with a different request"}}
		}
		r := b.replyLocked(k.change)
		r.replay = true
		return r
	}
	bk := b.bookings[p.bookingID]
	if bk == nil {
		return bkReply{status: http.StatusNotFound, body: map[string]any{"error": "booking_not_found", "message": "no such booking"}}
	}
	c := &bkChange{BookingRequest: BookingRequest{
		Account: p.account, RequestID: p.requestID, IdempotencyKey: p.key, AttemptID: p.attemptID, BookingID: p.bookingID,
		ExpectedVersion: p.expected, Change: p.change, ReceivedAt: now,
	}}
	b.keys[p.key] = &idemKey{fingerprint: p.fingerprint, firstSeen: now, change: c}
	b.requests[p.requestID] = append(b.requests[p.requestID], c)
	if p.expected != nil && *p.expected != bk.Version {
		c.State, c.Code, c.failStatus, c.FinishedAt = BookingFailed, "version_conflict", http.StatusConflict, now
		return b.replyLocked(c)
	}
	switch p.fault.kind {
	case FaultFailDefinite:
		c.fail, c.failStatus = true, p.fault.code
		c.PartialEffects = slices.Clone(p.fault.partial)
	case FaultNeverComplete:
		c.never = true
	}
	if c.never || b.cfg.ProcessingFor > 0 {
		c.State = BookingProcessing
		c.completeAt = now.Add(b.cfg.ProcessingFor)
		b.pending = append(b.pending, c)
	} else {
		b.finishLocked(c, now)
	}
	return b.replyLocked(c)
}

// replyLocked is the answer to a change in its current state (also what a
// replay with the same key gets).
func (b *BookingAPI) replyLocked(c *bkChange) bkReply {
	switch c.State {
	case BookingProcessing:
		return bkReply{status: http.StatusAccepted, body: map[string]any{
			"booking_id": c.BookingID, "request_id": c.RequestID, "status": BookingProcessing}}
	case BookingCompleted:
		return bkReply{status: http.StatusOK, body: map[string]any{
			"booking_id": c.BookingID, "version": c.AppliedVersion, "request_id": c.RequestID, "status": BookingCompleted}}
	}
	if c.Code == "version_conflict" {
		return bkReply{status: http.StatusConflict, body: map[string]any{
			"error": "version_conflict", "current_version": b.bookings[c.BookingID].Version, "request_id": c.RequestID}}
	}
	partial := slices.Clone(c.PartialEffects)
	if partial == nil {
		partial = []string{}
	}
	return bkReply{status: c.failStatus, body: map[string]any{
		"error": "change_failed", "request_id": c.RequestID, "partial_effects": partial}}
}

// pickChange chooses among a request id's changes: the latest completed,
// else the latest processing, else the latest failed. view gives a change's
// state as seen (false: not visible).
func pickChange(cs []*bkChange, view func(*bkChange) (string, bool)) *bkChange {
	rank := map[string]int{BookingCompleted: 3, BookingProcessing: 2, BookingFailed: 1}
	var best *bkChange
	bestRank := 0
	for _, c := range cs {
		st, ok := view(c)
		if !ok {
			continue
		}
		if r := rank[st]; r >= bestRank && r > 0 {
			best, bestRank = c, r
		}
	}
	return best
}

// mergeChange applies a change to a booking's data: each top-level field is
// set, a null deletes it.
func mergeChange(bk *Booking, change map[string]any) {
	if bk.Data == nil {
		bk.Data = map[string]any{}
	}
	for k, v := range change {
		if v == nil {
			delete(bk.Data, k)
			continue
		}
		bk.Data[k] = v
	}
}

// cloneJSONMap deep-copies m through JSON (numbers become json.Number). It
// panics on a value JSON cannot represent (a test bug).
func cloneJSONMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		panic("fakeapi: value is not JSON: " + err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		panic("fakeapi: value is not JSON: " + err.Error())
	}
	return out
}

// --- HTTP ---

type bookingPutBody struct {
	Account         string         `json:"account"`
	RequestID       *string        `json:"request_id"`
	ExpectedVersion *json.Number   `json:"expected_version"`
	Change          map[string]any `json:"change"`
}

// parseBookingPut validates a PUT body. The message is a fixed text that
// echoes nothing from the request.
func parseBookingPut(raw []byte) (bkPut, string) {
	var body bookingPutBody
	if msg := decodeStrict(raw, &body, "change request"); msg != "" {
		return bkPut{}, msg
	}
	if body.RequestID == nil || *body.RequestID == "" {
		return bkPut{}, "request_id is required"
	}
	if body.Change == nil {
		return bkPut{}, "change must be a JSON object"
	}
	p := bkPut{account: body.Account, requestID: *body.RequestID, change: body.Change}
	if body.ExpectedVersion != nil {
		v, err := strconv.Atoi(body.ExpectedVersion.String())
		if err != nil || v < 0 {
			return bkPut{}, "expected_version must be a non-negative integer"
		}
		p.expected = &v
	}
	return p, ""
}

// bookingFingerprint binds a key to the booking and the canonical body, so
// that the same key on another booking or with another body is refused.
func bookingFingerprint(bookingID string, raw []byte) (string, bool) {
	c, err := events.Canonicalize(raw)
	if err != nil {
		return "", false
	}
	h := sha256.New()
	h.Write([]byte(bookingID))
	h.Write([]byte{0})
	h.Write(c)
	return hex.EncodeToString(h.Sum(nil)), true
}

func bookingError(w http.ResponseWriter, code int, errCode, msg string) {
	writeJSON(w, code, map[string]any{"error": errCode, "message": msg})
}

func (b *BookingAPI) writeReply(w http.ResponseWriter, r bkReply) {
	if r.replay {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, r.status, r.body)
}

func (b *BookingAPI) handlePut(w http.ResponseWriter, r *http.Request) {
	if !b.accept(w, r, &b.writes) {
		return
	}
	raw, readErr := readBody(w, r)
	f := b.popFaultFor(r)
	if refusedBeforeCommit(w, f.kind, f.code, func(code int) {
		bookingError(w, code, "injected", "injected failure: "+http.StatusText(code))
	}) {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	p, msg := parseBookingPut(raw)
	fp, ok := bookingFingerprint(r.PathValue("id"), raw)
	invalid := func(code, msg string) { bookingError(w, http.StatusBadRequest, code, msg) }
	switch {
	case readErr != nil:
		invalid("bad_request", "cannot read the request body")
	case key == "":
		invalid("idempotency_key_required", "the Idempotency-Key header is required")
	case len(key) > 255:
		invalid("invalid_idempotency_key", "the Idempotency-Key header is longer than 255 bytes")
	case msg != "":
		invalid("invalid_request", msg)
	case !ok:
		invalid("invalid_request", "the body cannot be canonicalised")
	default:
		p.bookingID, p.key, p.fingerprint, p.fault = r.PathValue("id"), key, fp, f
		p.attemptID = r.Header.Get("X-Settle-Attempt")
		b.put(w, r, p)
	}
}

// put hands a valid PUT to the service under its fault and answers it.
func (b *BookingAPI) put(w http.ResponseWriter, r *http.Request, p bkPut) {
	f := p.fault
	if f.kind == FaultHoldForLateArrival {
		h := &bkHeld{put: p, done: make(chan bkReply, 1)}
		b.mu.Lock()
		b.held = append(b.held, h)
		b.mu.Unlock()
		if f.drop {
			dropConn(w)
			return
		}
		select {
		case rep := <-h.done:
			b.writeReply(w, rep)
		case <-r.Context().Done():
		case <-b.closed:
		}
		return
	}

	b.mu.Lock()
	rep := b.processLocked(p, b.cfg.Now().UTC())
	b.mu.Unlock()

	if f.kind == FaultDelay && f.dur > 0 {
		b.sleep(f.dur, r.Context().Done())
	}
	if f.kind == FaultCommitThenDrop || f.drop {
		dropConn(w)
		return
	}
	b.writeReply(w, rep)
}

// accept counts a request (in *n) and checks its bearer token, answering
// 401 when it is missing or wrong.
func (b *BookingAPI) accept(w http.ResponseWriter, r *http.Request, n *int) bool {
	bump(&b.mu, n)
	if !b.authorized(r) {
		bookingError(w, http.StatusUnauthorized, "unauthorized", "missing or invalid bearer token")
		return false
	}
	return true
}

func (b *BookingAPI) handleGet(w http.ResponseWriter, r *http.Request) {
	if !b.accept(w, r, &b.reads) {
		return
	}
	b.mu.Lock()
	b.advanceLocked(b.cfg.Now())
	bk, ok := b.bookings[r.PathValue("id")]
	var out Booking
	if ok {
		out = bk.clone()
	}
	b.mu.Unlock()
	if !ok {
		bookingError(w, http.StatusNotFound, "booking_not_found", "no such booking")
		return
	}
	if out.Data == nil {
		out.Data = map[string]any{}
	}
	writeJSON(w, http.StatusOK, out)
}

// bookingStatusJSON is the status query's answer.
type bookingStatusJSON struct {
	Account         string         `json:"account,omitempty"`
	RequestID       string         `json:"request_id"`
	State           string         `json:"state"`
	BookingID       string         `json:"booking_id"`
	ExpectedVersion *int           `json:"expected_version,omitempty"`
	AppliedVersion  int            `json:"applied_version,omitempty"`
	CurrentVersion  int            `json:"current_version"`
	Change          map[string]any `json:"change"`
	Code            string         `json:"code,omitempty"`
	PartialEffects  []string       `json:"partial_effects"`
	ReceivedAt      time.Time      `json:"received_at"`
}

// handleStatus answers the status query by request id with the state as of
// now-ReflectionDelay: a request received later is unknown (404), a change
// that ended later is still processing. With ?account= only that
// account's requests are looked at (request ids are the callers', and
// two accounts may use one); without it, every account's.
func (b *BookingAPI) handleStatus(w http.ResponseWriter, r *http.Request) {
	if !b.accept(w, r, &b.reads) {
		return
	}
	b.mu.Lock()
	now := b.cfg.Now()
	b.advanceLocked(now)
	asOf := now.Add(-b.cfg.ReflectionDelay)
	view := func(c *bkChange) (string, bool) {
		if c.ReceivedAt.After(asOf) {
			return "", false
		}
		if c.State != BookingProcessing && c.FinishedAt.After(asOf) {
			return BookingProcessing, true
		}
		return c.State, true
	}
	account, scoped := r.URL.Query()["account"]
	cs := b.requests[r.PathValue("request_id")]
	if scoped {
		var mine []*bkChange
		for _, c := range cs {
			if c.Account == account[0] {
				mine = append(mine, c)
			}
		}
		cs = mine
	}
	c := pickChange(cs, view)
	var out bookingStatusJSON
	if c != nil {
		st, _ := view(c)
		rq := c.BookingRequest.clone()
		out = bookingStatusJSON{
			Account: rq.Account, RequestID: rq.RequestID, State: st, BookingID: rq.BookingID, ExpectedVersion: rq.ExpectedVersion,
			CurrentVersion: b.bookings[rq.BookingID].Version, Change: rq.Change, PartialEffects: []string{},
			ReceivedAt: rq.ReceivedAt,
		}
		if st != BookingProcessing {
			out.AppliedVersion, out.Code = rq.AppliedVersion, rq.Code
			if rq.PartialEffects != nil {
				out.PartialEffects = rq.PartialEffects
			}
		}
	}
	b.mu.Unlock()
	if c == nil {
		bookingError(w, http.StatusNotFound, "request_not_found", "no such request (or not reflected yet)")
		return
	}
	writeJSON(w, http.StatusOK, out)
}
