package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
)

// Error codes of refused tool calls.
const (
	CodeInvalidArgument = "invalid_argument"
	CodePayloadMismatch = "payload_mismatch"
	CodeForbidden       = "forbidden"
	CodeNotFound        = "not_found"
	CodeNotAllowed      = "not_allowed"
	CodeConflict        = "conflict"
	CodeUnavailable     = "unavailable"
)

// executeTimeout bounds one write. It runs detached from the client: a
// client that goes away must not turn a write into an unknown outcome.
const executeTimeout = 3 * time.Minute

// ToolError is the structured content of a refused call.
type ToolError struct {
	Error struct {
		Code    string `json:"code"`
		Field   string `json:"field,omitempty"`
		Message string `json:"message"`
	} `json:"error"`
	// Intent is the stored intent a refusal is about, when the caller may
	// see it (a payload mismatch, an operator action refused in its state).
	Intent *Answer `json:"intent,omitempty"`
}

// handlers are the tool handlers of one caller.
type handlers struct {
	s *Server
	c Caller
}

func (h *handlers) refuse(code, field, msg string, intent *Answer) *sdk.CallToolResult {
	var e ToolError
	e.Error.Code, e.Error.Field, e.Error.Message = code, field, msg
	e.Intent = intent
	return h.s.result("refused: "+msg, e, true)
}

// refuseArg refuses a call whose argument is invalid: the text names it.
func (h *handlers) refuseArg(err error) *sdk.CallToolResult {
	var ae *argError
	var fe *events.FieldError
	switch {
	case errors.As(err, &ae):
		return h.refuse(CodeInvalidArgument, ae.Field, ae.Field+": "+ae.Reason+"; nothing was written", nil)
	case errors.As(err, &fe):
		return h.refuse(CodeInvalidArgument, fe.Field, fe.Field+": "+fe.Reason+"; nothing was written", nil)
	}
	return h.refuse(CodeInvalidArgument, "", "invalid arguments; nothing was written", nil)
}

// unavailable answers a failure of the log: the text never holds the error.
func (h *handlers) unavailable(op string, err error) *sdk.CallToolResult {
	h.s.log.Error("mcp: "+op+" failed", "caller", h.c.Name, "err", h.s.red.string(err.Error()))
	return h.refuse(CodeUnavailable, "", "settle could not reach its log; this call wrote nothing. "+
		"Calling again with the same arguments is safe.", nil)
}

func (h *handlers) answer(a *Answer) *sdk.CallToolResult {
	text := a.Guidance
	if a.Replayed {
		text += " (This task_id and step_id were already submitted: this is the stored result; nothing new was written.)"
	}
	return h.s.result(text, a, false)
}

// --- submit_<route> ---

var submitArgs = []string{"task_id", "step_id", "account", "parent_external_id", "payload", "wait_seconds"}

