package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/errors"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/service"
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
	CodeHeld            = "held"
)

// queueTimeout bounds how long a re-submit of a step waits for the same
// step's write in flight in this process (the service's single-flight)
// before it is answered from the log.
const queueTimeout = 3 * time.Minute

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

// handlers are the tool handlers of one caller: every call acts as it,
// through the service.
type handlers struct {
	s *Server
	c service.Caller
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
	h.s.log.Error("mcp: "+op+" failed", "caller", h.c.Name, "err", h.s.scrub.Scrub(err.Error()))
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

// writeCall is one write an agent asks for, through submit_<route> or a
// gateway write tool.
type writeCall struct {
	route adapter.Route
	// task and step derive the key; key, the idempotencyKey beside the
	// call's arguments, is the key itself when given.
	task, step, key string
	account, parent string
	payload         json.RawMessage
	wait            int
}

func (h *handlers) submit(rt routeTool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		a := decodeArgs(req.Params.Arguments, submitArgs...)
		w := h.writeIDs(a, req, rt.route)
		w.parent = a.id("parent_external_id", false)
		if w.payload = a.raw("payload"); w.payload == nil {
			a.fail(argErr("payload", "is required"))
		}
		if a.err != nil {
			return h.refuseArg(a.err), nil
		}
		return h.write(ctx, w), nil
	}
}

// writeIDs reads what names a write of route and bounds its answer:
// task_id and step_id (optional when the call carries an idempotencyKey),
// account and wait_seconds.
func (h *handlers) writeIDs(a *args, req *sdk.CallToolRequest, route adapter.Route) writeCall {
	w := writeCall{route: route}
	key, err := idempotencyKey(req)
	a.fail(err)
	w.key = key
	w.task, w.step = a.id("task_id", w.key == ""), a.id("step_id", w.key == "")
	w.account = a.id("account", false)
	w.wait = a.seconds("wait_seconds", int(h.s.cfg.MaxWait.Seconds()))
	return w
}

// write checks the payload by the route's own rules, records the intent
// and makes its write (service.Submit), and answers with its outcome.
func (h *handlers) write(ctx context.Context, w writeCall) *sdk.CallToolResult {
	if w.account == "" {
		if w.account = h.c.DefaultAccount(); w.account == "" {
			return h.refuseArg(argErr("account", "is required"))
		}
	}
	// The route's own validation, before anything is recorded: the
	// refusal names the field (payload.body) and nothing is written.
	var err error
	if n, ok := w.route.Adapter.(adapter.PayloadNormalizer); ok {
		_, err = n.NormalizePayload(w.payload)
	} else {
		_, err = adapter.CanonicalizePayload(w.payload)
	}
	if err != nil {
		return h.refuseArg(err)
	}
	sub := service.Submission{Route: w.route.Name, Account: w.account, Task: w.task, Step: w.step,
		ParentExternalID: w.parent, Payload: w.payload, KeyIncludesPayload: h.s.cfg.KeyIncludesPayload,
		Wait: time.Duration(w.wait) * time.Second, Queue: queueTimeout}
	if w.key != "" {
		sub.Task, sub.Step, sub.RequestID, sub.KeyIncludesPayload = "", "", w.key, false
	}
	// A re-submit that arrives while the step's write is in flight in
	// this process waits for it and is then answered from the log.
	out, err := h.s.svc.Submit(ctx, h.c, sub)
	if err != nil {
		if res := h.submitFailed(w.route.Name, out, err); res != nil {
			return res
		}
	}
	ans := answerOf(out.Intent, out.Result.Replayed)
	if out.Result.Replayed && !out.Visible && ans.Receipt != nil {
		ans.Receipt = nil
		ans.Guidance += " The receipt is shown to callers with the read scope."
	}
	markTask(ctx, ans)
	return h.answer(ans)
}

