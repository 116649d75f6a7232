package ledger

import (
	"context"
	"strconv"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
)

// MarkHeld records on the log that an intent is held after a log loss an
// operator accepted: it appends the intent's hold marker (events.Hold,
// header events.HoldHeader) to the intent's subject, after the last
// message there (per-subject CAS), unless that subject carries a marker
// already. It reports whether it appended one.
//
// The marker is the hold's record for every process on the stream: it
// refuses a new intent's "subject empty" CAS, and a reader of the subject
// finds History.Hold. A competing append on a shared stream makes MarkHeld
// read again and append after it.
func MarkHeld(ctx context.Context, js jetstream.JetStream, stream, route string, hold events.Hold) (bool, error) {
	data, err := events.EncodeHold(hold)
	if err != nil {
		return false, err
	}
	if err := events.ValidateToken("route", route); err != nil {
		return false, errors.Errorf("mark held: %w", err)
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return false, errors.Errorf("mark held %s: stream %s: %w", hold.IntentID, stream, err)
	}
	subject := events.Subject(route, hold.IntentID)
	for attempt := 0; attempt < 8; attempt++ {
		var last uint64
		m, err := st.GetLastMsgForSubject(ctx, subject)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return false, errors.Errorf("mark held %s: read the subject: %w", hold.IntentID, err)
		case m.Header.Get(events.HoldHeader) != "":
			return false, nil // held already
		default:
			last = m.Sequence
		}
		msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
		msg.Header.Set(events.HoldHeader, hold.Reason)
		msg.Header.Set(jetstream.MsgIDHeader, events.HoldMsgID(hold.IntentID))
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
		msg.Header.Set(jetstream.ExpectedStreamHeader, stream)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ack, err := js.PublishMsg(pctx, msg)
		cancel()
		switch {
		case err == nil && !ack.Duplicate:
			return true, nil
		case err == nil, isWrongLastSeq(err):
			// A duplicate (our earlier publish, whose ack was lost) or
			// another append first: read again.
			continue
		case ctx.Err() != nil:
			return false, errors.Errorf("mark held %s: %w", hold.IntentID, ctx.Err())
		}
		if apiError(err) != nil {
			return false, errors.Errorf("mark held %s: %w", hold.IntentID, err)
		}
		// A lost ack: read the subject again, which tells.
	}
	return false, errors.Errorf("mark held %s: the subject kept changing: %w", hold.IntentID, ErrConflict)
}