func (h *handlers) submit(rt routeTool) sdk.ToolHandler {
	route := rt.route
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		a, err := decodeArgs(req.Params.Arguments, submitArgs...)
		if err != nil {
			return h.refuseArg(err), nil
		}
		task, err := a.id("task_id", true)
		if err != nil {
			return h.refuseArg(err), nil
		}
		step, err := a.id("step_id", true)
		if err != nil {
			return h.refuseArg(err), nil
		}
		account, err := a.id("account", false)
		if err != nil {
			return h.refuseArg(err), nil
		}
		if account == "" {
			if account = h.c.defaultAccount(); account == "" {
				return h.refuseArg(argErr("account", "is required")), nil
			}
		}
		if !h.c.AccountAllowed(account) {
			return h.refuse(CodeForbidden, "account", "account: this caller may not write as this account; nothing was written", nil), nil
		}
		parent, err := a.id("parent_external_id", false)
		if err != nil {
			return h.refuseArg(err), nil
		}
		payload := a.raw("payload")
		if payload == nil {
			return h.refuseArg(argErr("payload", "is required")), nil
		}
		wait, err := a.seconds("wait_seconds", int(h.s.cfg.MaxWait.Seconds()))
		if err != nil {
			return h.refuseArg(err), nil
		}
		// The route's own validation, before anything is recorded: the
		// refusal names the field (payload.body) and nothing is written.
		if n, ok := route.Adapter.(adapter.PayloadNormalizer); ok {
			_, err = n.NormalizePayload(payload)
		} else {
			_, err = adapter.CanonicalizePayload(payload)
		}
		if err != nil {
			return h.refuseArg(err), nil
		}

		// One write per step at a time in this process: a re-submit that
		// arrives while the step's write is in flight waits for it and is
		// then answered from the log.
		release, err := h.s.flights.acquire(ctx, route.Name+"\x00"+task+"\x00"+step)
		if err != nil {
			return h.inFlight(ctx, route.Name, account, task, step, payload), nil
		}
		execCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), executeTimeout)
		res, err := h.s.cfg.Producer.Call(execCtx, producer.ToolCall{Tenant: h.c.Tenant, Task: task, Step: step,
			KeyIncludesPayload: h.s.cfg.KeyIncludesPayload, Route: route.Name, Account: account,
			ParentExternalID: parent, Payload: payload})
		cancel()
		release()
		switch {
		case err == nil:
		case errors.Is(err, producer.ErrOutcomeNotRecorded) && res != nil && res.Intent != nil:
			// The write was made and its outcome is not on the log yet:
			// unknown, and reconciliation will settle it.
			h.s.log.Warn("mcp: outcome not recorded", "intent", res.IntentID, "err", h.s.red.string(err.Error()))
		case errors.Is(err, producer.ErrPayloadMismatch):
			field, stored := h.mismatch(ctx, route.Name, task, step, account, parent, payload)
			return h.refuse(CodePayloadMismatch, field, "this task_id and step_id were already submitted with a "+
				"different "+field+"; nothing was written. To make a different write, use a new step_id; to learn "+
				"the stored result, ask status.", stored), nil
		case errors.Is(err, producer.ErrOutcomeNotRecorded):
			h.s.log.Warn("mcp: outcome not recorded", "route", route.Name, "err", h.s.red.string(err.Error()))
			return h.refuse(CodeUnavailable, "", "unknown: the write was made but settle could not record its outcome "+
				"yet; it will settle it. Do not retry, and do not resubmit it under new ids; ask for status "+
				"(with wait_seconds).", nil), nil
		case errors.Is(err, producer.ErrInvalidRequest), errors.Is(err, producer.ErrPayloadTooLarge):
			return h.refuseArg(err), nil
		default:
			return h.unavailable("submit", err), nil
		}
		i := res.Intent
		if wait > 0 && !answerOf(i, false).Settled {
			if j, err := h.await(ctx, route.Name, i.ID, time.Duration(wait)*time.Second); err == nil {
				i = j
			}
		}
		ans := answerOf(i, res.Replayed)
		if res.Replayed && !h.c.Has(ScopeRead) && ans.Receipt != nil {
			ans.Receipt = nil
			ans.Guidance += " The receipt is shown to callers with the read scope."
		}
		return h.answer(ans), nil
	}
}

// inFlight answers a re-submit whose client gave up waiting for the
// step's write in flight: the stored state when it can be read, unknown
// otherwise. Nothing is written.
func (h *handlers) inFlight(ctx context.Context, route, account, task, step string, payload json.RawMessage) *sdk.CallToolResult {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if i, err := h.loadStep(rctx, route, []string{account}, task, step, payload); err == nil && i != nil {
		return h.answer(answerOf(i, true))
	}
	return h.refuse(CodeConflict, "", "this step's write is in flight; its outcome is not known yet. Do not retry it "+
		"under new ids; ask for status (with wait_seconds).", nil)
}