// submitFailed answers a submit that returned an error; nil when the
// write was made and only its outcome is not recorded yet (out is then
// answered: unknown, and reconciliation settles it) or is in flight in
// this process (out is then the intent as the log holds it).
func (h *handlers) submitFailed(route string, out *service.Submitted, err error) *sdk.CallToolResult {
	var me *service.MismatchError
	switch {
	case errors.Is(err, service.ErrInFlight) && out != nil:
		return nil // answered as the log holds it
	case errors.Is(err, service.ErrInFlight):
		return h.refuse(CodeConflict, "", "this step's write is in flight; its outcome is not known yet. Do not retry it "+
			"under new ids; ask for status (with wait_seconds).", nil)
	case errors.Is(err, service.ErrOutcomeNotRecorded) && out != nil:
		h.s.log.Warn("mcp: outcome not recorded", "intent", out.Result.IntentID, "err", h.s.scrub.Scrub(err.Error()))
		return nil
	case errors.As(err, &me):
		var stored *Answer
		if me.Stored != nil {
			stored = answerOf(me.Stored, true)
		}
		return h.refuse(CodePayloadMismatch, me.Field, "this task_id and step_id were already submitted with a "+
			"different "+me.Field+"; nothing was written. To make a different write, use a new step_id; to learn "+
			"the stored result, ask status.", stored)
	case errors.Is(err, service.ErrOutcomeNotRecorded):
		h.s.log.Warn("mcp: outcome not recorded", "route", route, "err", h.s.scrub.Scrub(err.Error()))
		return h.refuse(CodeUnavailable, "", "unknown: the write was made but settle could not record its outcome "+
			"yet; it will settle it. Do not retry, and do not resubmit it under new ids; ask for status "+
			"(with wait_seconds).", nil)
	case errors.Is(err, service.ErrForbidden):
		// An account (or route) outside the caller's limits.
		fe := &events.FieldError{Reason: "this caller may not make this write"}
		errors.As(err, &fe)
		return h.refuse(CodeForbidden, fe.Field, fe.Field+": "+fe.Reason+"; nothing was written", nil)
	case errors.Is(err, service.ErrInvalidRequest), errors.Is(err, service.ErrPayloadTooLarge):
		return h.refuseArg(err)
	case held(err):
		return h.held(err)
	default:
		return h.unavailable("submit", err)
	}
}

// checkRoute refuses a route the caller may not use on this server.
func (h *handlers) checkRoute(a *args, route string) {
	if names := h.s.routeNames(h.c); a.err == nil && !slices.Contains(names, route) {
		a.fail(argErr("route", "is not a route of this server (%v)", names))
	}
}

// lookupFailed answers a failed read of one intent.
func (h *handlers) lookupFailed(op string, err error) *sdk.CallToolResult {
	switch {
	case errors.Is(err, service.ErrNotFound), errors.Is(err, service.ErrForbidden):
		// None, another tenant's or outside the caller's limits: not told apart.
		return h.refuse(CodeNotFound, "", "no such write is recorded (or it is not visible to this caller). "+
			"A write that was never recorded was never made: submitting it is safe.", nil)
	case errors.Is(err, service.ErrInvalidRequest):
		return h.refuseArg(err)
	case held(err):
		return h.held(err)
	}
	return h.unavailable(op, err)
}

// held reports an intent that is held after an accepted log loss, or whose
// history this version cannot fold (service.HeldError): permanent until a
// human acts, never "unavailable" (which invites calling again).
func held(err error) bool {
	var he *service.HeldError
	return errors.As(err, &he)
}

// held answers a held intent: nothing is recorded or written for it until
// an operator acts; calling again changes nothing.
func (h *handlers) held(err error) *sdk.CallToolResult {
	var he *service.HeldError
	errors.As(err, &he)
	msg := "settle's log lost some of this write's events and an operator accepted the loss: the write is held for a human, " +
		"and nothing is recorded or written for it. Do not retry it, and do not resubmit it under new ids; a human decides."
	if !errors.Is(err, service.ErrIntentHeld) {
		msg = "this version of settle cannot read this write's history: nothing was recorded or written. " +
			"Do not retry it, and do not resubmit it under new ids; a human decides."
	}
	h.s.log.Warn("mcp: intent held", "caller", h.c.Name, "intent", he.IntentID, "why", he.Why)
	return h.refuse(CodeHeld, "", msg, nil)
}

// --- status ---

