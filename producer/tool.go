package producer

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
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
	id, err := p.ToolRequestID(c)
	if err != nil {
		return nil, err
	}
	return p.Execute(ctx, Request{Tenant: c.Tenant, Route: c.Route, Account: c.Account, RequestID: id,
		ParentExternalID: c.ParentExternalID, Payload: c.Payload, DryRun: c.DryRun})
}

// ToolRequestID is the request id of a tool call: events.ToolKey of its
// task and step and, with KeyIncludesPayload, the hash of its payload as
// the route records it (the route's normaliser, canon/v1) — so a retried
// step whose payload differs only in form (key order, a default spelled
// out) is the same intent. A call without task or step is ErrNoKey; a
// payload the route refuses, ErrInvalidRequest naming the field.
func (p *Producer) ToolRequestID(c ToolCall) (string, error) {
	if strings.TrimSpace(c.Task) == "" || strings.TrimSpace(c.Step) == "" {
		return "", ErrNoKey
	}
	sum := ""
	if c.KeyIncludesPayload {
		route, ok := p.routes[c.Route]
		if !ok {
			return "", errors.Errorf("%w: %q", ErrUnknownRoute, c.Route)
		}
		canon, err := normalize(route, c.Payload)
		if err == nil {
			sum, err = events.PayloadSHA256(canon)
		}
		if err != nil {
			return "", errkind.Wrap(ErrInvalidRequest, &events.FieldError{Field: "payload", Reason: err.Error()})
		}
	}
	return events.ToolKey(c.Task, c.Step, sum), nil
}

// normalize is a payload as route records it: through the route's
// normaliser, or canon/v1 for a route without one.
func normalize(route adapter.Route, payload json.RawMessage) (json.RawMessage, error) {
	if n, ok := route.Adapter.(adapter.PayloadNormalizer); ok {
		return n.NormalizePayload(payload)
	}
	return events.Canonicalize(payload)
}