// flights serialises the writes of one step within this process.
type flights struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// acquire waits until key is free and takes it, or returns ctx's error.
func (f *flights) acquire(ctx context.Context, key string) (release func(), err error) {
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
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// intentIDOf is the intent a task and step of account map to on route
// (as producer.Call derives it: request ids are scoped per tenant, route
// and account).
func (h *handlers) intentIDOf(route, account, task, step string, payload json.RawMessage) (string, error) {
	sum := ""
	if h.s.cfg.KeyIncludesPayload {
		s, err := events.PayloadSHA256(payload)
		if err != nil {
			return "", &events.FieldError{Field: "payload", Reason: err.Error()}
		}
		sum = s
	}
	return events.ScopedIntentID(h.c.Tenant, route, account, events.ToolKey(task, step, sum)), nil
}

// stepAccounts lists the accounts a task and step were submitted for on
// route (from the views; ones this caller may see).
func (h *handlers) stepAccounts(ctx context.Context, route, task, step string, payload json.RawMessage) ([]string, error) {
	sum := ""
	if h.s.cfg.KeyIncludesPayload {
		s, err := events.PayloadSHA256(payload)
		if err != nil {
			return nil, &events.FieldError{Field: "payload", Reason: err.Error()}
		}
		sum = s
	}
	key := events.ToolKey(task, step, sum)
	vs, err := h.s.cfg.Projector.ByRequest(ctx, h.c.Tenant, route, key)
	if err == nil && len(vs) == 0 {
		// The views may lag a submit just made: catch up once, bounded.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if h.s.cfg.Projector.CatchUp(cctx) == nil {
			vs, err = h.s.cfg.Projector.ByRequest(ctx, h.c.Tenant, route, key)
		}
		cancel()
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range vs {
		if h.c.AccountAllowed(v.Account) && !slices.Contains(out, v.Account) {
			out = append(out, v.Account)
		}
	}
	return out, nil
}

// loadStep finds the intent of a task and step on route: under its
// scoped id for each account it may belong to (the given one, or the
// caller's), then under its v1 id (recorded before ids named the account).
func (h *handlers) loadStep(ctx context.Context, route string, accounts []string, task, step string, payload json.RawMessage) (*fsm.Intent, error) {
	for _, acct := range accounts {
		id, err := h.intentIDOf(route, acct, task, step, payload)
		if err != nil {
			return nil, err
		}
		if i, err := h.load(ctx, route, id); err != nil || i != nil {
			return i, err
		}
	}
	sum := ""
	if h.s.cfg.KeyIncludesPayload {
		s, err := events.PayloadSHA256(payload)
		if err != nil {
			return nil, &events.FieldError{Field: "payload", Reason: err.Error()}
		}
		sum = s
	}
	return h.load(ctx, route, events.IntentID(h.c.Tenant, route, events.ToolKey(task, step, sum)))
}

// mismatch explains a refused re-submit: which argument differs from the
// stored intent of task and step ("payload" when it cannot be told), and
// the stored intent's answer when the caller may read it.
func (h *handlers) mismatch(ctx context.Context, route, task, step, account, parent string, payload json.RawMessage) (string, *Answer) {
	i, err := h.loadStep(ctx, route, []string{account}, task, step, payload)
	if err != nil || i == nil {
		return "payload", nil
	}
	field := "payload"
	switch {
	case i.Recorded.Account != account:
		field = "account"
	case i.Recorded.ParentExternalID != parent:
		field = "parent_external_id"
	}
	if !h.c.Has(ScopeRead) {
		return field, nil
	}
	return field, answerOf(i, true)
}

// load reads and folds an intent; nil, nil when it does not exist or the
// caller may not see it (its route or account is outside the limits).
func (h *handlers) load(ctx context.Context, route, id string) (*fsm.Intent, error) {
	hist, err := h.s.cfg.Producer.Store().Load(ctx, route, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	i, err := hist.Fold()
	if err != nil {
		return nil, err
	}
	if !h.c.mayAccess(i) {
		return nil, nil
	}
	return i, nil
}

// find reads an intent by id alone (one read of the log, folded once);
// nil, nil, nil when it does not exist or the caller may not see it.
func (h *handlers) find(ctx context.Context, id string) (*ledger.History, *fsm.Intent, error) {
	hist, i, err := h.s.cfg.Producer.Load(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if !h.c.mayAccess(i) {
		return nil, nil, nil
	}
	return hist, i, nil
}

// await polls the log until the intent is settled or d has passed (or the
// client went away), and returns the last fold.
func (h *handlers) await(ctx context.Context, route, id string, d time.Duration) (*fsm.Intent, error) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	delay := 20 * time.Millisecond
	var last *fsm.Intent
	for {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		i, err := h.load(rctx, route, id)
		rcancel()
		if err != nil || i == nil {
			if last != nil {
				return last, nil
			}
			return nil, errors.Newf("await %s: %v", id, err)
		}
		last = i
		if answerOf(i, false).Settled || wctx.Err() != nil {
			return i, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-wctx.Done():
		case <-t.C:
		}
		t.Stop()
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// --- status ---

func (h *handlers) status(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	known := []string{"intent_id", "route", "task_id", "step_id", "account", "wait_seconds"}
	if h.s.cfg.KeyIncludesPayload {
		known = append(known, "payload")
	}
	a, err := decodeArgs(req.Params.Arguments, known...)
	if err != nil {
		return h.refuseArg(err), nil
	}
	wait, err := a.seconds("wait_seconds", int(h.s.cfg.MaxWait.Seconds()))
	if err != nil {
		return h.refuseArg(err), nil
	}
	id, err := a.str("intent_id")
	if err != nil {
		return h.refuseArg(err), nil
	}
	byStep := a.has("route") || a.has("task_id") || a.has("step_id") || a.has("account")
	var i *fsm.Intent
	switch {
	case id != "" && byStep:
		return h.refuseArg(argErr("intent_id", "give intent_id, or route with task_id and step_id, not both")), nil
	case id != "":
		if err := events.ValidateIntentID(id); err != nil {
			return h.refuseArg(err), nil
		}
		if _, i, err = h.find(ctx, id); err != nil {
			return h.unavailable("status", err), nil
		}
	case byStep:
		route, err := a.str("route")
		if err != nil {
			return h.refuseArg(err), nil
		}
		if !slices.Contains(h.s.routeNames(h.c), route) {
			return h.refuseArg(argErr("route", "is not a route of this server (%v)", h.s.routeNames(h.c))), nil
		}
		task, err := a.id("task_id", true)
		if err != nil {
			return h.refuseArg(err), nil
		}
		step, err := a.id("step_id", true)
		if err != nil {
			return h.refuseArg(err), nil
		}
		payload := a.raw("payload")
		if h.s.cfg.KeyIncludesPayload && payload == nil {
			return h.refuseArg(argErr("payload", "is required to find a write by task and step on this server (its keys include the payload); or give intent_id")), nil
		}
		account, err := a.id("account", false)
		if err != nil {
			return h.refuseArg(err), nil
		}
		accounts := []string{account}
		switch {
		case account != "":
		case !h.c.All && len(h.c.Accounts) > 0:
			accounts = h.c.Accounts
		default:
			// Any account: the views name the accounts this task and
			// step were submitted for (then each is read from the log).
			accounts = nil
			if acc, err := h.stepAccounts(ctx, route, task, step, payload); err != nil {
				return h.unavailable("status", err), nil
			} else if len(acc) > 1 {
				return h.refuseArg(argErr("account", "this task and step were submitted for several accounts (%v); name one", acc)), nil
			} else {
				accounts = acc
			}
		}
		if i, err = h.loadStep(ctx, route, accounts, task, step, payload); err != nil {
			var fe *events.FieldError
			if errors.As(err, &fe) {
				return h.refuseArg(err), nil
			}
			return h.unavailable("status", err), nil
		}
	default:
		return h.refuseArg(argErr("intent_id", "is required (or route with task_id and step_id)")), nil
	}
	if i == nil {
		return h.refuse(CodeNotFound, "", "no such write is recorded (or it is not visible to this caller). "+
			"A write that was never recorded was never made: submitting it is safe.", nil), nil
	}
	if wait > 0 && !answerOf(i, false).Settled {
		if j, err := h.await(ctx, i.Route(), i.ID, time.Duration(wait)*time.Second); err == nil {
			i = j
		}
	}
	return h.answer(answerOf(i, false)), nil
}

// --- pending ---

// PendingItem is one intent waiting for a human.
type PendingItem struct {
	IntentID    string    `json:"intent_id"`
	Route       string    `json:"route"`
	Account     string    `json:"account"`
	State       fsm.State `json:"state"`
	Outcome     string    `json:"outcome"`
	Reason      string    `json:"reason,omitempty"`
	ApprovalFor string    `json:"approval_for,omitempty"`
	Attempts    int       `json:"attempts"`
	CreatedAt   time.Time `json:"created_at"`
	// Actions are the operator actions the state allows and this caller
	// may take (approve, resolve_confirmed, resolve_not_executed,
	// resolve_abandoned); empty without the operate scope.
	Actions []string `json:"actions"`
}

// Pending is the answer of the pending tool.
type Pending struct {
	Items []PendingItem `json:"items"`
}

func (h *handlers) pending(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	a, err := decodeArgs(req.Params.Arguments, "route", "limit")
	if err != nil {
		return h.refuseArg(err), nil
	}
	limit, err := a.count("limit", defaultPending, maxPending)
	if err != nil {
		return h.refuseArg(err), nil
	}
	routes := []string{""}
	route, err := a.str("route")
	if err != nil {
		return h.refuseArg(err), nil
	}
	switch {
	case route != "":
		if !slices.Contains(h.s.routeNames(h.c), route) {
			return h.refuseArg(argErr("route", "is not a route of this server (%v)", h.s.routeNames(h.c))), nil
		}
		routes = []string{route}
	case !h.c.All && len(h.c.Routes) > 0:
		routes = h.s.routeNames(h.c)
	}
	accounts := []string{""}
	if !h.c.All && len(h.c.Accounts) > 0 {
		accounts = h.c.Accounts
	}
	seen := map[string]bool{}
	var views []projector.IntentView
	for _, st := range []fsm.State{fsm.AwaitingApproval, fsm.ManualAction} {
		for _, r := range routes {
			for _, acct := range accounts {
				page, err := h.s.cfg.Projector.List(ctx, projector.Filter{Tenant: h.c.Tenant, State: st, Route: r, Account: acct, Limit: limit})
				if err != nil {
					return h.unavailable("pending", err), nil
				}
				for _, v := range page.Items {
					if !seen[v.IntentID] {
						seen[v.IntentID] = true
						views = append(views, v)
					}
				}
			}
		}
	}
	sort.Slice(views, func(x, y int) bool { return views[x].CreatedAt.After(views[y].CreatedAt) })
	out := Pending{Items: []PendingItem{}}
	for _, v := range views {
		if len(out.Items) == limit {
			break
		}
		// The views may lag: the state is read again from the log.
		i, err := h.load(ctx, v.Route, v.IntentID)
		if err != nil {
			return h.unavailable("pending", err), nil
		}
		if i == nil || (i.State != fsm.AwaitingApproval && i.State != fsm.ManualAction) {
			continue
		}
		ans := answerOf(i, false)
		item := PendingItem{IntentID: i.ID, Route: i.Route(), Account: i.Account(), State: i.State, Outcome: ans.Outcome,
			Reason: i.ManualReason, ApprovalFor: i.ApprovalFor, Attempts: len(i.Attempts), CreatedAt: i.CreatedAt.UTC(), Actions: []string{}}
		if h.c.Has(ScopeOperate) {
			item.Actions = actionsOf(i)
		}
		out.Items = append(out.Items, item)
	}
	return h.s.result(fmt.Sprintf("%d write(s) wait for an approval or a human decision.", len(out.Items)), out, false), nil
}

func actionsOf(i *fsm.Intent) []string {
	out := []string{}
	if i.Can(events.Approved) {
		out = append(out, "approve")
	}
	if i.Can(events.OperatorConfirmed) {
		out = append(out, "resolve_confirmed")
	}
	if i.Can(events.OperatorReleased) {
		out = append(out, "resolve_not_executed")
	}
	if i.Can(events.Abandoned) {
		out = append(out, "resolve_abandoned")
	}
	return out
}

// --- approve, resolve ---

func (h *handlers) approve(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	a, err := decodeArgs(req.Params.Arguments, "intent_id", "reason")
	if err != nil {
		return h.refuseArg(err), nil
	}
	return h.operate(ctx, a, "approve", func(ctx context.Context, hist *ledger.History, i *fsm.Intent, reason string) error {
		return h.s.cfg.Producer.Approve(ctx, hist, i, h.c.Name, reason)
	})
}

func (h *handlers) resolve(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	a, err := decodeArgs(req.Params.Arguments, "intent_id", "resolution", "reason", "external_id", "live_url")
	if err != nil {
		return h.refuseArg(err), nil
	}
	resolution, err := a.str("resolution")
	if err != nil {
		return h.refuseArg(err), nil
	}
	externalID, err := a.id("external_id", false)
	if err != nil {
		return h.refuseArg(err), nil
	}
	liveURL, err := a.str("live_url")
	if err != nil {
		return h.refuseArg(err), nil
	}
	switch resolution {
	case resolutionConfirmed:
		if externalID == "" {
			return h.refuseArg(argErr("external_id", "is required to resolve as confirmed (the external object you found)")), nil
		}
		if liveURL != "" {
			u, err := url.Parse(liveURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || len(liveURL) > 2048 {
				return h.refuseArg(argErr("live_url", "must be an http(s) URL without credentials")), nil
			}
		}
	case resolutionNotExecuted, resolutionAbandoned:
		if externalID != "" || liveURL != "" {
			return h.refuseArg(argErr("external_id", "only a confirmed resolution names the external object")), nil
		}
	case "":
		return h.refuseArg(argErr("resolution", "is required (confirmed, not_executed or abandoned)")), nil
	default:
		return h.refuseArg(argErr("resolution", "must be confirmed, not_executed or abandoned")), nil
	}
	return h.operate(ctx, a, "resolve", func(ctx context.Context, hist *ledger.History, i *fsm.Intent, reason string) error {
		p := h.s.cfg.Producer
		switch resolution {
		case resolutionConfirmed:
			return p.ResolveConfirmed(ctx, hist, i, h.c.Name, reason, externalID, liveURL)
		case resolutionNotExecuted:
			return p.ResolveReleased(ctx, hist, i, h.c.Name, reason)
		default:
			return p.Abandon(ctx, hist, i, h.c.Name, reason)
		}
	})
}

// operate runs one operator action on a visible intent as it was read and
// answers with the intent the action left (the appended event is folded
// into it): one read of the log.
func (h *handlers) operate(ctx context.Context, a *args, action string, act func(context.Context, *ledger.History, *fsm.Intent, string) error) (*sdk.CallToolResult, error) {
	id, err := a.id("intent_id", true)
	if err != nil {
		return h.refuseArg(err), nil
	}
	if err := events.ValidateIntentID(id); err != nil {
		return h.refuseArg(err), nil
	}
	reason, err := a.text("reason", 2000)
	if err != nil {
		return h.refuseArg(err), nil
	}
	hist, i, err := h.find(ctx, id)
	if err != nil {
		return h.unavailable(action, err), nil
	}
	if i == nil {
		return h.refuse(CodeNotFound, "intent_id", "no such intent is visible to this caller; nothing was recorded", nil), nil
	}
	// The decision is not tied to the client's connection: once it reaches
	// the log, the next read reports it.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := act(actx, hist, i, reason); err != nil {
		switch {
		case errors.Is(err, producer.ErrNotAllowed):
			// Refused on the state just read (the intent is unchanged).
			return h.refuse(CodeNotAllowed, "", fmt.Sprintf("the intent is %s; %s is not allowed there; nothing was recorded", i.State, action),
				answerOf(i, false)), nil
		case errors.Is(err, producer.ErrInvalidRequest):
			return h.refuseArg(err), nil
		case errors.Is(err, ledger.ErrConflict):
			return h.refuse(CodeConflict, "", "the intent changed while the decision was recorded; ask status and decide again", nil), nil
		}
		return h.unavailable(action, err), nil
	}
	return h.s.result(fmt.Sprintf("%s recorded. %s", action, answerOf(i, false).Guidance), answerOf(i, false), false), nil
}
