package mcp

import (
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/service"
)

// Tool names besides submit_<route>.
const (
	ToolStatus  = "status"
	ToolPending = "pending"
	ToolApprove = "approve"
	ToolResolve = "resolve"
)

// SubmitToolName is the name of a route's submit tool.
func SubmitToolName(route string) string { return "submit_" + route }

func ptr[T any](v T) *T { return &v }

func obj(props map[string]any, required ...string) map[string]any {
	if required == nil {
		required = []string{}
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func idSchema(desc string) map[string]any {
	return map[string]any{"type": "string", "minLength": 1, "maxLength": 256, "description": desc}
}

func intentIDSchema() map[string]any {
	return map[string]any{"type": "string", "pattern": "^in_[a-z2-7]{32}$", "description": "the intent id a submit returned (in_ + 32 characters)"}
}

func reasonSchema() map[string]any {
	return map[string]any{"type": "string", "minLength": 1, "maxLength": 2000, "description": "why (recorded with the decision)"}
}

// tool is one of settle's own tools (every one idempotent).
func tool(name, title, desc string, schema map[string]any, readOnly, destructive, openWorld bool) *sdk.Tool {
	return &sdk.Tool{Name: name, Title: title, Description: desc, InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{Title: title, ReadOnlyHint: readOnly, IdempotentHint: true,
			DestructiveHint: ptr(destructive), OpenWorldHint: ptr(openWorld)}}
}

func (s *Server) waitSchema(what string) map[string]any { return waitSchema(s.cfg.MaxWait, what) }

func waitSchema(max time.Duration, what string) map[string]any {
	return map[string]any{"type": "integer", "minimum": 0, "maximum": int(max.Seconds()),
		"description": "wait up to this many seconds for " + what + " (default 0: answer at once)"}
}

const (
	taskIDDesc = "your task's id: the same on every retry and every restart of this task"
	stepIDDesc = "this write's step within the task: the same step always means the same write"
)

func (s *Server) submitTool(rt routeTool, c service.Caller) *sdk.Tool {
	name := rt.route.Name
	account := idSchema("the account to write as (the external system's account or user id)")
	required := []string{"task_id", "step_id", "payload"}
	if len(c.Accounts) > 0 {
		account["enum"] = c.Accounts
	}
	if d := c.DefaultAccount(); d != "" {
		account["description"] = "the account to write as (default " + d + ")"
	} else {
		required = append(required, "account")
	}
	props := map[string]any{
		"task_id":            idSchema(taskIDDesc),
		"step_id":            idSchema(stepIDDesc),
		"account":            account,
		"parent_external_id": idSchema("the external id of the object this write answers or belongs to (optional)"),
		"payload":            rt.payload,
		"wait_seconds":       s.waitSchema("the outcome to be settled"),
	}
	caps := rt.route.Adapter.Capabilities()
	var how []string
	if caps.IdempotencyKey {
		how = append(how, "the API deduplicates by settle's idempotency key")
	}
	if caps.Search {
		how = append(how, "a lost response is settled by searching the account's recent writes")
	}
	if caps.StatusQuery {
		how = append(how, "a lost response is settled by the API's status query")
	}
	desc := fmt.Sprintf("Make one %s write through settle, at most once. task_id and step_id identify the write "+
		"(settle derives the idempotency key from them; you never choose a key): submitting the same task_id and "+
		"step_id again, after a timeout or a restart, returns the stored result and never writes twice. A new "+
		"task_id or step_id is a new write. The answer has intent_id, state, outcome (confirmed, rejected, "+
		"unknown, awaiting_approval, needs_human), a receipt when confirmed, and guidance: unknown means the "+
		"write may have happened and settle is settling it — do not retry, ask status.", name)
	if len(how) > 0 {
		desc += " This route: " + strings.Join(how, "; ") + "."
	}
	return tool(SubmitToolName(name), "Submit "+name, desc, obj(props, required...), false, rt.destructive, true)
}

func (s *Server) routeNames(c service.Caller) []string {
	var out []string
	for _, rt := range s.routes {
		if c.RouteAllowed(rt.route.Name) {
			out = append(out, rt.route.Name)
		}
	}
	return out
}

func (s *Server) statusTool(c service.Caller) *sdk.Tool {
	props := map[string]any{
		"intent_id": intentIDSchema(),
		"route":     map[string]any{"type": "string", "enum": s.routeNames(c), "description": "with task_id and step_id: the route of the write"},
		"task_id":   idSchema("with route and step_id: the task_id given to submit"),
		"step_id":   idSchema("with route and task_id: the step_id given to submit"),
		"account":   idSchema("with route, task_id and step_id: the account given to submit (task and step ids are scoped per account); default: this token's account"),
		"wait_seconds": s.waitSchema("the intent to be settled (confirmed, rejected, " +
			"awaiting approval or needing a human)"),
	}
	desc := "The current state of a write, read from settle's log: by intent_id, or by route with task_id and " +
		"step_id. Same answer as submit (outcome, receipt, guidance). Use wait_seconds to wait for an unknown " +
		"write to settle instead of retrying it."
	if s.cfg.KeyIncludesPayload {
		props["payload"] = map[string]any{"description": "with route, task_id and step_id: the payload given to submit (this server keys writes by their payload too)"}
		desc += " Finding a write by task and step needs its payload too on this server."
	}
	return tool(ToolStatus, "Status of a write", desc, obj(props), true, false, false)
}

func (s *Server) pendingTool(c service.Caller) *sdk.Tool {
	return tool(ToolPending, "Writes waiting for a human",
		"Intents that wait for an approval (awaiting_approval) or for a human decision (needs_human, "+
			"with the reason), newest first, and the operator actions each allows.",
		obj(map[string]any{
			"route": map[string]any{"type": "string", "enum": s.routeNames(c), "description": "only this route"},
			"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": maxPending, "description": fmt.Sprintf("at most this many (default %d)", defaultPending)},
		}), true, false, false)
}

func approveTool() *sdk.Tool {
	return tool(ToolApprove, "Approve a write",
		"Approve a write that waits for approval (its first write or its retry); settle then makes it. "+
			"Recorded on the log with this token's name and the reason. Refused in any other state.",
		obj(map[string]any{"intent_id": intentIDSchema(), "reason": reasonSchema()}, "intent_id", "reason"), false, true, true)
}

func resolveTool() *sdk.Tool {
	t := tool(ToolResolve, "Resolve a write a human must decide",
		"Close an intent that needs a human: confirmed (you proved the write happened: give its "+
			"external_id), not_executed (you proved it did not happen: settle may write it again, with the same "+
			"key) or abandoned (it will not be written; an earlier attempt may still have taken effect). Recorded "+
			"on the log with this token's name and the reason; refused where the state does not allow it.",
		obj(map[string]any{
			"intent_id":   intentIDSchema(),
			"resolution":  map[string]any{"type": "string", "enum": service.Resolutions()},
			"reason":      reasonSchema(),
			"external_id": idSchema("confirmed only: the external object's id"),
			"live_url":    map[string]any{"type": "string", "maxLength": 2048, "description": "confirmed only: its public http(s) URL"},
		}, "intent_id", "resolution", "reason"), false, true, false)
	t.Annotations.Title = "Resolve a write"
	return t
}

// Bounds of the pending tool.
const (
	defaultPending = 20
	maxPending     = 100
)
