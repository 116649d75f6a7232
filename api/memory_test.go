package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
	"github.com/settle-dev/settle/service"
	"github.com/settle-dev/settle/testharness"
)

// memIntents is an intent store in memory, for the tests of the API's
// HTTP semantics (authentication, problems, limits, query checks), which
// need no NATS. It keeps real histories folded by the real fsm: a submit
// is validated with events' validators (each refusal a FieldError, as
// Execute's), recorded, and moved by fsm.Decider's write-path steps that
// make no call (an approval request, an abandonment on expiry); it never
// writes anywhere, so an automatic route's intent stays recorded. The
// API's behaviour over the real producer and log is tested with NATS.
type memIntents struct {
	mu     sync.Mutex
	now    func() time.Time
	routes map[string]events.Policy
	hist   map[string]*ledger.History
	seq    uint64
}

var _ service.Intents = (*memIntents)(nil)

func newMemIntents(now func() time.Time) *memIntents {
	auto := events.Policy{FirstWrite: events.PolicyAuto, Retry: events.PolicyNever, AttemptDeadline: events.Duration(time.Minute),
		SearchBefore: events.Duration(5 * time.Minute), SearchAfter: events.Duration(30 * time.Minute), ClockSkew: events.Duration(time.Second)}
	approval := auto
	approval.FirstWrite = events.PolicyApproval
	return &memIntents{now: now, hist: map[string]*ledger.History{},
		routes: map[string]events.Policy{"social_post": auto, "social_other": auto, "social_approval": approval}}
}

