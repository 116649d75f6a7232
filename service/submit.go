package service

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/internal/errkind"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
)

// executeTimeout bounds one Execute. The write runs detached from the
// caller's context: a client that goes away must not turn a write into
// an unknown outcome.
const executeTimeout = 3 * time.Minute

// Submission is one submit. Its request id is RequestID (the API's
// idempotency key) or derives from Task and Step (a tool call's, through
// Intents.ToolRequestID, with the payload's hash when KeyIncludesPayload
// is set). Either way it is scoped per tenant (the caller's), route and
// account.
type Submission struct {
	Route            string
	Account          string
	RequestID        string
	Task, Step       string
	ParentExternalID string
	Payload          json.RawMessage
	PlannedAt        time.Time
	ExpiresAt        time.Time
	DryRun           bool
	// KeyIncludesPayload derives the key of a tool call from its payload
	// too (as the route records it).
	KeyIncludesPayload bool
	// Wait bounds waiting, from the start of the submit, for the intent to
	// settle (0: answer as Execute leaves it).
	Wait time.Duration
	// Queue bounds waiting, from the start of the submit, for a submit of
	// the same request that executes in this process (0: ErrInFlight at
	// once).
	Queue time.Duration
}

// toolCall reports whether the request id derives from task and step.
func (sub *Submission) toolCall() bool { return sub.Task != "" || sub.Step != "" }

// Submitted is the answer to a submit.
type Submitted struct {
	// Result is Execute's: intent id, route, Replayed, DryRun.
	Result *producer.Result
	// History and Intent are the intent answered about: as Execute left it
	// on the log, or as last read while waiting (Waited).
	History *ledger.History
	Intent  *fsm.Intent
	Waited  bool
	// Visible: the caller may read the intent (read scope and limits). A
	// replay (or a dry run of an existing intent) shows the intent as it
	// is now; what a caller that may not read it is shown is the
	// transport's choice.
	Visible bool
}

// MismatchError is a refused re-submit: its request id is recorded with
// another payload or parent. It matches
// producer.ErrPayloadMismatch. Field names what differs ("payload" when
// it cannot be told); Stored is the recorded intent when the caller may
// read it.
type MismatchError struct {
	Field  string
	Stored *fsm.Intent
	err    error
}

func (e *MismatchError) Error() string { return e.err.Error() }
func (e *MismatchError) Unwrap() error { return e.err }

// Submit records the caller's intent and makes its write, at most once
// per request id (producer.Execute), after checking the caller's scope
// and limits. Within this process, one submit of a request executes at a
// time: another waits for it up to sub.Queue and then gets ErrInFlight
// (with the intent as the log holds it, when it can be read). A
// ErrOutcomeNotRecorded is returned with the Submitted it concerns.
func (s *Service) Submit(ctx context.Context, c Caller, sub Submission) (*Submitted, error) {
	if err := needScope(c, ScopeSubmit); err != nil {
		return nil, err
	}
	if !c.RouteAllowed(sub.Route) {
		return nil, forbidden("route", "the caller may not use route "+sub.Route)
	}
	if !c.AccountAllowed(sub.Account) {
		return nil, forbidden("account", "the caller may not use this account")
	}
	start := time.Now()
	if sub.toolCall() {
		id, err := s.cfg.Intents.ToolRequestID(producer.ToolCall{Tenant: c.Tenant, Task: sub.Task, Step: sub.Step,
			KeyIncludesPayload: sub.KeyIncludesPayload, Route: sub.Route, Account: sub.Account, Payload: sub.Payload})
		if err != nil {
			return nil, err
		}
		sub.RequestID = id
	}
	req := producer.Request{Tenant: c.Tenant, Route: sub.Route, Account: sub.Account, RequestID: sub.RequestID,
		ParentExternalID: sub.ParentExternalID, Payload: sub.Payload, PlannedAt: sub.PlannedAt,
		ExpiresAt: sub.ExpiresAt, DryRun: sub.DryRun}
	// The request's tenant, route and account are the caller's: it may see
	// the intent when it holds the read scope.
	visible := c.MayRead(c.Tenant, sub.Route, sub.Account)
	if sub.DryRun {
		res, err := s.cfg.Intents.Execute(ctx, req)
		if err != nil {
			return nil, err
		}
		return &Submitted{Result: res, Visible: visible}, nil
	}

	key := c.Tenant + "\x00" + sub.Route + "\x00" + sub.Account + "\x00" + sub.RequestID
	qctx, cancel := context.WithDeadline(ctx, start.Add(sub.Queue))
	release, err := s.flights.acquire(qctx, key, sub.Queue > 0)
	cancel()
	if err != nil {
		return s.inFlight(ctx, events.ScopedIntentID(c.Tenant, sub.Route, sub.Account, sub.RequestID), visible), ErrInFlight
	}
	execCtx, execCancel := context.WithTimeout(context.WithoutCancel(ctx), executeTimeout)
	res, err := s.cfg.Intents.Execute(execCtx, req)
	execCancel()
	release()
	switch {
	case err == nil, errors.Is(err, producer.ErrOutcomeNotRecorded) && res != nil && res.Intent != nil:
	case errors.Is(err, producer.ErrPayloadMismatch):
		return nil, s.mismatch(ctx, c, sub, err)
	default:
		return nil, err
	}
	out := &Submitted{Result: res, History: &ledger.History{Route: res.Route, Events: res.History, LastSeq: res.LastSeq},
		Intent: res.Intent, Visible: visible}
	if err != nil { // the outcome is not recorded: answered as Execute left it
		return out, err
	}
	if sub.Wait > 0 && !Settled(res.State) && (visible || !res.Replayed) {
		wctx, cancel := context.WithDeadline(ctx, start.Add(sub.Wait))
		defer cancel()
		h, i, err := s.await(wctx, res.IntentID)
		if err != nil {
			return nil, err
		}
		out.History, out.Intent, out.Waited = h, i, true
	}
	return out, nil
}

