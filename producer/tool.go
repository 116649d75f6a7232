package producer

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/internal/errkind"
)

// ErrNoKey: a tool call without the task and step its key derives from.
var ErrNoKey = errors.New("tool call without a key: task and step are required (keys derive from task + step, never from an attempt or a clock)")

// ToolCall is a write requested by a caller such as an AI agent's tool.
// Its request id, and so its intent and idempotency key, derive from the
// task and step (and the payload when KeyIncludesPayload is set): a re-run
// of the same step is the same intent, whatever attempt or time it is.
type ToolCall struct {
	// Tenant is the caller's (default: the producer's): request ids, and so
	// intents, are scoped per tenant.
	Tenant             string
	Task               string
	Step               string
	KeyIncludesPayload bool
	Route              string
	Account            string
	ParentExternalID   string
	Payload            json.RawMessage
	DryRun             bool
}

// Call executes a tool call through Execute. A call without task or step
// is refused with ErrNoKey and writes nothing.
func (p *Producer) Call(ctx context.Context, c ToolCall) (*Result, error) {
	if strings.TrimSpace(c.Task) == "" || strings.TrimSpace(c.Step) == "" {
		return nil, ErrNoKey
	}
	sum := ""
	if c.KeyIncludesPayload {
		s, err := events.PayloadSHA256(c.Payload)
		if err != nil {
			return nil, errkind.Wrap(ErrInvalidRequest, &events.FieldError{Field: "payload", Reason: err.Error()})
		}
		sum = s
	}
	return p.Execute(ctx, Request{Tenant: c.Tenant, Route: c.Route, Account: c.Account, RequestID: events.ToolKey(c.Task, c.Step, sum),
		ParentExternalID: c.ParentExternalID, Payload: c.Payload, DryRun: c.DryRun})
}
