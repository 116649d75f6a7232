package projector

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
)

// IntentView is one row of the intents view with its receipt.
type IntentView struct {
	IntentID       string    `json:"intent_id"`
	Tenant         string    `json:"tenant"`
	Route          string    `json:"route"`
	Account        string    `json:"account"`
	RequestID      string    `json:"request_id"`
	IdempotencyKey string    `json:"idempotency_key"`
	State          fsm.State `json:"state"`
	// Attempts is the number of WriteStarted events.
	Attempts      int         `json:"attempts"`
	ExternalID    string      `json:"external_id,omitempty"`
	LiveURL       string      `json:"live_url,omitempty"`
	LastEventType events.Type `json:"last_event_type"`
	LastEventAt   time.Time   `json:"last_event_at"`
	// Version is the intent's last applied event version; LastSeq its
	// stream sequence.
	Version      uint64              `json:"version"`
	LastSeq      uint64              `json:"last_seq"`
	NextCheckAt  time.Time           `json:"next_check_at,omitzero"`
	ManualReason events.ManualReason `json:"manual_reason,omitempty"`
	ManualOwner  string              `json:"manual_owner,omitempty"`
	Evidence     *events.Evidence    `json:"evidence,omitempty"`
	// Failure is the code of a definite TargetFailed.
	Failure string `json:"failure,omitempty"`
	// UnknownSince is when the intent's outcome became unknown, kept while
	// reconciliation goes on (reconciling, in_progress, verifying a found
	// candidate, back to unknown) and cleared when it leaves that cycle.
	UnknownSince  time.Time `json:"unknown_since,omitzero"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	PayloadSHA256 string    `json:"payload_sha256"`
	PlannedAt     time.Time `json:"planned_at"`
	// Receipt is the proven result (confirmed intents only). Its request id
	// and idempotency key are the intent's when the event left them empty.
	Receipt *events.Receipt `json:"receipt,omitempty"`
	// Held: the intent lost events in a log loss an operator accepted
	// (its hold marker is on the log) and has not been handed to a human
	// for it yet (fsm.LossHeld). It is a human's turn whatever its state
	// says: in the manual-action queue, counted as manual_action, never
	// as unknown.
	Held bool `json:"held,omitempty"`
}

// Quarantine is an event that was not applied.
type Quarantine struct {
	Seq      uint64 `json:"seq"`
	Subject  string `json:"subject"`
	IntentID string `json:"intent_id,omitempty"`
	Code     string `json:"code"`
	Reason   string `json:"reason"`
	Raw      []byte `json:"raw"`
}

// Filter selects intents for List. Zero fields match everything.
type Filter struct {
	// Tenant, when set, lists only that tenant's intents.
	Tenant  string
	State   fsm.State
	Route   string
	Account string
	// RequestID lists only the intents of this request id (any account
	// unless Account is set).
	RequestID string
	// Search lists only the intent whose id, or the intents whose request
	// id, is exactly this (search.go).
	Search string
	// From (inclusive) and To (exclusive) bound CreatedAt.
	From, To time.Time
	// Limit is the page size (default 100, at most MaxLimit).
	Limit int
	// After is the Next cursor of the previous page.
	After string
}

// MaxLimit bounds Filter.Limit and ManualQueue's limit.
const MaxLimit = 1000

// Page is one page of List, newest first (CreatedAt, then IntentID,
// descending). Next is the cursor of the following page, "" on the last.
type Page struct {
	Items []IntentView `json:"items"`
	Next  string       `json:"next,omitempty"`
}

// FoldView folds a history as the projector does and returns the view it
// would hold for the intent, LastSeq aside (the history carries no stream
// sequences): the audit's "projection equals fold" reference.
func FoldView(history []events.Event) (*IntentView, error) {
	if len(history) == 0 {
		return nil, ErrNotFound
	}
	i, err := fsm.Fold(history)
	if err != nil {
		return nil, err
	}
	v := ViewOf(i, 0)
	return &v, nil
}

// ViewOf maps a folded intent to its view, lastSeq being the stream
// sequence of its last event: what the projector holds for it, with no
// fold of its own (a reader that folded the intent once maps it here).
func ViewOf(i *fsm.Intent, lastSeq uint64) IntentView {
	rec := i.Recorded
	v := IntentView{
		IntentID: i.ID, Tenant: rec.Tenant, Route: rec.Route, Account: rec.Account, RequestID: rec.RequestID,
		IdempotencyKey: rec.IdempotencyKey, State: i.State, Attempts: len(i.Attempts),
		ExternalID: i.ExternalID, LiveURL: i.LiveURL, LastEventType: i.LastType, LastEventAt: i.UpdatedAt.UTC(),
		Version: i.Version, LastSeq: lastSeq, NextCheckAt: i.NextCheckAt.UTC(),
		ManualReason: i.ManualReason, ManualOwner: i.ManualOwner, Failure: i.Failure,
		UnknownSince: i.UnknownSince.UTC(), CreatedAt: i.CreatedAt.UTC(), UpdatedAt: i.UpdatedAt.UTC(),
		PayloadSHA256: rec.PayloadSHA256, PlannedAt: rec.PlannedAt.UTC(),
	}
	if i.Evidence != nil {
		ev := *i.Evidence
		v.Evidence = &ev
	}
	if i.Receipt != nil {
		r := *i.Receipt
		r.ReadbackAt = r.ReadbackAt.UTC()
		r.Checks = append([]events.Check(nil), r.Checks...)
		r.RequestID, r.IdempotencyKey = cmp.Or(r.RequestID, rec.RequestID), cmp.Or(r.IdempotencyKey, rec.IdempotencyKey)
		v.Receipt = &r
	}
	return v
}

const intentCols = `i.intent_id, i.tenant, i.route, i.account, i.request_id, i.idempotency_key, i.state,
	i.attempts, i.external_id, i.live_url, i.last_event_type, i.last_event_at, i.version, i.last_seq,
	i.next_check_at, i.manual_reason, i.manual_owner, i.evidence, i.failure, i.unknown_since,
	i.created_at, i.updated_at, i.payload_sha256, i.planned_at,
	i.receipt_source, i.receipt_external_id, i.receipt_live_url, i.receipt_payload_sha256, i.receipt_source,
	i.receipt_readback_at, i.receipt_checks, i.receipt_request_id, i.receipt_idempotency_key, i.receipt_attempt_id,
	(` + heldSQL + `)`

// heldSQL is true of an intent row i held after an accepted log loss: its
// hold marker is recorded (quarantine code held), it is not settled
// (confirmed), and no hand-off for the loss (ManualActionRequired,
// log_events_lost) is among its applied events — fsm.LossHeld over the
// views (HeldView is the same rule over a fold).
const heldSQL = `i.state != '` + string(fsm.Confirmed) + `' AND i.intent_id IN (SELECT q.intent_id FROM quarantine q WHERE q.code = '` + QuarantineHeld + `')
	AND NOT EXISTS (SELECT 1 FROM json_each(i.event_seqs) s JOIN events e ON e.seq = s.value
		WHERE e.type = 'ManualActionRequired' AND json_extract(CAST(e.raw AS TEXT), '$.data.reason') = '` + string(events.ReasonLogEventsLost) + `')`

// HeldView reports whether the view of an intent whose hold marker the
// log holds (marked) and whose applied events are history is held: the
// views' rule (IntentView.Held), for a reader that folds (the audit).
func HeldView(marked bool, state fsm.State, history []events.Event) bool {
	return state != fsm.Confirmed && fsm.LossHeld(marked, history)
}

// stateCond is the condition of a list by state: a held intent is listed
// as manual_action, not as the state its events left it in.
func stateCond(s fsm.State) string {
	if s == fsm.ManualAction {
		return "(i.state = ? OR (" + heldSQL + "))"
	}
	return "(i.state = ? AND NOT (" + heldSQL + "))"
}

// queryAll runs q on db and scans every row it returns.
func queryAll[T any](ctx context.Context, db *sql.DB, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

type scanner interface{ Scan(dest ...any) error }

func scanIntent(s scanner) (IntentView, error) {
	var (
		v                                         IntentView
		state, lastType                           string
		version, lastSeq                          int64
		lastAt, nextCheck, evidence, since        sql.NullString
		created, updated, planned                 sql.NullString
		rID, rExt, rURL, rSHA, rSrc, rAt, rChecks sql.NullString
		rReq, rKey, rAttempt                      sql.NullString
		held                                      bool
	)
	err := s.Scan(&v.IntentID, &v.Tenant, &v.Route, &v.Account, &v.RequestID, &v.IdempotencyKey, &state,
		&v.Attempts, &v.ExternalID, &v.LiveURL, &lastType, &lastAt, &version, &lastSeq,
		&nextCheck, &v.ManualReason, &v.ManualOwner, &evidence, &v.Failure, &since,
		&created, &updated, &v.PayloadSHA256, &planned,
		&rID, &rExt, &rURL, &rSHA, &rSrc, &rAt, &rChecks, &rReq, &rKey, &rAttempt, &held)
	if err != nil {
		return v, err
	}
	v.State, v.LastEventType, v.Held = fsm.State(state), events.Type(lastType), held
	v.Version, v.LastSeq = uint64(version), uint64(lastSeq)
	for _, t := range []struct {
		dst *time.Time
		src sql.NullString
	}{{&v.LastEventAt, lastAt}, {&v.NextCheckAt, nextCheck}, {&v.UnknownSince, since},
		{&v.CreatedAt, created}, {&v.UpdatedAt, updated}, {&v.PlannedAt, planned}} {
		if *t.dst, err = parseTime(t.src); err != nil {
			return v, errors.Errorf("intent %s: %w", v.IntentID, err)
		}
	}
	if evidence.Valid {
		v.Evidence = &events.Evidence{}
		if err := json.Unmarshal([]byte(evidence.String), v.Evidence); err != nil {
			return v, errors.Errorf("intent %s evidence: %w", v.IntentID, err)
		}
	}
	if rID.Valid {
		r := &events.Receipt{ExternalID: rExt.String, LiveURL: rURL.String, PayloadSHA256: rSHA.String,
			Source: events.Source(rSrc.String), RequestID: rReq.String, IdempotencyKey: rKey.String, AttemptID: rAttempt.String}
		if r.ReadbackAt, err = parseTime(rAt); err != nil {
			return v, errors.Errorf("receipt %s: %w", v.IntentID, err)
		}
		var checks []events.Check
		if err := json.Unmarshal([]byte(rChecks.String), &checks); err != nil {
			return v, errors.Errorf("receipt %s checks: %w", v.IntentID, err)
		}
		if len(checks) > 0 {
			r.Checks = checks
		}
		v.Receipt = r
	}
	return v, nil
}

func (p *Projector) queryIntents(ctx context.Context, where string, args ...any) ([]IntentView, error) {
	return queryAll(ctx, p.r, scanIntent, `SELECT `+intentCols+` FROM intents i `+where, args...)
}

func (p *Projector) one(ctx context.Context, what, where string, args ...any) (*IntentView, error) {
	vs, err := p.queryIntents(ctx, where, args...)
	if err != nil {
		return nil, errors.Errorf("%s: %w", what, err)
	}
	if len(vs) == 0 {
		return nil, errors.Errorf("%s: %w", what, ErrNotFound)
	}
	return &vs[0], nil
}

// Get returns an intent's view with its receipt and evidence.
func (p *Projector) Get(ctx context.Context, intentID string) (*IntentView, error) {
	return p.one(ctx, "get "+intentID, `WHERE i.intent_id = ?`, intentID)
}

// ByRequestID returns the intent a caller's request id maps to: request
// ids are scoped per tenant, route and account.
func (p *Projector) ByRequestID(ctx context.Context, tenant, route, account, requestID string) (*IntentView, error) {
	return p.one(ctx, fmt.Sprintf("by request id %s/%s/%q/%q", tenant, route, account, requestID),
		`WHERE i.tenant = ? AND i.route = ? AND i.account = ? AND i.request_id = ? ORDER BY i.created_at DESC LIMIT 1`,
		tenant, route, account, requestID)
}

// ByRequest returns the intents of a tenant's request id on route, of
// any account (request ids are scoped per account), newest first.
func (p *Projector) ByRequest(ctx context.Context, tenant, route, requestID string) ([]IntentView, error) {
	vs, err := p.queryIntents(ctx, `WHERE i.tenant = ? AND i.route = ? AND i.request_id = ? ORDER BY i.created_at DESC, i.intent_id DESC LIMIT 100`,
		tenant, route, requestID)
	if err != nil {
		return nil, errors.Errorf("by request %s/%s/%q: %w", tenant, route, requestID, err)
	}
	return vs, nil
}

// ByExternalID returns every intent whose last known external object is
// externalID (once confirmed, that is its receipt's), oldest first;
// ErrNotFound when none. More than one means two intents claim the same
// object: an audit finding.
func (p *Projector) ByExternalID(ctx context.Context, externalID string) ([]IntentView, error) {
	if externalID == "" {
		return nil, errors.Errorf("by external id: %w", ErrNotFound)
	}
	vs, err := p.queryIntents(ctx, `WHERE i.external_id = ? ORDER BY i.created_at, i.intent_id`, externalID)
	if err != nil {
		return nil, errors.Errorf("by external id %q: %w", externalID, err)
	}
	if len(vs) == 0 {
		return nil, errors.Errorf("by external id %q: %w", externalID, ErrNotFound)
	}
	return vs, nil
}

type cursor struct {
	CreatedAt string `json:"c"`
	IntentID  string `json:"i"`
}

func encodeCursor(v IntentView) string {
	b, _ := json.Marshal(cursor{CreatedAt: fmtTimeNN(v.CreatedAt), IntentID: v.IntentID})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err == nil {
		if _, perr := time.Parse(timeLayout, c.CreatedAt); perr != nil || c.IntentID == "" {
			err = errors.New("bad cursor fields")
		}
	}
	if err != nil {
		return c, errors.Errorf("list: After: %q is not a cursor from a previous page", s)
	}
	return c, nil
}

// List returns one page of intents matching f, newest first. Paging is
// stable: CreatedAt and IntentID never change, so a cursor resumes exactly
// after the last item it was made from, whatever was projected since.
func (p *Projector) List(ctx context.Context, f Filter) (Page, error) {
	if f.Limit < 0 || f.Limit > MaxLimit {
		return Page{}, errors.Errorf("list: Limit: %d is outside 0..%d", f.Limit, MaxLimit)
	}
	limit := cmp.Or(f.Limit, 100)
	var w sqlConds
	w.eq("i.tenant", f.Tenant)
	if f.State != "" {
		w.add(stateCond(f.State), string(f.State))
	}
	w.eq("i.route", f.Route)
	w.eq("i.account", f.Account)
	f.searchConds(&w)
	if !f.From.IsZero() {
		w.add("i.created_at >= ?", fmtTimeNN(f.From))
	}
	if !f.To.IsZero() {
		w.add("i.created_at < ?", fmtTimeNN(f.To))
	}
	if f.After != "" {
		c, err := decodeCursor(f.After)
		if err != nil {
			return Page{}, err
		}
		w.add("(i.created_at < ? OR (i.created_at = ? AND i.intent_id < ?))", c.CreatedAt, c.CreatedAt, c.IntentID)
	}
	where := ""
	if len(w.conds) > 0 {
		where = "WHERE " + strings.Join(w.conds, " AND ")
	}
	args := append(w.args, limit+1)
	vs, err := p.queryIntents(ctx, where+` ORDER BY i.created_at DESC, i.intent_id DESC LIMIT ?`, args...)
	if err != nil {
		return Page{}, errors.Errorf("list: %w", err)
	}
	pg := Page{Items: vs}
	if len(vs) > limit {
		pg.Items = vs[:limit]
		pg.Next = encodeCursor(vs[limit-1])
	}
	if pg.Items == nil {
		pg.Items = []IntentView{}
	}
	return pg, nil
}

// CountByState counts intents per state; every state but none is present.
func (p *Projector) CountByState(ctx context.Context) (map[fsm.State]int, error) {
	byRoute, err := p.CountByRouteState(ctx)
	if err != nil {
		return nil, err
	}
	out := ZeroStates()
	for _, states := range byRoute {
		for s, n := range states {
			out[s] += n
		}
	}
	return out, nil
}

// CountByRouteState counts intents per route and state: a route is
// present when it has intents, with every state but none. A held intent
// is counted as manual_action.
func (p *Projector) CountByRouteState(ctx context.Context) (map[string]map[fsm.State]int, error) {
	type count struct {
		route string
		state fsm.State
		held  bool
		n     int
	}
	counts, err := queryAll(ctx, p.r, func(s scanner) (c count, err error) {
		err = s.Scan(&c.route, &c.state, &c.held, &c.n)
		return
	}, `SELECT i.route, i.state, `+heldSQL+`, count(*) FROM intents i GROUP BY 1, 2, 3`)
	if err != nil {
		return nil, errors.Errorf("count by route and state: %w", err)
	}
	out := make(map[string]map[fsm.State]int)
	for _, c := range counts {
		if out[c.route] == nil {
			out[c.route] = ZeroStates()
		}
		if c.held {
			c.state = fsm.ManualAction
		}
		out[c.route][c.state] += c.n
	}
	return out, nil
}

// ZeroStates is a count of 0 for every state but none.
func ZeroStates() map[fsm.State]int {
	out := make(map[fsm.State]int)
	for _, s := range fsm.AllStates() {
		if s != fsm.None {
			out[s] = 0
		}
	}
	return out
}

// OldestUnknownAge is now minus the earliest UnknownSince of any intent
// still unsettled; false when no intent is.
func (p *Projector) OldestUnknownAge(ctx context.Context, now time.Time) (time.Duration, bool, error) {
	var s sql.NullString
	if err := p.r.QueryRowContext(ctx, `SELECT i.unknown_since FROM intents i WHERE i.unknown_since IS NOT NULL AND NOT (`+heldSQL+`) ORDER BY i.unknown_since LIMIT 1`).Scan(&s); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, false, errors.Errorf("oldest unknown: %w", err)
	}
	if !s.Valid {
		return 0, false, nil
	}
	t, err := parseTime(s)
	if err != nil {
		return 0, false, errors.Errorf("oldest unknown: %w", err)
	}
	return now.Sub(t), true, nil
}

// ManualQueue returns intents waiting for an operator, longest waiting
// first, each with its reason, owner and evidence (limit ≤ 0: 100).
func (p *Projector) ManualQueue(ctx context.Context, limit int) ([]IntentView, error) {
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, MaxLimit)
	vs, err := p.queryIntents(ctx, `WHERE `+stateCond(fsm.ManualAction)+` ORDER BY i.last_event_at, i.intent_id LIMIT ?`, string(fsm.ManualAction), limit)
	if err != nil {
		return nil, errors.Errorf("manual queue: %w", err)
	}
	if vs == nil {
		vs = []IntentView{}
	}
	return vs, nil
}

// Timeline returns an intent's applied events in version order.
func (p *Projector) Timeline(ctx context.Context, intentID string) ([]events.Event, error) {
	out, err := p.history(ctx, intentID)
	if err != nil {
		return nil, errors.Errorf("timeline %s: %w", intentID, err)
	}
	if len(out) == 0 {
		return nil, errors.Errorf("timeline %s: %w", intentID, ErrNotFound)
	}
	return out, nil
}

// Checkpoint returns the stream sequence the views are projected to.
func (p *Projector) Checkpoint(ctx context.Context) (uint64, error) {
	var seq int64
	if err := p.r.QueryRowContext(ctx, `SELECT seq FROM checkpoint WHERE id = 1`).Scan(&seq); err != nil {
		return 0, errors.Errorf("checkpoint: %w", err)
	}
	return uint64(seq), nil
}

// Quarantined lists every quarantined event in stream order.
func (p *Projector) Quarantined(ctx context.Context) ([]Quarantine, error) {
	qs, err := queryAll(ctx, p.r, func(s scanner) (q Quarantine, err error) {
		err = s.Scan(&q.Seq, &q.Subject, &q.IntentID, &q.Code, &q.Reason, &q.Raw)
		return
	}, `SELECT seq, subject, intent_id, code, reason, raw FROM quarantine ORDER BY seq`)
	if err != nil {
		return nil, errors.Errorf("quarantined: %w", err)
	}
	if qs == nil {
		qs = []Quarantine{}
	}
	return qs, nil
}

// Dump renders every view (checkpoint, intents, receipts, events,
// quarantine) as canonical text: one line per row, rows in key order,
// columns in schema order, values as JSON. Two databases projected from
// the same log dump identically, however they got there.
func (p *Projector) Dump(ctx context.Context) (string, error) {
	tx, err := p.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return "", errors.Errorf("dump: %w", err)
	}
	defer tx.Rollback()
	var sb strings.Builder
	for _, t := range dumpTables {
		if err := dumpTable(ctx, tx, &sb, t.name, t.order); err != nil {
			return "", errors.Errorf("dump %s: %w", t.name, err)
		}
	}
	return sb.String(), nil
}

func dumpTable(ctx context.Context, tx *sql.Tx, sb *strings.Builder, table, order string) error {
	rows, err := tx.QueryContext(ctx, `SELECT * FROM `+table+` ORDER BY `+order)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	fmt.Fprintf(sb, "# %s %s\n", table, strings.Join(cols, ","))
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				vals[i] = string(b)
			}
		}
		line, err := json.Marshal(vals)
		if err != nil {
			return err
		}
		sb.WriteString(table)
		sb.WriteByte(' ')
		sb.Write(line)
		sb.WriteByte('\n')
	}
	return rows.Err()
}
