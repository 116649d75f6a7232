package mcp

import (
	"context"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/service"
)

// The Tasks extension of MCP (io.modelcontextprotocol/tasks, 2026-07-28):
// a client that declares it (in the call's _meta clientCapabilities, or
// for a session begun with initialize, in the session's capabilities)
// gets, for a write still settling, a task instead of the tool's answer
// (a CreateTaskResult, resultType "task"). The task id is the intent id,
// so a task outlives the session and settle itself: tasks/get reads the
// intent from the log (as the caller: its tenant and limits) and answers
// working while settle settles it, completed with the tool's answer once
// it is settled. tasks/cancel is acknowledged and changes nothing (a
// recorded write is settled, never dropped); tasks/update is not served
// (a settle task never asks for input).

// TasksExtension is the extension's identifier.
const TasksExtension = "io.modelcontextprotocol/tasks"

// metaClientCapabilities is the _meta key of a call's own capabilities.
const metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"

// codeMissingCapability is the JSON-RPC error of a request that needs a
// capability the client did not declare.
const codeMissingCapability = -32021

// taskPollInterval is the polling interval a task suggests.
const taskPollInterval = 2 * time.Second

// Task statuses.
const (
	taskWorking   = "working"
	taskCompleted = "completed"
)

// Task is a task as tasks/get answers it (and, with resultType "task",
// as a write still settling answers a client that declared the
// extension).
type Task struct {
	sdk.ResultBase
	ResultType    string `json:"resultType"`
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMs is null: an intent is kept on the log for good.
	TTLMs          *int64 `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs,omitempty"`
	// Result is the tool's answer once the task is completed.
	Result *sdk.CallToolResult `json:"result,omitempty"`
}

// TaskParams are the parameters of tasks/get and tasks/cancel.
type TaskParams struct {
	sdk.ParamsBase
	TaskID string `json:"taskId"`
}

// ackResult acknowledges tasks/cancel.
type ackResult struct {
	sdk.ResultBase
	ResultType string `json:"resultType"`
}

// taskSlot carries, through a tools/call's context, the answer of a write
// still settling (set by the write, read by the tasks middleware).
type taskSlot struct{ ans *Answer }

type taskSlotKey struct{}

// markTask records an unsettled write's answer for the tasks middleware.
func markTask(ctx context.Context, a *Answer) {
	if slot, ok := ctx.Value(taskSlotKey{}).(*taskSlot); ok && !a.Settled && a.Outcome == OutcomeUnknown {
		slot.ans = a
	}
}

// declaresTasks reports whether the request's client declared the
// extension: in the call's own capabilities when it carries them, else
// in those of the session.
func declaresTasks(meta map[string]any, ss *sdk.ServerSession) bool {
	if caps, ok := meta[metaClientCapabilities].(map[string]any); ok {
		ext, _ := caps["extensions"].(map[string]any)
		_, ok := ext[TasksExtension]
		return ok
	}
	if ss == nil {
		return false
	}
	if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil {
		_, ok := ip.Capabilities.Extensions[TasksExtension]
		return ok
	}
	return false
}

// tasksMiddleware answers a write still settling with a task when the
// client declared the extension.
func tasksMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		call, ok := req.(*sdk.CallToolRequest)
		if !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		ss, _ := call.GetSession().(*sdk.ServerSession)
		if !declaresTasks(call.Params.GetMeta(), ss) {
			return next(ctx, method, req)
		}
		slot := &taskSlot{}
		res, err := next(context.WithValue(ctx, taskSlotKey{}, slot), method, req)
		if err != nil || slot.ans == nil {
			return res, err
		}
		now := time.Now().UTC().Format(time.RFC3339Nano)
		return &Task{ResultType: "task", TaskID: slot.ans.IntentID, Status: taskWorking, StatusMessage: slot.ans.Guidance,
			CreatedAt: now, LastUpdatedAt: now, PollIntervalMs: taskPollInterval.Milliseconds()}, nil
	}
}

// addTaskMethods serves tasks/get and tasks/cancel on srv for h's caller.
func (h *handlers) addTaskMethods(srv *sdk.Server) error {
	if err := sdk.AddReceivingCustomMethod(srv, "tasks/get", h.taskGet); err != nil {
		return err
	}
	return sdk.AddReceivingCustomMethod(srv, "tasks/cancel", h.taskCancel)
}

// taskIntent reads a task's intent as the caller; a task that is not one
// of the caller's is not found.
func (h *handlers) taskIntent(ctx context.Context, ss *sdk.ServerSession, p *TaskParams) (*fsm.Intent, error) {
	if p == nil || !declaresTasks(p.GetMeta(), ss) {
		return nil, &jsonrpc.Error{Code: codeMissingCapability, Message: "Missing required client capability: extensions." + TasksExtension}
	}
	_, i, err := h.s.svc.Get(ctx, h.c, p.TaskID, 0)
	switch {
	case err == nil:
		return i, nil
	case errors.Is(err, service.ErrNotFound), errors.Is(err, service.ErrForbidden), errors.Is(err, service.ErrInvalidRequest):
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}
	case held(err):
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Failed to retrieve task: the write is held for a human; calling again changes nothing"}
	}
	h.s.log.Error("mcp: tasks/get failed", "caller", h.c.Name, "err", h.s.scrub.Scrub(err.Error()))
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Failed to retrieve task: settle could not reach its log; calling again is safe"}
}

func (h *handlers) taskGet(ctx context.Context, ss *sdk.ServerSession, p *TaskParams) (*Task, error) {
	i, err := h.taskIntent(ctx, ss, p)
	if err != nil {
		return nil, err
	}
	a := answerOf(i, false)
	t := &Task{ResultType: "complete", TaskID: i.ID, Status: taskWorking, StatusMessage: a.Guidance,
		CreatedAt: i.CreatedAt.UTC().Format(time.RFC3339Nano), LastUpdatedAt: i.UpdatedAt.UTC().Format(time.RFC3339Nano),
		PollIntervalMs: taskPollInterval.Milliseconds()}
	switch i.State {
	case fsm.Confirmed, fsm.Rejected, fsm.Failed, fsm.Abandoned:
		t.Status, t.Result = taskCompleted, h.answer(a)
	}
	return t, nil
}

func (h *handlers) taskCancel(ctx context.Context, ss *sdk.ServerSession, p *TaskParams) (*ackResult, error) {
	if _, err := h.taskIntent(ctx, ss, p); err != nil {
		return nil, err
	}
	return &ackResult{ResultType: "complete"}, nil
}