func (m *memIntents) RouteNames() []string {
	var out []string
	for r := range m.routes {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

func invalidReq(err error) error { return fmt.Errorf("%w: %w", producer.ErrInvalidRequest, err) }

func (m *memIntents) Execute(ctx context.Context, req producer.Request) (*producer.Result, error) {
	if err := events.ValidateToken("route", req.Route); err != nil {
		return nil, invalidReq(err)
	}
	pol, ok := m.routes[req.Route]
	if !ok {
		return nil, fmt.Errorf("%w: %q", producer.ErrUnknownRoute, req.Route)
	}
	for field, v := range map[string]string{"account": req.Account, "request_id": req.RequestID} {
		if err := events.ValidateFreeform(field, v); err != nil {
			return nil, invalidReq(err)
		}
	}
	if len(req.Payload) == 0 {
		return nil, invalidReq(&events.FieldError{Field: "payload", Reason: "is required"})
	}
	canon, err := events.Canonicalize(req.Payload)
	if err != nil {
		return nil, invalidReq(&events.FieldError{Field: "payload", Reason: err.Error()})
	}
	sum, err := events.PayloadSHA256(canon)
	if err != nil {
		return nil, invalidReq(&events.FieldError{Field: "payload", Reason: err.Error()})
	}
	id := events.ScopedIntentID(req.Tenant, req.Route, req.Account, req.RequestID)
	now := m.now().UTC()
	rec := events.New(id, 1, now, "mem", "", &events.IntentRecordedData{Tenant: req.Tenant, Route: req.Route,
		Account: req.Account, RequestID: req.RequestID, IdempotencyKey: events.IdempotencyKey(id), Payload: canon,
		PayloadSHA256: sum, Canon: events.CanonV1, PlannedAt: now, ExpiresAt: req.ExpiresAt.UTC(), Policy: pol})
	if err := rec.Validate(); err != nil {
		return nil, invalidReq(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.hist[id]; ok {
		i, err := h.Fold()
		if err != nil {
			return nil, err
		}
		if i.Recorded.PayloadSHA256 != sum {
			return nil, producer.ErrPayloadMismatch
		}
		if req.DryRun {
			return &producer.Result{IntentID: id, Route: req.Route, DryRun: &producer.DryRunReport{IntentID: id,
				Subject: events.Subject(req.Route, id), ExistingState: i.State, Reason: "already recorded"}}, nil
		}
		return &producer.Result{IntentID: id, Route: req.Route, State: i.State, Intent: i, History: h.Events, LastSeq: h.LastSeq, Replayed: true}, nil
	}
	if req.DryRun {
		return &producer.Result{IntentID: id, Route: req.Route, DryRun: &producer.DryRunReport{IntentID: id,
			Subject: events.Subject(req.Route, id), WouldAppend: []events.Type{events.IntentRecorded}, Reason: "new intent"}}, nil
	}
	h := &ledger.History{Route: req.Route}
	i := &fsm.Intent{State: fsm.None}
	if err := m.append(h, i, rec); err != nil {
		return nil, err
	}
	dec := fsm.DefaultDecider("mem")
	dec.RecordedGrace = 0
	for k := 0; k < 4; k++ {
		step := dec.Next(i, i.Caps(), now)
		if !step.WritePath || step.Kind == fsm.StepWrite || step.Event == nil {
			break
		}
		if err := m.append(h, i, events.New(id, i.Version+1, now, "mem", step.AttemptID, step.Event)); err != nil {
			return nil, err
		}
	}
	m.hist[id] = h
	return &producer.Result{IntentID: id, Route: req.Route, State: i.State, Intent: i, History: h.Events, LastSeq: h.LastSeq}, nil
}

// append folds e into i and adds it to h (the caller holds mu).
func (m *memIntents) append(h *ledger.History, i *fsm.Intent, e events.Event) error {
	if err := i.Apply(e); err != nil {
		return err
	}
	m.seq++
	h.Events = append(h.Events, e)
	h.LastSeq = m.seq
	return nil
}

// ToolRequestID derives a tool call's request id as the producer does
// (the payload in canon/v1: these routes have no normaliser).
func (m *memIntents) ToolRequestID(c producer.ToolCall) (string, error) {
	if c.Task == "" || c.Step == "" {
		return "", producer.ErrNoKey
	}
	sum := ""
	if c.KeyIncludesPayload {
		s, err := events.PayloadSHA256(c.Payload)
		if err != nil {
			return "", invalidReq(&events.FieldError{Field: "payload", Reason: err.Error()})
		}
		sum = s
	}
	return events.ToolKey(c.Task, c.Step, sum), nil
}

func (m *memIntents) Load(ctx context.Context, id string) (*ledger.History, *fsm.Intent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.hist[id]
	if !ok {
		return nil, nil, fmt.Errorf("load %s: %w", id, ledger.ErrNotFound)
	}
	c := &ledger.History{Route: h.Route, Events: slices.Clone(h.Events), LastSeq: h.LastSeq}
	i, err := c.Fold()
	return c, i, err
}

// operate appends d to the intent as the caller loaded it, like the
// producer: refused when the fsm forbids it, a conflict when the intent
// moved since.
func (m *memIntents) operate(h *ledger.History, i *fsm.Intent, d events.Data) error {
	if err := d.Validate(); err != nil {
		return invalidReq(err)
	}
	if !i.Can(d.EventType()) {
		return fmt.Errorf("%w: %s in state %s", producer.ErrNotAllowed, d.EventType(), i.State)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	stored := m.hist[i.ID]
	if stored == nil || stored.LastSeq != h.LastSeq {
		return ledger.ErrConflict
	}
	next := i.Clone()
	e := events.New(i.ID, i.Version+1, m.now().UTC(), "mem", "", d)
	if err := next.Apply(e); err != nil {
		return fmt.Errorf("%w: %w", producer.ErrNotAllowed, err)
	}
	m.seq++
	stored.Events = append(stored.Events, e)
	stored.LastSeq = m.seq
	h.Events, h.LastSeq = append(h.Events, e), m.seq
	*i = *next
	return nil
}

func (m *memIntents) Approve(ctx context.Context, h *ledger.History, i *fsm.Intent, operator, reason string) error {
	return m.operate(h, i, &events.ApprovedData{Operator: operator, Reason: reason})
}

func (m *memIntents) Abandon(ctx context.Context, h *ledger.History, i *fsm.Intent, by, reason string) error {
	return m.operate(h, i, &events.AbandonedData{By: by, Reason: reason})
}

func (m *memIntents) ResolveConfirmed(ctx context.Context, h *ledger.History, i *fsm.Intent, operator, reason, externalID, liveURL string) error {
	return m.operate(h, i, &events.OperatorConfirmedData{Operator: operator, Reason: reason, Receipt: events.Receipt{
		ExternalID: externalID, LiveURL: liveURL, PayloadSHA256: i.Recorded.PayloadSHA256, Source: "operator"}})
}

func (m *memIntents) ResolveReleased(ctx context.Context, h *ledger.History, i *fsm.Intent, operator, reason string) error {
	return m.operate(h, i, &events.OperatorReleasedData{Operator: operator, Reason: reason})
}

// events counts every event recorded (a refused request records none).
func (m *memIntents) events() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, h := range m.hist {
		n += len(h.Events)
	}
	return n
}

// views is the projection of the store: every intent's view, folded now.
func (m *memIntents) views() []projector.IntentView {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []projector.IntentView
	for _, h := range m.hist {
		if i, err := h.Fold(); err == nil {
			out = append(out, projector.ViewOf(i, h.LastSeq))
		}
	}
	slices.SortFunc(out, func(a, b projector.IntentView) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return compareStrings(b.IntentID, a.IntentID)
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// memViews serves the views of a memIntents (one page, no cursor).
type memViews struct{ m *memIntents }

var _ service.Views = memViews{}

func (v memViews) List(ctx context.Context, f projector.Filter) (projector.Page, error) {
	if f.After != "" {
		return projector.Page{}, errors.New("list: After: not a cursor of this store")
	}
	pg := projector.Page{Items: []projector.IntentView{}}
	for _, x := range v.m.views() {
		if f.Matches(x) {
			pg.Items = append(pg.Items, x)
		}
	}
	return pg, nil
}

func (v memViews) ByRequest(ctx context.Context, tenant, route, requestID string) ([]projector.IntentView, error) {
	var out []projector.IntentView
	for _, x := range v.m.views() {
		if x.Tenant == tenant && x.Route == route && x.RequestID == requestID {
			out = append(out, x)
		}
	}
	return out, nil
}

func (v memViews) CatchUp(ctx context.Context) error { return nil }

func (v memViews) Flow(ctx context.Context, f projector.FlowFilter) (*projector.Flow, error) {
	return &projector.Flow{From: f.From, To: f.To, Routes: []projector.RouteFlow{}}, nil
}

func (v memViews) CountByState(ctx context.Context) (map[fsm.State]int, error) {
	out := map[fsm.State]int{}
	for _, x := range v.m.views() {
		out[x.State]++
	}
	return out, nil
}

func (v memViews) CountByRouteState(ctx context.Context) (map[string]map[fsm.State]int, error) {
	out := map[string]map[fsm.State]int{}
	for _, x := range v.m.views() {
		if out[x.Route] == nil {
			out[x.Route] = map[fsm.State]int{}
		}
		out[x.Route][x.State]++
	}
	return out, nil
}

func (v memViews) OldestUnknownAge(ctx context.Context, now time.Time) (time.Duration, bool, error) {
	var oldest time.Time
	for _, x := range v.m.views() {
		if !x.UnknownSince.IsZero() && (oldest.IsZero() || x.UnknownSince.Before(oldest)) {
			oldest = x.UnknownSince
		}
	}
	return now.Sub(oldest), !oldest.IsZero(), nil
}

func (v memViews) Checkpoint(ctx context.Context) (uint64, error) {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	return v.m.seq, nil
}

// memLog answers /readyz as a connected log with its stream.
type memLog struct{}

func (memLog) Connected() bool                       { return true }
func (memLog) CheckStream(ctx context.Context) error { return nil }

// newMemEnv is an API over memIntents on a loopback httptest server: no
// NATS, no projector, no external API. e.mem holds what it recorded.
func newMemEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	logs := &testharness.SyncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	mem := newMemIntents(func() time.Time { return t0 })
	cfg := DefaultConfig()
	cfg.Service = newService(t, mem, memViews{mem}, func() time.Time { return t0 })
	cfg.Log, cfg.Now, cfg.Logger = memLog{}, func() time.Time { return t0 }, logger
	srv, hs := serveEnv(t, cfg, o)
	return &env{t: t, srv: srv, http: hs, mem: mem}
}
