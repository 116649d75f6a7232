package webhook

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
)

// BodySchema names the body's format; a later format gets another name.
const BodySchema = "settle.webhook/v1"

// Body is what a deliverer POSTs (Content-Type application/json). The
// same event is sent with the same bytes on every attempt and by every
// process: only the signature header changes.
type Body struct {
	Schema string `json:"schema"`
	// ID is the event id (<intent_id>:<version>), stable across
	// attempts, processes and replays: deduplicate by it.
	ID string `json:"id"`
	// Type is "intent." + the outcome (intent.confirmed, intent.rejected,
	// intent.failed, intent.manual_action, intent.abandoned).
	Type string `json:"type"`
	// Created is the event's time on the log.
	Created time.Time `json:"created"`
	Intent  Intent    `json:"intent"`
	// Event is the settle.event/v1 envelope exactly as the log holds it
	// (its data: the receipt, the rejection's code, the reason a human is
	// needed, …). It holds no secret: nothing on the log does.
	Event json.RawMessage `json:"event"`
}

// Intent names the intent a settlement belongs to, from the first event
// of its log (IntentRecorded or IntentStarted). Tenant, Account and RequestID are empty when the
// intent's first event could not be read as one (a damaged log).
type Intent struct {
	ID        string  `json:"id"`
	Route     string  `json:"route"`
	Tenant    string  `json:"tenant,omitempty"`
	Account   string  `json:"account,omitempty"`
	RequestID string  `json:"request_id,omitempty"`
	State     Outcome `json:"state"`
}

// body builds the request body of a settlement event. The intent's
// names come from its first event on the log (one message get).
func (d *Deliverer) body(ctx context.Context, route string, e events.Event, raw []byte, outcome Outcome) ([]byte, error) {
	in := Intent{ID: e.IntentID, Route: route, State: outcome}
	rec, err := d.recorded(ctx, route, e.IntentID)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		in.Tenant, in.Account, in.RequestID = rec.Tenant, rec.Account, rec.RequestID
	}
	return json.Marshal(Body{Schema: BodySchema, ID: e.EventID, Type: "intent." + string(outcome),
		Created: e.At.UTC(), Intent: in, Event: raw})
}

// recorded reads the intent's first event: the intent it records (an
// IntentRecorded, or an IntentStarted that also starts its first write),
// or nil when the first event on the subject is neither (a lost event; the
// delivery goes on without the names).
func (d *Deliverer) recorded(ctx context.Context, route, intentID string) (*events.IntentRecordedData, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	m, err := d.streamOf().GetMsg(ctx, 1, jetstream.WithGetMsgSubject(events.Subject(route, intentID)))
	if err != nil {
		return nil, errors.Wrapf(err, "webhook: read intent %s", intentID)
	}
	e, err := events.Decode(m.Data)
	if err != nil {
		return nil, nil
	}
	return events.Recorded(e), nil // IntentRecorded, or IntentStarted
}