// inFlight is the answer to a submit that found its request executing:
// the intent as the log holds it, when it can be read (nil when not yet
// recorded or unreadable).
func (s *Service) inFlight(ctx context.Context, id string, visible bool) *Submitted {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	h, i, err := s.cfg.Intents.Load(rctx, id)
	if err != nil {
		return nil
	}
	return &Submitted{Result: &producer.Result{IntentID: i.ID, Route: i.Route(), State: i.State, Intent: i, Replayed: true},
		History: h, Intent: i, Visible: visible}
}

// mismatch explains a refused re-submit: which field differs from the
// recorded intent, and the intent when the caller may read it.
func (s *Service) mismatch(ctx context.Context, c Caller, sub Submission, err error) error {
	me := &MismatchError{Field: "payload", err: err}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, i, lerr := s.cfg.Intents.Load(rctx, events.ScopedIntentID(c.Tenant, sub.Route, sub.Account, sub.RequestID))
	if lerr != nil {
		return me
	}
	if i.Recorded.ParentExternalID != sub.ParentExternalID {
		me.Field = "parent_external_id"
	}
	if c.MayRead(i.Recorded.Tenant, i.Route(), i.Account()) {
		me.Stored = i
	}
	return me
}

// await polls the log until the intent is settled or ctx ends, and
// returns the last history read and its fold. The last read runs even
// when ctx has ended, so the answer is fresh.
func (s *Service) await(ctx context.Context, id string) (*ledger.History, *fsm.Intent, error) {
	delay := 20 * time.Millisecond
	var last *ledger.History
	var lastIntent *fsm.Intent
	for {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		h, i, err := s.cfg.Intents.Load(rctx, id)
		cancel()
		if err != nil {
			if last != nil && ctx.Err() != nil {
				return last, lastIntent, nil
			}
			return nil, nil, err
		}
		last, lastIntent = h, i
		if Settled(i.State) || ctx.Err() != nil {
			return h, i, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// flights tracks the submits executing in this process, by tenant, route,
// account and request id.
type flights struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// acquire takes key, waiting (when wait is set) until its holder releases
// it or ctx ends. It returns the release func, or ErrInFlight.
func (f *flights) acquire(ctx context.Context, key string, wait bool) (release func(), err error) {
	for {
		f.mu.Lock()
		if f.m == nil {
			f.m = map[string]chan struct{}{}
		}
		busy, ok := f.m[key]
		if !ok {
			ch := make(chan struct{})
			f.m[key] = ch
			f.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					f.mu.Lock()
					delete(f.m, key)
					f.mu.Unlock()
					close(ch)
				})
			}, nil
		}
		f.mu.Unlock()
		if !wait {
			return nil, ErrInFlight
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, errkind.Wrap(ErrInFlight, ctx.Err())
		}
	}
}