func (h *handlers) status(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	known := []string{"intent_id", "route", "task_id", "step_id", "account", "wait_seconds"}
	if h.s.cfg.KeyIncludesPayload {
		known = append(known, "payload")
	}
	a := decodeArgs(req.Params.Arguments, known...)
	wait := time.Duration(a.seconds("wait_seconds", int(h.s.cfg.MaxWait.Seconds()))) * time.Second
	id := a.str("intent_id")
	if a.err != nil {
		return h.refuseArg(a.err), nil
	}
	byStep := a.has("route") || a.has("task_id") || a.has("step_id") || a.has("account")
	var i *fsm.Intent
	var err error
	switch {
	case id != "" && byStep:
		return h.refuseArg(argErr("intent_id", "give intent_id, or route with task_id and step_id, not both")), nil
	case id != "":
		if _, i, err = h.s.svc.Get(ctx, h.c, id, wait); err != nil {
			return h.lookupFailed("status", err), nil
		}
	case byStep:
		route := a.str("route")
		h.checkRoute(a, route)
		task, step := a.id("task_id", true), a.id("step_id", true)
		payload := a.raw("payload")
		if h.s.cfg.KeyIncludesPayload && payload == nil {
			a.fail(argErr("payload", "is required to find a write by task and step on this server (its keys include the payload); or give intent_id"))
		}
		account := a.id("account", false)
		if a.err != nil {
			return h.refuseArg(a.err), nil
		}
		if _, i, err = h.s.svc.FindStep(ctx, h.c, service.Step{Route: route, Account: account, Task: task, Step: step,
			Payload: payload, KeyIncludesPayload: h.s.cfg.KeyIncludesPayload}, wait); err != nil {
			return h.lookupFailed("status", err), nil
		}
	default:
		return h.refuseArg(argErr("intent_id", "is required (or route with task_id and step_id)")), nil
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
	// may take (service.Actions: approve, resolve_confirmed,
	// resolve_not_executed, abandon — the last by the resolve tool's
	// "abandoned"); empty without the operate scope.
	Actions []string `json:"actions"`
}

// Pending is the answer of the pending tool.
type Pending struct {
	Items []PendingItem `json:"items"`
}

func (h *handlers) pending(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	a := decodeArgs(req.Params.Arguments, "route", "limit")
	limit := a.count("limit", defaultPending, maxPending)
	route := a.str("route")
	if route != "" {
		h.checkRoute(a, route)
	}
	if a.err != nil {
		return h.refuseArg(a.err), nil
	}
	intents, err := h.s.svc.Pending(ctx, h.c, route, limit)
	if err != nil {
		return h.unavailable("pending", err), nil
	}
	out := Pending{Items: []PendingItem{}}
	for _, i := range intents {
		item := PendingItem{IntentID: i.ID, Route: i.Route(), Account: i.Account(), State: i.State, Outcome: answerOf(i, false).Outcome,
			Reason: string(i.ManualReason), ApprovalFor: i.ApprovalFor, Attempts: len(i.Attempts), CreatedAt: i.CreatedAt.UTC(), Actions: []string{}}
		if h.c.Has(service.ScopeOperate) {
			item.Actions = service.Actions(i)
		}
		out.Items = append(out.Items, item)
	}
	return h.s.result(fmt.Sprintf("%d write(s) wait for an approval or a human decision.", len(out.Items)), out, false), nil
}

// --- approve, resolve ---

func (h *handlers) approve(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	a := decodeArgs(req.Params.Arguments, "intent_id", "reason")
	return h.operate(ctx, a, ToolApprove, service.Action{Kind: service.ActionApprove})
}

func (h *handlers) resolve(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	a := decodeArgs(req.Params.Arguments, "intent_id", "resolution", "reason", "external_id", "live_url")
	kind, err := service.ResolutionAction(a.str("resolution"))
	a.fail(err)
	return h.operate(ctx, a, ToolResolve, service.Action{Kind: kind, ExternalID: a.id("external_id", false), LiveURL: a.str("live_url")})
}

// operate records one operator decision (service.Act: the intent read
// once, the decision appended to it, checked before the log is read) and
// answers with the intent it left.
func (h *handlers) operate(ctx context.Context, a *args, tool string, act service.Action) (*sdk.CallToolResult, error) {
	id := a.id("intent_id", true)
	if act.Reason = a.str("reason"); a.err != nil {
		return h.refuseArg(a.err), nil
	}
	_, i, err := h.s.svc.Act(ctx, h.c, id, act)
	switch {
	case err == nil:
	case errors.Is(err, service.ErrNotAllowed):
		// Refused on the state just read (the intent is unchanged).
		return h.refuse(CodeNotAllowed, "", fmt.Sprintf("the intent is %s; %s is not allowed there; nothing was recorded", i.State, tool),
			answerOf(i, false)), nil
	case errors.Is(err, service.ErrConflict):
		return h.refuse(CodeConflict, "", "the intent changed while the decision was recorded; ask status and decide again", nil), nil
	case errors.Is(err, service.ErrNotFound), errors.Is(err, service.ErrForbidden):
		return h.refuse(CodeNotFound, "intent_id", "no such intent is visible to this caller; nothing was recorded", nil), nil
	case errors.Is(err, service.ErrInvalidRequest):
		return h.refuseArg(err), nil
	case held(err):
		return h.held(err), nil
	default:
		return h.unavailable(tool, err), nil
	}
	return h.s.result(fmt.Sprintf("%s recorded. %s", tool, answerOf(i, false).Guidance), answerOf(i, false), false), nil
}
